#!/bin/bash
# soak-clones.sh N OUTDIR: N fresh clones of HEAD in a row, each running .ci/run
# exactly as CI does; prints one line per run (wall time, pass/fail) and then
# testcheck's pass/fail table per test over all runs. A failed run does not stop
# the soak: the point is to find every flake, not the first.
#
# EDGELB_SOAK_BURNERS=K (make soak-load sets it to the number of cores): K CPU
# burners at normal priority run beside each clone's whole run, so every core
# is busy the way a CI runner or a laptop building something else is; the
# load average is sampled every 30 s (runI.load) and summed up per run.
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
burners=${EDGELB_SOAK_BURNERS:-0}
bg=()
stop_bg() {
	[ ${#bg[@]} -gt 0 ] && kill "${bg[@]}" 2>/dev/null
	wait "${bg[@]}" 2>/dev/null
	bg=()
}
trap stop_bg EXIT
trap "exit 1" INT TERM HUP
# A burner: a shell loop that never sleeps (one core each; nothing to install).
burn() { exec bash -c 'while :; do :; done'; }
for i in $(seq 1 "$n"); do
	dir=$(mktemp -d /tmp/edgelb-soak-XXXXXX)
	git clone -q "$root" "$dir/edgelb" && git -C "$dir/edgelb" checkout -q "$commit"
	start=$(date +%s)
	echo "soak-clones: run $i/$n started $(date -u +%H:%M:%S) in $dir/edgelb${burners:+ with $burners CPU burners}"
	for _ in $(seq 1 "$burners"); do burn & bg+=($!); done
	(while :; do cut -d' ' -f1-3 /proc/loadavg; sleep 30; done) >"$out/run$i.load" & bg+=($!)
	if (cd "$dir/edgelb" && .ci/run) >"$out/run$i.log" 2>&1; then res=green; else res=FAILED; fi
	secs=$(( $(date +%s) - start ))
	stop_bg
	load=$(awk '{n++; s+=$1; if ($1>m) m=$1; if (n==1 || $1<lo) lo=$1} END {if (n) printf "; load average (1 min) min %.2f mean %.2f max %.2f over %d samples", lo, s/n, m, n}' "$out/run$i.load")
	mkdir -p "$out/run$i"
	cp -r "$dir/edgelb/bin/test-reports/." "$out/run$i/" 2>/dev/null
	line="run $i: $res in $((secs / 60)) min $((secs % 60)) s ($(grep -E '[0-9]+ passed, [0-9]+ failed' "$out/run$i.log" | tail -1))$load"
	echo "soak-clones: $line" | tee -a "$summary"
	rm -rf "$dir"
done
"$root/bin/testcheck" soak "$out"/run*/ | tee "$out/table.txt"
cat "$summary"
# Any failed run fails the soak (make soak-load's promise).
! grep -q ': FAILED in' "$summary"
