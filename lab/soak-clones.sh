#!/bin/bash
# soak-clones.sh N OUTDIR: N fresh clones of HEAD in a row, each running .ci/run
# exactly as CI does; prints one line per run (wall time, pass/fail) and then
# testcheck's pass/fail table per test over all runs. A failed run does not stop
# the soak: the point is to find every flake, not the first.
set -uo pipefail
n=${1:-5}
out=${2:-bin/soak-clones}
root=$(git rev-parse --show-toplevel)
commit=$(git -C "$root" rev-parse HEAD)
if [ -n "$(git -C "$root" status --porcelain)" ]; then
	echo "soak-clones: the tree has uncommitted changes; the clones would test $commit without them" >&2
fi
rm -rf "$out" && mkdir -p "$out"
out=$(cd "$out" && pwd)
echo "soak-clones: $n fresh clones of $commit"
summary=$out/summary.txt
: >"$summary"
for i in $(seq 1 "$n"); do
	dir=$(mktemp -d /tmp/edgelb-soak-XXXXXX)
	git clone -q "$root" "$dir/edgelb" && git -C "$dir/edgelb" checkout -q "$commit"
	start=$(date +%s)
	echo "soak-clones: run $i/$n started $(date -u +%H:%M:%S) in $dir/edgelb"
	if (cd "$dir/edgelb" && .ci/run) >"$out/run$i.log" 2>&1; then res=green; else res=FAILED; fi
	secs=$(( $(date +%s) - start ))
	mkdir -p "$out/run$i"
	cp -r "$dir/edgelb/bin/test-reports/." "$out/run$i/" 2>/dev/null
	line="run $i: $res in $((secs / 60)) min $((secs % 60)) s ($(grep -E '[0-9]+ passed, [0-9]+ failed' "$out/run$i.log" | tail -1))"
	echo "soak-clones: $line" | tee -a "$summary"
	rm -rf "$dir"
done
"$root/bin/testcheck" soak "$out"/run*/ | tee "$out/table.txt"
cat "$summary"
