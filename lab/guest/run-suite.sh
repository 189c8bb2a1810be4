#!/bin/bash
# run-suite.sh — build the ipvsguest test binary of every package that has
# ipvsguest tests and run them all in one guest boot (lab/guest/run.sh).
# `make test-ipvs` calls this. Fails when a binary fails or the guest reports
# no exit code.
# Env: EDGELB_GUEST_TAGS   build tag of the guest tests (default ipvsguest; the
#                          Makefile passes it so lab/testcheck sees the target)
#      EDGELB_GUEST_RUN    -test.run pattern (default ^TestIPVSGuest)
#      EDGELB_GUEST_BENCH  -test.bench pattern (default ^BenchmarkIPVSGuest; "none" skips)
#      EDGELB_GUEST_PKGS   packages to consider (default ./...)
#      plus everything run.sh reads (EDGELB_GUEST_ENGINE, _TIMEOUT, ...).
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
TAGS=${EDGELB_GUEST_TAGS:-ipvsguest}
out=$(mktemp -d "${TMPDIR:-/tmp}/edgelb-suite.XXXXXX"); trap 'rm -rf "$out"' EXIT
specs=()
while read -r dir imp; do
  # Only packages with a test file carrying the ipvsguest build tag.
  grep -qs -l "^//go:build.*$TAGS" "$dir"/*_test.go || continue
  name=$(echo "${imp#github.com/edgelb/edgelb/}" | tr / _).test
  echo "run-suite: building $imp" >&2
  CGO_ENABLED=0 $GO test -c -trimpath -tags "$TAGS" -o "$out/$name" "$imp"
  [ -f "$out/$name" ] && specs+=("$out/$name:$dir")
done < <(CGO_ENABLED=0 $GO list -tags "$TAGS" -f '{{.Dir}} {{.ImportPath}}' ${EDGELB_GUEST_PKGS:-./...})
[ ${#specs[@]} -gt 0 ] || { echo "run-suite: no package has ipvsguest tests" >&2; exit 1; }
# The daemon, for guest tests that run `edgelb run` (lab/edgelbbin: EDGELB_BIN).
echo "run-suite: building ./cmd/edgelb" >&2
CGO_ENABLED=0 $GO build -trimpath -o "$out/edgelb" ./cmd/edgelb
export EDGELB_GUEST_FILES="${EDGELB_GUEST_FILES:-} $out/edgelb"
args=(-test.v -test.count=1 -test.timeout=40m -test.run "${EDGELB_GUEST_RUN:-^TestIPVSGuest}")
bench=${EDGELB_GUEST_BENCH:-^BenchmarkIPVSGuest}
[ "$bench" != none ] && args+=(-test.bench "$bench" -test.benchtime=1x)
set +e
lab/guest/run.sh "${specs[@]}" -- "${args[@]}" | tee "$out/log"
rc=${PIPESTATUS[0]}
set -e
# A small table of the guest benchmarks: every metric whose unit ends in ms/op.
if grep -q '^BenchmarkIPVSGuest' "$out/log"; then
  echo; echo "guest benchmarks (one run each, same guest):"
  printf '  %-52s %-14s %10s\n' benchmark metric value
  awk '/^BenchmarkIPVSGuest/ {n=$1; sub(/-[0-9]+$/, "", n); sub(/^BenchmarkIPVSGuest/, "", n)
       for (i = 3; i <= NF; i++) if ($i ~ /ms\/op$/) printf "  %-52s %-14s %10s\n", n, $i, $(i-1)}' "$out/log"
fi
exit "$rc"
