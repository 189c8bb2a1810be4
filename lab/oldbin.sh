#!/bin/bash
# oldbin.sh COMMIT — prints the path of an edgelb binary built from COMMIT
# (cached in $EDGELB_CACHE), for lab/faults' TestNetnsUpgradeUnderLoad.
# Prints nothing when this checkout lacks the commit (a shallow clone): the
# test then skips and says why.
set -euo pipefail
commit=$1
cache=${EDGELB_CACHE:-/var/cache/edgelb}
cd "$(dirname "$0")/.."
git cat-file -e "$commit^{commit}" 2>/dev/null || exit 0
full=$(git rev-parse "$commit")
out="$cache/edgelb-$full"
if [ ! -x "$out" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  git archive "$full" | tar -x -C "$tmp"
  mkdir -p "$cache"
  (cd "$tmp" && CGO_ENABLED=0 go build -trimpath -o "$out.tmp" ./cmd/edgelb) >&2
  mv "$out.tmp" "$out"
fi
echo "$out"
