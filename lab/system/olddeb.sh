#!/bin/bash
# olddeb.sh COMMIT — prints the path of edgelb's .deb built from COMMIT with
# that commit's own packaging (lab/package/build-deb.sh), cached in
# $EDGELB_CACHE, for lab/system's upgrade test. Nothing is checked in.
# The version is set to the scheme build-deb.sh uses now
# (0~git<commit time UTC>.<short hash>): a checkout from git archive has no
# history for `git describe`, and the upgrade must sort as one.
# Prints nothing when this checkout lacks the commit (a shallow clone).
set -euo pipefail
commit=$1
cache=${EDGELB_CACHE:-/var/cache/edgelb}
cd "$(dirname "$0")/../.."
git cat-file -e "$commit^{commit}" 2>/dev/null || exit 0
full=$(git rev-parse "$commit")
ver=0~git$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S "$full").$(git rev-parse --short "$full")
out="$cache/edgelb_${ver}_$(dpkg --print-architecture).deb"
if [ ! -s "$out" ]; then
  tmp=$(mktemp -d /tmp/esys-olddeb.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  mkdir "$tmp/src" "$tmp/deb"
  git archive "$full" | tar -x -C "$tmp/src"
  (cd "$tmp/src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/edgelb/edgelb/cmd/edgelb/internal/version.Version=$ver" \
     -o bin/edgelb ./cmd/edgelb && lab/package/build-deb.sh bin/edgelb) >&2
  fakeroot sh -ec "dpkg-deb -R '$tmp'/src/bin/edgelb_*.deb '$tmp/deb'
    sed -i 's/^Version: .*/Version: $ver/' '$tmp/deb/DEBIAN/control'
    dpkg-deb --root-owner-group -Zgzip --build '$tmp/deb' '$out.tmp.$$'" >&2
  mv "$out.tmp.$$" "$out"
fi
echo "$out"
