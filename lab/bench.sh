#!/bin/bash
# bench.sh — run every benchmark of the project and every test that prints a
# figure, then write ONE markdown table (docs/performance.md; the README's
# "Performance" section links it): what, measured, goal, anchor.
# `make bench` calls it after `make build` and `lab/deps.sh all`.
#
# A step that fails or prints nothing leaves its rows saying "failed (log …)"
# instead of aborting the table; every step's full output is kept in the log
# directory printed at the end.
#
# Env: EDGELB_BENCH_OUT    output file (default docs/performance.md)
#      EDGELB_BENCH_LOGS   where the logs go (default a new /tmp/edgelb-bench.* dir)
#      EDGELB_BENCH_SKIP   space-separated steps to skip: plain nft faults idle10k idle50k k8s bgp failover statesync fleet ipvs
#      EDGELB_BENCH_REUSE  set: keep a step's existing log in EDGELB_BENCH_LOGS instead of running it
#                          (re-renders the table from an earlier run)
#      EDGELB_LOAD_DURATION, EDGELB_APIDOWN, ...  passed through to the tests (lab/faults/README.md)
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
OUT=${EDGELB_BENCH_OUT:-docs/performance.md}
LOGS=${EDGELB_BENCH_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/edgelb-bench.XXXXXX")}
mkdir -p "$LOGS"
# The daemon the faults tests run: built here from this tree, so it is never stale.
if CGO_ENABLED=0 $GO build -trimpath -o "$LOGS/edgelb" ./cmd/edgelb; then
  export EDGELB_BIN=$LOGS/edgelb
fi
export EDGELB_CACHE=${EDGELB_CACHE:-/var/cache/edgelb}
SKIP=" ${EDGELB_BENCH_SKIP:-} "
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
# Figures in the docs come from a clean commit that they name: refuse a
# tree with changes (EDGELB_BENCH_DIRTY=1 runs anyway, and the table says so).
COMMIT=$(git rev-parse --short HEAD)
# Untracked files count: a stray .go file changes what is built and measured.
if [ -z "${EDGELB_BENCH_REUSE:-}" ] && [ -n "$(git status --porcelain 2>/dev/null)" ]; then
  if [ -z "${EDGELB_BENCH_DIRTY:-}" ]; then
    echo "bench: the tree has uncommitted changes; commit them (figures must name a clean commit) or set EDGELB_BENCH_DIRTY=1" >&2
    git status --short >&2
    exit 1
  fi
  COMMIT="$COMMIT (NOT FROM A CLEAN TREE: uncommitted or untracked changes)"
fi
echo "bench: commit $COMMIT" >&2
T_START=$(date +%s)

# step NAME TIMEOUT CMD... — run one step, output in $LOGS/NAME.log.
step() {
  local name=$1 limit=$2
  shift 2
  if [[ $SKIP == *" $name "* ]]; then
    echo "bench: skip $name" >&2
    echo "skipped (EDGELB_BENCH_SKIP)" >"$LOGS/$name.log"
    return
  fi
  if [ -n "${EDGELB_BENCH_REUSE:-}" ] && [ -f "$LOGS/$name.log" ]; then
    echo "bench: $name: reusing $LOGS/$name.log" >&2
    return
  fi
  echo "bench: $name: $*" >&2
  local t0=$SECONDS
  timeout --kill-after=30 "$limit" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  echo "bench: $name done in $((SECONDS - t0)) s (exit $rc; load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  echo "$rc" >"$LOGS/$name.rc"
}

# Packages whose benchmarks need no build tag (and no root).
plain_pkgs() {
  grep -l '^func Benchmark' $(git ls-files '*_test.go') 2>/dev/null |
    while read -r f; do head -3 "$f" | grep -q '^//go:build' || dirname "$f"; done | sort -u | sed 's|^|./|'
}

step plain 40m $GO test -count=1 -run '^$' -bench . -benchtime 1s $(plain_pkgs)
step nft 20m $GO test -count=1 -tags netns -run '^$' -bench Netns -benchtime 3x ./proxy/nft/
step faults 40m env EDGELB_THROUGHPUT_SECONDS=10 EDGELB_FLOW_SECONDS=30 $GO test -count=1 -p 1 -timeout 35m -tags netns -v -run '^TestNetns(Kill9During10kSync|TamperRestored|DrainUnderLoad|SIGHUPKeepsConnections|FirstPacketLatency|StoreDamageRefusesStart|Throughput|FlowStream)$' ./lab/faults/
# Idle cost at 10,000 and 50,000 services over 120 s (make test runs 2,000 over 15 s).
step idle10k 20m env EDGELB_IDLE_SERVICES=10000 EDGELB_IDLE_WINDOW_S=120 EDGELB_IDLE_STARTS=5 $GO test -count=1 -timeout 18m -tags netns -v -run '^TestNetnsIdleCost$' ./lab/faults/
step idle50k 30m env EDGELB_IDLE_SERVICES=50000 EDGELB_IDLE_WINDOW_S=120 $GO test -count=1 -timeout 28m -tags netns -v -run '^TestNetnsIdleCost$' ./lab/faults/
if [[ $SKIP != *" k8s "* ]]; then lab/tools/build.sh >"$LOGS/k8s-tools.log" 2>&1 || echo "bench: lab/tools/build.sh failed (see $LOGS/k8s-tools.log)" >&2; fi
step k8s 50m $GO test -count=1 -p 1 -timeout 45m -tags k8s -v -run '^TestK8s(Latency|TwoInstances|Services|APIServerGone60s|SIGTERMReleasesLease|PoolChangesNoDuplicates|StatusBurst)$' ./lb/k8s/ ./lab/faults/
step bgp 20m $GO test -count=1 -tags bgp -v -run '^TestBGPFRRAnnounceLatency$' ./announce/bgp/
step failover 40m env EDGELB_FAILOVER_TRIALS=20 $GO test -count=1 -p 1 -tags failover -v -run '^TestFailover(TwoGateways|DaemonKill9)$' -timeout 35m ./announce/l2/ ./lab/faults/
# The sync's cost at 1,000 new connections/s (issue 16): two cases, each with and without stateSync
# (the cost is the difference), three pairs each (the verdict on the medians), and the failover it
# buys; and the burst a dying owner opened 100 ms before its death (issue 34).
step statesync 35m env EDGELB_STATESYNC_COST=1 EDGELB_STATESYNC_COST_RUNS=3 EDGELB_STATEFUL_CASES=gw2/nat/v4/on,gw2/nat/v4/off,gw3/nat-nosnat/v6/on,gw3/nat-nosnat/v6/off $GO test -count=1 -p 1 -tags failover -v -run '^TestFailover(Stateful|StateSyncBurst|SyncLag)$' -timeout 33m ./lab/faults/ ./proxy/statesync/
if [[ $SKIP != *" fleet "* ]]; then lab/tools/build.sh etcd >"$LOGS/fleet-tools.log" 2>&1 || echo "bench: lab/tools/build.sh etcd failed (see $LOGS/fleet-tools.log)" >&2; fi
step fleet 30m $GO test -count=1 -p 1 -timeout 28m -tags fleet -v -run '^TestFleet(Shared|EtcdTrouble)$' ./lab/fleet/
step ipvs 60m env EDGELB_GUEST_RUN='^$' lab/guest/run-suite.sh

LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
ELAPSED=$(($(date +%s) - T_START))
RUN_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
if [ -n "${EDGELB_BENCH_REUSE:-}" ] && [ -f "$LOGS/meta" ]; then
  . "$LOGS/meta" # the measured run's load and duration, not the re-render's
else
  printf 'LOAD_START=%q\nLOAD_END=%q\nELAPSED=%q\nRUN_DATE=%q\nCOMMIT=%q\n' "$LOAD_START" "$LOAD_END" "$ELAPSED" "$RUN_DATE" "$COMMIT" >"$LOGS/meta"
fi

# --- extraction helpers: each prints a value or nothing -----------------------

# sedp LOG SCRIPT — the last line sed -n prints for SCRIPT.
sedp() { [ -f "$LOGS/$1.log" ] && sed -n "$2" "$LOGS/$1.log" | tail -1; }
# metric LOG BENCH-REGEX UNIT — the value before UNIT on the last matching benchmark line.
metric() {
  [ -f "$LOGS/$1.log" ] || return
  grep -E "^$2(-[0-9]+)?[[:space:]]" "$LOGS/$1.log" | tail -1 |
    awk -v u="$3" '{for (i = 3; i <= NF; i++) if ($i == u) {print $(i-1); exit}}'
}
# ns_us NANOSECONDS — "4.69 µs" or, from a millisecond up, "36.4 ms".
ns_us() { [ -n "$1" ] && awk -v v="$1" 'BEGIN {if (v >= 1e6) printf "%.1f ms", v / 1e6; else printf "%.2f µs", v / 1000}'; }
failed() { echo "failed (log: $LOGS/$1.log, exit $(cat "$LOGS/$1.rc" 2>/dev/null || echo ?))"; }

ROWS=()
MISSED=0
FAILED=0
# row STEP WHAT MEASURED GOAL ANCHOR [TEST] [CHECK] — the verdict column:
#   FAILED  the figure is missing, the step exited non-zero, or TEST failed;
#   met / MISSED  CHECK ("VALUE OP LIMIT", OP one of < <= > >= ==) computed
#                 numerically from the figure;
#   met     no CHECK but a goal, and TEST, which asserts it, passed;
#   not judged  a goal no check or test computes (said, not hidden);
#   —       no goal.
row() {
  local m=$3 verdict="—" rc
  rc=$(cat "$LOGS/$1.rc" 2>/dev/null || echo 0)
  if [ -z "$m" ]; then
    m=$(failed "$1"); verdict="FAILED"
  elif [ "$rc" != 0 ] || { [ -n "${6:-}" ] && grep -q -- "--- FAIL: $6 " "$LOGS/$1.log" 2>/dev/null; }; then
    verdict="FAILED"; m="$m — the test or its step failed (see its log)"
  elif [ -n "${7:-}" ]; then
    if judge $7; then verdict="met"; else verdict="**MISSED**"; fi
  elif [ "$4" != "—" ] && [ -n "${6:-}" ]; then
    verdict="met"
  elif [ "$4" != "—" ]; then
    verdict="not judged"
  fi
  grep -qx 'skipped (EDGELB_BENCH_SKIP)' "$LOGS/$1.log" 2>/dev/null && { m="skipped"; verdict="skipped"; }
  case $verdict in *MISSED*) MISSED=$((MISSED + 1)) ;; FAILED) FAILED=$((FAILED + 1)) ;; esac
  ROWS+=("| $2 | $m | $4 | $verdict | $5 |")
}
# judge VALUE OP LIMIT — numeric comparison; an empty VALUE is not met.
judge() {
  [ $# -eq 3 ] && [ -n "$1" ] || return 1
  awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN {
    if (op == "<") ok = v < l; else if (op == "<=") ok = v <= l; else if (op == ">") ok = v > l;
    else if (op == ">=") ok = v >= l; else if (op == "==") ok = v == l; else ok = 0; exit !ok }'
}
# num STEP SEDSCRIPT — the number a sed -n script prints from a step's log.
num() { sedp "$1" "$2"; }

# --- the rows -------------------------------------------------------------------
KP_ANCHOR='kube-proxy iptables mode: first-packet cost grows O(n) with Services (linear KUBE-SERVICES chain, KEP-3866); here the anchor is the direct path (ratio 1.00)'
# fp N METHOD — the first-packet figure of the faults log for N services.
fp() {
  sedp faults "s/.*first packet with $1 services, method $2 ([^)]*): connect via VIP p50 \([0-9.]*\) µs.*p50 ratio \([0-9.]*\) (goal ≤ 1.05; rounds \([^)]*\)).*/**\2** (VIP p50 \1 µs; rounds \3)/p"
}
# withdirect N FIGURE — FIGURE and the direct path's p50 (empty if FIGURE is).
withdirect() {
  [ -n "$2" ] && echo "$2 — direct p50 $(direct "$1")"
}
direct() {
  sedp faults "s/.*first packet with $1 services, method nat .*direct to the backend p50 \([0-9.]*\) µs.* over \([0-9×]*\) connects.*straight through the gateway (its edgelb hooks crossed, no NAT) p50 \([0-9.]*\) µs, ratio \([0-9.]*\).*/\1 µs over \2 connects (straight through the gateway, crossing edgelb's hooks: \3 µs, ratio \4)/p"
}
# fpr N METHOD — the pooled p50 ratio alone.
fpr() { sedp faults "s/.*first packet with $1 services, method $2 (.*p50 ratio \([0-9.]*\) (goal.*/\1/p"; }
row faults "First packet (TCP connect, client ns → gateway) via VIP ÷ direct to the backend through a plain router beside the gateway (no edgelb hook, no conntrack on that path; lab/faults/README.md), 10 services, method nat (DNAT + masquerade, the default)" "$(withdirect 10 "$(fp 10 nat)")" "≤ 1.05" "$KP_ANCHOR [1][2]" TestNetnsFirstPacketLatency "$(fpr 10 nat) <= 1.05"
row faults "… same, method nat-nosnat (DNAT only, client address kept; LVS-NAT's way)" "$(fp 10 nat-nosnat)" "≤ 1.05" "same [1][2]" TestNetnsFirstPacketLatency "$(fpr 10 nat-nosnat) <= 1.05"
row faults "… method nat with 10,000 services programmed" "$(withdirect 10000 "$(fp 10000 nat)")" "≤ 1.05" "same; with 10,000 Services kube-proxy iptables walks up to 10,000 rules per first packet [2]" TestNetnsFirstPacketLatency "$(fpr 10000 nat) <= 1.05"
row faults "… method nat-nosnat with 10,000 services programmed" "$(fp 10000 nat-nosnat)" "≤ 1.05" "same [2]" TestNetnsFirstPacketLatency "$(fpr 10000 nat-nosnat) <= 1.05"
v=$(sedp faults 's/.*MEASURED kernel NAT floor.*via a dnat+masquerade VIP \([0-9.]*\) µs, via a dnat-only VIP \([0-9.]*\) µs, direct \([0-9.]*\) µs (beside the gateway); ratios \([0-9.]*\) (rounds \([^)]*\)) and \([0-9.]*\) (rounds \([^)]*\)).*/masquerade **\4** (rounds \5), DNAT only **\6** (rounds \7); p50 \1, \2 and direct \3 µs/p')
row faults "… the kernel's NAT floor on the same gateway with edgelb stopped: one hand-written dnat rule, with and without masquerade" "$v" "—" "a reference, below which no NAT load balancer can go: the least NAT any of them does (hand-written \`iptables -t nat\` DNAT, MASQUERADE)"

for n in 10 10000; do
  [ $n = 10 ] && N=10 || N=10,000
  v=$(sedp faults "s/.*MEASURED throughput with $n services: wrk keep-alive \([0-9]*\) req\/s via VIP, \([0-9]*\) direct, ratio \([0-9.]*\); wrk Connection: close \([0-9]*\) req\/s via VIP, \([0-9]*\) direct, ratio \([0-9.]*\);.*/keep-alive **\3** (\1 vs \2 req\/s); \`Connection: close\` **\6** (\4 vs \5 req\/s)/p")
  row faults "HTTP requests/s via VIP ÷ direct (hook-free router), wrk 1 thread × 8 connections, $N services (TestNetnsThroughput)" "$v" "—" "the same backends without edgelb on the path" TestNetnsThroughput
  v=$(sedp faults "s/.*MEASURED throughput with $n services: .*iperf3 \([0-9.]*\) Gbit\/s via VIP, \([0-9.]*\) direct, ratio \([0-9.]*\).*/**\3** (\1 vs \2 Gbit\/s)/p")
  row faults "… TCP Gbit/s via VIP ÷ direct, one iperf3 stream, $N services" "$v" "—" "same" TestNetnsThroughput
done

v=$(sedp nft 's/.*nft cold sync 1000 services × 10 backends: \([0-9.]*\) ms wall, \([0-9.]*\) ms CPU.*/**\1 ms** (\2 ms CPU)/p')
row nft "nftables cold sync, 1,000 services × 10 backends (BenchmarkNetnsColdSync1000)" "$v" "—" "kube-proxy iptables: \"runs of 4–5 seconds each\" reported at scale [3]"
v=$(sedp nft 's/.*nft cold sync 10000 services × 10 backends: \([0-9.]*\) ms wall, \([0-9.]*\) ms CPU.*(\([0-9]*\) elements in \([0-9]*\) batches.*/**\1 ms** (\2 ms CPU; \3 elements, \4 batches)/p')
row nft "nftables cold sync, 10,000 services × 10 backends (BenchmarkNetnsColdSync10000)" "$v" "< 1 s" "kube-proxy-like layout (chain + anonymous map per service), same work via nft -f on this machine: 11–20 s [4]" "" "$(num nft 's/.*nft cold sync 10000 services × 10 backends: \([0-9.]*\) ms wall.*/\1/p') < 1000"
v=$(sedp nft 's/.*nft update 1 of 10000 services: \([0-9.]*\) ms wall, \([0-9.]*\) ms CPU (\([0-9.]*\) batches, \([0-9.]*\) elements.*/**\1 ms** (\2 ms CPU; \3 batch, \4 elements)/p')
row nft "nftables one-service update among 10,000 (BenchmarkNetnsUpdateOneOf10000)" "$v" "< 5 ms" "iptables: any change re-uploads the whole ruleset (KEP-3866) [2]; kube-proxy full resync every 30 s (--iptables-sync-period) [5]" "" "$(num nft 's/.*nft update 1 of 10000 services: \([0-9.]*\) ms wall.*/\1/p') < 5"
v=$(sedp nft 's/.*nft resync (full=false) of 10000 services, nothing changed: \([0-9.]*\) ms wall, \([0-9.]*\) ms CPU.*/**\1 ms** (\2 ms CPU; the generation gate)/p')
w=$(sedp nft 's/.*nft resync (full=true) of 10000 services, nothing changed: \([0-9.]*\) ms wall, \([0-9.]*\) ms CPU.*/; a full read-back (after a hand edit, or every 120th): \1 ms (\2 ms CPU)/p')
row nft "nftables resync of 10,000 services × 10 backends, nothing changed (BenchmarkNetnsResyncIdle10000, …Full10000)" "${v:+$v$w}" "< 50 ms" "kube-proxy rewrites everything every 30 s [5]" "" "$(num nft 's/.*nft resync (full=false) of 10000 services, nothing changed: \([0-9.]*\) ms wall.*/\1/p') < 50"
v=$(sedp faults 's/.*MEASURED restart after kill -9 at \([0-9]*\)\/\([0-9]*\) frontends: ready (kernel converged) in \([0-9.a-zµ]*\), daemon CPU \([0-9.a-zµ]*\);.*/**\3** (\4 CPU), killed at \1\/\2 frontends/p')
w=$(sedp faults 's/.*left by the killed daemon: \([0-9]*\) elements, \([0-9]*\) differences from config A.*/ (\1 elements in, \2 differences from the config)/p')
[ -n "$v" ] && v="$v$w; after the restart 0 missing, 0 stale"
row faults "kill -9 mid-sync of 10,000 services → restart → kernel == config (TestNetnsKill9During10kSync)" "$v" "converges, nothing stale, foreign tables untouched" "the cold sync above (the restart adopts what is left and writes the rest)" TestNetnsKill9During10kSync
v=$(sedp faults 's/.*MEASURED tamper repair: \([0-9]*\) kinds, each whole after the second resync that followed it at the latest; worst \([0-9.a-zµ]*\) from the tamper to the kernel read back whole, with resyncInterval \([0-9a-z]*\) (a resync.s own read-and-repair: mean \([0-9.]*\) ms.*/**each whole after ≤ 2 resyncs** (\1 kinds); worst \2 from the tamper to the kernel read back whole (resyncInterval \3; a resync: \4 ms mean)/p')
row faults "Objects deleted/changed by hand with nft → repaired (TestNetnsTamperRestored)" "$v" "whole once two resyncs began after it (the first may have been running)" "kube-proxy rewrites its rules every 30 s (--iptables-sync-period default) [5]" TestNetnsTamperRestored
v=$(sedp faults 's/.*MEASURED drain under load: \([0-9]*\) workers for \([0-9a-z.]*\), \([0-9]*\) requests (\([0-9]*\)\/s), \([0-9]*\) failed (error rate \([0-9.]*%\)), new connections to a drained backend \([0-9]*\), to a removed one \([0-9]*\).*/**\5 failed** of \3 (error rate \6; \1 clients, \2, \4 req\/s); new connections to a drained backend: \7, to a removed one: \8/p')
row faults "HTTP load through the VIP while backends are drained (weight 0, REST), removed, added (TestNetnsDrainUnderLoad)" "$v" "0 failed; 0 to drained backends" "—" TestNetnsDrainUnderLoad
v=$(sedp faults 's/.*MEASURED SIGHUP reload (same pid [0-9]*): kernel at the new config \([0-9.a-zµ]*\) after the signal; \([0-9]*\/[0-9]*\) long-lived connections survived.*new connections meanwhile \([0-9]*\), \([0-9]*\) failed.*/**\2 long-lived connections kept**, \4 of \3 new failed; new config in the kernel \1 after SIGHUP/p')
row faults "SIGHUP reload under traffic (TestNetnsSIGHUPKeepsConnections)" "$v" "no established connection dropped" "—" TestNetnsSIGHUPKeepsConnections
v=$(sedp k8s 's/.*MEASURED Kubernetes API server gone \([0-9a-z.]*\): .*during the outage, \([0-9]*\) failed; .*endpoint change in the kernel \([0-9.a-zµ]*\) after the update (\([0-9.a-zµ]*\) after the restart began), a new Service served \([0-9.a-zµ]*\) after its creation.*/**\2 failed** during \1 without the API server; after: endpoint change \3 (\4 after restart), new Service \5/p')
row k8s "Kubernetes mode: kube-apiserver gone (TestK8sAPIServerGone60s)" "$v" "keeps serving; resyncs after" "client-go informers re-watch with backoff up to 30 s [6]" TestK8sAPIServerGone60s
v=$(sedp faults 's/.*MEASURED daemon memory with \([0-9]*\) services: VmRSS \([0-9.]*\) MiB (goal < 100 MiB), peak VmHWM \([0-9.]*\) MiB; Go heap in use \([0-9.]*\) MiB.*/**\2 MiB** (peak \3 MiB; Go heap in use \4 MiB)/p')
w=$(sedp faults 's/.*MEASURED daemon memory with [0-9]* services after \([0-9]*\) connects: VmRSS \([0-9.]*\) MiB.*Go heap in use \([0-9.]*\) MiB.*/; after \1 connects through it **\2 MiB** (heap \3 MiB)/p')
a=$(sedp faults 's/.*MEASURED daemon memory with 10 services: VmRSS \([0-9.]*\) MiB.*RssFile \([0-9.]*\) MiB (the mapped executable).*/the same daemon with 10 services: \1 MiB, of which \2 MiB is the mapped executable (client-go, GoBGP are linked in)/p')
row faults "Daemon RSS with 10,000 services × 3 backends from a config file (\`edgelb run --config\`), read 2 s after the kernel converged and again after the connects (TestNetnsFirstPacketLatency)" "${v:+$v$w}" "< 100 MiB" "${a:-—}" TestNetnsFirstPacketLatency "$(num faults 's/.*MEASURED daemon memory with 10000 services: VmRSS \([0-9.]*\) MiB.*/\1/p') < 100"
# idle N — the idle-cost figures of TestNetnsIdleCost at N services.
# (the key may directly follow services=N: "services=10000 repair_s=4.9 ...")
idle() { sedp "idle$1" "s/.*MEASURED idle services=[0-9]*.* $2=\([0-9.]*\) .*/\1/p"; }
# goal G — the goals are set at 10,000 services; 50,000 is reported ("—").
goal() { if [ "$n" = 10k ]; then echo "$1"; else echo "—"; fi; }
for n in 10k 50k; do
  [ $n = 10k ] && N=10,000 || N=50,000
  v=""; c=$(idle $n cpu_pct_of_core)
  [ -n "$c" ] && v="**$c% of a core** over $(sedp idle$n 's/.*window=\([0-9a-z]*\) .*/\1/p') with $(idle $n resyncs) resyncs (interval 5 s; a resync $(idle $n resync_mean_ms) ms, $(idle $n resync_cpu_ms) ms CPU)"
  row idle$n "Idle daemon, $N services × 10 backends from a config file: CPU including resyncs (TestNetnsIdleCost)" "$v" "$(goal "< 1% of a core")" "kube-proxy: a full resync every 30 s [5]" TestNetnsIdleCost "$([ $n = 10k ] && echo "$c < 1")"
  r0=$(idle $n rss_ready_mib); r1=$(idle $n rss_after_mib); r45=$(idle $n rss_45s_mib)
  when=$(sedp idle$n 's/.*idle: config \([0-9]*\) bytes; RSS read \([0-9a-z.]*\) after ready (after ≥2 resyncs) and again after the \([0-9a-z.]*\) window (\([0-9]*\) more resyncs).*/read \2 after ready (after ≥ 2 resyncs) and again after the \3 window (\4 more resyncs); config file \1 bytes/p')
  parts=$(sedp idle$n 's/.*idle: after the window RssAnon \([0-9.]*\) MiB, RssFile \([0-9.]*\) MiB (the mapped binary), peak VmHWM \([0-9.]*\) MiB.*/; after the window RssAnon \1 MiB (the heap: live data plus what was allocated since the last GC, up to 2× the live heap, Go default GOGC), RssFile \2 MiB (the mapped binary), peak VmHWM \3 MiB (start-up)/p')
  when="$when$parts"
  row idle$n "Daemon memory (VmRSS): $N services × 10 backends loaded from a config file by \`edgelb run --config FILE\` (the binary copied into place as \`make install\` does and started as a child process of the test; no REST, no Kubernetes), resync interval 5 s (TestNetnsIdleCost)" "${r0:+**$r1 MiB** after the window, ${r45:+**$r45 MiB** 45 s after ready, }$r0 MiB at ready; $when}" "$(goal "< 128 MiB")" "the issue's hand run: 183 MB right after ready, 196 MB 50 s later (10,000 × 10, config file)" TestNetnsIdleCost "$([ $n = 10k ] && echo "$(awk -v a="$r1" -v b="${r45:-0}" 'BEGIN {print (a > b ? a : b)}') < 128")"
  # Several cold starts (EDGELB_IDLE_STARTS): the median is judged, every
  # start is shown; a single start is judged where only one ran.
  st=$(sedp idle$n 's/.*MEASURED idle-starts .* start_to_ready_median_s=\([0-9.]*\) .*/\1/p')
  if [ -n "$st" ]; then
    ph=$(sedp idle$n 's/.*MEASURED idle-starts services=[0-9]* starts=\([0-9]*\) .*all_s=\([0-9.,]*\) median_startup_config_s=\([0-9.]*\) startup_checks_s=\([0-9.]*\) startup_writer_s=\([0-9.]*\) startup_apply_s=\([0-9.]*\).*/median of \1 cold starts (each s: \2); the median start: config \3 s, host checks \4 s, writer \5 s, dataplane + first apply \6 s/p')
  else
    st=$(idle $n start_to_ready_s)
    ph=$(sedp idle$n 's/.*startup_config_s=\([0-9.]*\) startup_checks_s=\([0-9.]*\) startup_writer_s=\([0-9.]*\) startup_apply_s=\([0-9.]*\).*/one start: config \1 s, host checks \2 s, writer \3 s, dataplane + first apply \4 s/p')
  fi
  row idle$n "… start to ready, $N services from a config file (from the spawn to the first ready /readyz, polled every 10 ms; the file written before; each start from a stopped daemon, an empty table and an empty state directory)" "${st:+**$st s** ($ph)}" "$(goal "< 2 s")" "—" TestNetnsIdleCost "$([ $n = 10k ] && echo "$st < 2")"
  rp=$(idle $n repair_s)
  row idle$n "… a frontend deleted by hand, $N services: repaired by the next resync" "${rp:+**by resync $(idle $n repaired_by_resync) after it at the latest**, $rp s after the edit (interval 5 s)}" "the first resync after it" "—" TestNetnsIdleCost
done
v=$(sedp faults 's/.*MEASURED store damage — \([^:]*\): exit \([0-9]*\):.*/\1 → exit \2/p' | head -1)
v=$(grep -o 'MEASURED store damage — [^:]*: exit [0-9]*' "$LOGS/faults.log" 2>/dev/null | sed 's/MEASURED store damage — //' | paste -sd ';' -)
row faults "State file damaged after kill -9 (TestNetnsStoreDamageRefusesStart): each refused with its exit code" "${v:+$v}" "exit 3 or 4 with the file and the way out; never a panic or an empty start" "MetalLB#1774 (an IP stolen after a restart)" TestNetnsStoreDamageRefusesStart

a=$(metric plain 'BenchmarkAssignRelease/allocate/scattered' cpu-ns/op)
b=$(metric plain 'BenchmarkAssignRelease/assign/scattered' cpu-ns/op)
c=$(metric plain 'BenchmarkAssignRelease/baseline-linear-scan/contiguous' cpu-ns/op)
v=""; [ -n "$a" ] && v="**$(ns_us "$a")** allocate+release, $(ns_us "$b") assign+release (CPU/op)"
row plain "Allocator on a /16 with 60,000 taken, scattered (BenchmarkAssignRelease)" "$v" "< 10 µs/op" "first-fit linear scan (MetalLB's way) on the same pool: $(ns_us "$c")/op (same benchmark)" "" "$(awk -v a="${a:-1e99}" -v b="${b:-1e99}" 'BEGIN {print (a > b ? a : b)}') < 10000"
a=$(metric plain 'BenchmarkAllocateHugeIPv6' cpu-ns/op)
row plain "Allocator on an IPv6 /64 (BenchmarkAllocateHugeIPv6)" "${a:+**$(ns_us "$a")**/op CPU}" "< 10 µs/op" "—" "" "$a < 10000"
a=$(metric plain 'BenchmarkSyncConfig/10000-services' ms/load)
b=$(metric plain 'BenchmarkPutService/10000-services' ns/op)
v=""; [ -n "$a" ] && v="**$a ms** config load of 10,000; $(ns_us "$b") per PutService among 10,000"
row plain "Engine (one writer): load 10,000 services; replace one among 10,000 (BenchmarkSyncConfig, BenchmarkPutService)" "$v" "—" "—"
a=$(metric plain 'BenchmarkDesired1000' ns/op)
row plain "Kubernetes desired state for 1,000 Services × 3 endpoints (BenchmarkDesired1000)" "${a:+**$(ns_us "$a")**/op}" "—" "—"
v=$(sedp k8s 's/.*MEASURED Service created → status written, \([0-9]*\) samples with \([0-9]*\) existing Services: p50 \([0-9.a-zµ]*\) p99 \([0-9.a-zµ]*\) max.*/**p50 \3, p99 \4** (\1 samples, \2 existing)/p')
p99=$(sedp k8s 's/.*MEASURED Service created → status written, .* p99 \([0-9.]*\)ms max.*/\1/p')
row k8s "Kubernetes Service created → status.loadBalancer written (TestK8sLatency)" "$v" "p99 < 100 ms" "Kubernetes SLO for a mutating API call: p99 ≤ 1 s [7]" TestK8sLatency "${p99:-x} < 100"
v=$(sedp k8s 's/.*MEASURED lease handover on SIGTERM: the candidate led \([0-9.a-zµ]*\) after SIGTERM.*/**\1** after SIGTERM/p')
row k8s "Kubernetes: SIGTERM of the leading daemon → the next candidate leads (TestK8sSIGTERMReleasesLease)" "$v" "≤ 1 s" "the Lease duration (15 s) when it is not released" TestK8sSIGTERMReleasesLease
v=$(grep -o 'MEASURED pool step .*' "$LOGS/k8s.log" 2>/dev/null | sed 's/.*duplicates seen \([0-9]*\).*refused \([0-9]*\)/\1 dup, \2 refused/' | paste -sd ';' -)
row k8s "Kubernetes: 200 Services through pool delete (overlap waiting), shrink, overlap-replace, re-create (TestK8sPoolChangesNoDuplicates)" "${v:+$v}" "0 duplicates, 0 refused applies" "one IP on four Services before (issue 13)" TestK8sPoolChangesNoDuplicates
v=$(sedp k8s 's/.*MEASURED takeover after the leader was killed: \([0-9.a-zµ]*\) (lease \([0-9a-z.]*\)).*/**\1** (lease \2)/p')
row k8s "Kubernetes: second instance takes over after the leader is killed (TestK8sTwoInstances)" "$v" "≈ lease duration" "the Lease duration itself (client-go leader election)"
v=$(sedp k8s 's/.*MEASURED pending→assigned after another Service freed an IP: \([0-9.a-zµ]*\).*/**\1**/p')
row k8s "Kubernetes: pending Service assigned after an IP frees (TestK8sServices)" "$v" "≤ 1 s" "—" TestK8sServices
v=$(sedp k8s 's/.*MEASURED status-burst services=\([0-9]*\) client_qps=\([^ ]*\) all_written_s=\([0-9.]*\) leader_lost_samples=\([0-9]*\).*/**\3 s** for \1 statuses (client rate limit \2); leader lost in \4 samples/p')
w=$(sedp k8s 's/.*MEASURED status-burst .* all_written_s=\([0-9.]*\) .*/\1/p')
row k8s "Kubernetes: 200 Services created at once → every status written, client built without a rate limit (TestK8sStatusBurst)" "$v" "< 60 s, leader kept" "client-go's default 5 requests/s: ≥ 78 s for the same writes" TestK8sStatusBurst "${w:-x} < 60"
for g in 2 3; do
  v=$(sedp statesync "s/.*MEASURED statesync-cost-added gateways=$g method=\([^ ]*\) family=\([^ ]*\) owner_on=\([0-9.]*\) owner_off=\([0-9.]*\) owner_added=[-0-9.]* backup_on=\([0-9.]*\) backup_off=\([0-9.]*\) backup_added=[-0-9.]* worst_added_pct_core=\([-0-9.]*\) .*/**\7 %** of a core added on the busiest gateway (edgelb + conntrackd with stateSync minus edgelb without, same load; medians), \1, \2: owner \3 % on, \4 % off; busiest backup \5 % on, \6 % off/p")
  r=$(sedp statesync "s/.*MEASURED statesync-cost gateways=$g .*sync=on .*role=owner new_conns=\([0-9]*\/s\) .*/\1/p")
  w=$(sedp statesync "s/.*MEASURED statesync-cost-added gateways=$g .* worst_added_pct_core=\([-0-9.]*\) .*/\1/p")
  row statesync "State sync (conntrackd FTFW, a round per event: no gate) cost with $g gateways at 1,000 new connections/s through the VIP (${r:-?} reached; median of 3 pairs of runs with and without) (TestFailoverStateful, EDGELB_STATESYNC_COST=1)" "$v" "< 5% of a core per gateway" "issue 16; keepalived+LVS users run conntrackd the same way" TestFailoverStateful "${w:-x} < 5"
done
v=$(sedp statesync 's/.*MEASURED statesync-burst tries=\([0-9]*\) kept=\([0-9]*\)\/\([0-9]*\) burst=\([0-9]*\) before_death_ms=\([0-9]*\) beside_per_s=\([0-9]*\) .*/**\2 of \3 kept** (\1 tries of \4 new connections \5 ms before the owner died, \6 new connections\/s beside)/p')
k=$(sedp statesync 's/.*MEASURED statesync-burst tries=[0-9]* kept=\([0-9]*\)\/.*/\1/p')
row statesync "State sync: a burst of new connections shortly before the owner dies (links down, kill -9), 2 gateways (TestFailoverStateSyncBurst)" "$v" "≥ 199 of 200" "issue 34: 178 of 220 with the SIGSTOP gate" TestFailoverStateSyncBurst "${k:-x} >= 199"
v=$(sedp statesync 's/.*MEASURED sync-lag phase=peer-down unacked=\([0-9]*\) unsent=[0-9]* silence_ms=\([0-9]*\).*/peer gone: **\1 unacknowledged**, silent \2 ms/p')
w=$(sedp statesync 's/.*MEASURED sync-lag phase=peer-back unacked=\([0-9]*\) silence_ms=[0-9]* caught_up_ms=\([0-9]*\).*/; back: \1 unacknowledged after \2 ms/p')
row statesync "State sync lag as reported (edgelb_statesync_queue_messages, _peer_silence_seconds): two real conntrackd, one stopped, 50 new connections, restarted (TestFailoverSyncLag)" "${v:+$v$w}" "—" "issue 16: lag in REST, UI and metrics" TestFailoverSyncLag
v=$(sedp fleet 's/.*MEASURED fleet dup=\([0-9]*\) lost=\([0-9]*\) propagate_p50_ms=\([0-9.]*\) propagate_p99_ms=\([0-9.]*\) samples=\([0-9]*\) churn_s=\([0-9]*\) churn_ops=\([0-9]*\) .*refused=\([0-9]*\) .*/**p50 \3 ms, p99 \4 ms** (\5 samples); 3 × 20 clients for \6 s, \7 writes: **\1 duplicate, \2 lost** (\8 refused with 503)/p')
p99=$(sedp fleet 's/.*MEASURED fleet dup=.* propagate_p99_ms=\([0-9.]*\) .*/\1/p')
row fleet "Fleet (etcd 3.6, 3 members; 3 gateways): REST create on A → in B's and C's nftables; concurrent writers (TestFleetShared)" "$v" "p99 < 100 ms; 0 dup, 0 lost" "issue 17" TestFleetShared "${p99:-x} < 100"
v=$(sedp fleet 's/.*MEASURED fleet trouble vip_requests=\([0-9]*\) failed=\([0-9]*\) .*outage_writes=map\[\([^]]*\)\] recovery_ms=\([0-9]*\) kill9_half_written=\([0-9]*\).*/**\2 failed** of \1 VIP connections; writes in the 30 s outage: \3 (code:count); writes back \4 ms after etcd; **\5 half-written** after kill -9/p')
row fleet "Fleet: etcd leader killed, a member cut off, all members stopped 30 s; kill -9 of a gateway mid-write (TestFleetEtcdTrouble)" "$v" "0 failed; 503 meanwhile; 0 half-written" "issue 17" TestFleetEtcdTrouble
v=$(sedp bgp "s/.*VIP added → route best in FRR's RIB (\([0-9]*\) VIPs): p50 \([0-9.]*\) ms, p99 \([0-9.]*\) ms.*/**p50 \2 ms, p99 \3 ms** (\1 VIPs)/p")
w=$(sedp bgp "s/.*VIP removed → no path left in FRR's RIB: p50 \([0-9.]*\) ms, p99 \([0-9.]*\) ms.*/p50 \1 ms, p99 \2 ms/p")
row bgp "BGP: VIP added → best route in FRR's RIB (TestBGPFRRAnnounceLatency)" "$v${w:+; withdrawn → gone: $w}" "—" "FRR's own best-path work queue holds a received path ~50 ms (same test)"
v=$(sedp failover 's/.*MEASURED daemon failover .*requests through the VIP succeed again n=\([0-9]*\) p50=\([0-9]*\) ms p99=\([0-9]*\) ms max=\([0-9]*\) ms.*client neighbour entry on the new owner p50=\([0-9]*\) ms p99=\([0-9]*\) ms.*/**p50 \2 ms, p99 \3 ms** (max \4 ms; \1 trials); client neighbour entry on the new owner p50 \5 ms, p99 \6 ms/p')
row failover "L2 failover of the real daemon: 2 \`edgelb run\` (nftables, ARP, memberlist at config.example.yaml's 80 ms probes) in namespaces on a bridge; the owner's link down and its daemon killed -9 → client requests through the VIP (a new connection each, every ≤ 100 ms) succeed again (TestFailoverDaemonKill9)" "$v" "p99 < 500 ms" "keepalived/VRRP ≈ 3 s (3 × 1 s advert + skew) [8]; kube-vip ≈ 3 s, MetalLB \"a few seconds\" (issue 5); memberlist defaults detect a death in ~5.9 s p50 [4]" TestFailoverDaemonKill9 "$(sedp failover 's/.*MEASURED daemon failover .*requests through the VIP succeed again n=[0-9]* p50=[0-9]* ms p99=\([0-9]*\) ms.*/\1/p') < 500"
v=$(sedp failover 's/.*IPv4 requests succeed again *: n=\([0-9]*\) p50=\([0-9]*\) ms p99=\([0-9]*\) ms.*/**p50 \2 ms, p99 \3 ms** (\1 kill -9 trials)/p')
w=$(sedp failover 's/.*IPv4 client entry has new MAC: n=[0-9]* p50=\([0-9]*\) ms p99=\([0-9]*\) ms.*/p50 \1 ms, p99 \2 ms/p')
row failover "… the L2 announcer alone (helper processes with the real ARP/NDP responders, no daemon, no dataplane: TestFailoverTwoGateways)" "$v${w:+; client neighbour entry: $w}" "—" "the row above (the daemon with its dataplane)" TestFailoverTwoGateways
v=$(sedp faults 's/.*MEASURED flow stream .*: \([0-9]*\) new flows\/s for \([0-9.a-z]*\) (\([0-9]*\) connects through the VIP, \([0-9]*\) streamed as new): lag p50 \([0-9.a-zµ]*\) p99 \([0-9.a-zµ]*\) max \([0-9.a-zµ]*\) (goal ≤ 1 s); daemon CPU \([0-9.]*\)% of a core.*/**lag p99 \6, daemon CPU \8% of a core** (p50 \5, max \7; \1 new flows\/s for \2: \3 connects, \4 streamed as new)/p')
lag=$(sedp faults 's/.*MEASURED flow stream .*lag p50 [^ ]* p99 \([0-9.]*\)\(m*s\) .*/\1 \2/p' | awk '{print ($2 == "ms") ? $1 / 1000 : $1}')
fcpu=$(sedp faults 's/.*MEASURED flow stream .*daemon CPU \([0-9.]*\)% of a core.*/\1/p')
row faults "Flow stream of the real daemon: new TCP connections through a real nft VIP from the client namespace → conntrack events in the gateway namespace → the daemon's FlowSource → its SSE stream (TestNetnsFlowStream)" "$v" "lag p99 ≤ 1 s, CPU < 5%" "—" TestNetnsFlowStream "$(awk -v l="${lag:-99}" -v c="${fcpu:-99}" 'BEGIN {print (l <= 1 && c < 5) ? 0 : 1}') == 0"
v=$(sedp plain 's/.*new flows\/s for [0-9]*s.*lag p50 \([0-9.a-zµ]*\) p99 \([0-9.a-zµ]*\) max \([0-9.a-zµ]*\).*server CPU \([0-9.]*\)% of a core.*/**lag p99 \2, CPU \4% of a core** (p50 \1, max \3; 1,000 new flows\/s)/p')
row plain "… the stream's hub alone: a fake flow source in a child process, 1,000 new flows/s for 30 s (BenchmarkStreamNewFlows)" "$v" "—" "the row above (real conntrack)"
gi() { metric ipvs "BenchmarkIPVSGuestSync/$1" "$2"; }
a=$(gi ipvs/cold-1000x10 ms/op); b=$(gi nftables/cold-1000x10 ms/op)
row ipvs "IPVS vs nftables in the QEMU guest: cold sync 1,000 × 10 (BenchmarkIPVSGuestSync)" "${a:+IPVS **$a ms**, nftables **$b ms**}" "—" "each other, same guest (docs/performance-ipvs.md)"
a=$(gi ipvs/update1-at-1000 ms/op); b=$(gi nftables/update1-at-1000 ms/op)
row ipvs "IPVS vs nftables in the guest: one-service update at 1,000" "${a:+IPVS **$a ms**, nftables **$b ms**}" "—" "each other, same guest"
a=$(metric ipvs "BenchmarkIPVSGuestSync/ipvs/noop-at-1000" resync-ms/op); b=$(metric ipvs "BenchmarkIPVSGuestSync/nftables/noop-at-1000" resync-ms/op)
row ipvs "IPVS vs nftables in the guest: a resync of 1,000 × 10, nothing changed" "${a:+IPVS **$a ms**, nftables **$b ms**}" "—" "each other, same guest; from c821043 on an IPVS resync reads 1/8 of the services' destinations (proxy/ipvs/README.md), before it read all (1,152 ms on d4adc5b)"

# --- the file -------------------------------------------------------------------
{
  echo "# Performance"
  echo
  echo "Written by \`make bench\` (lab/bench.sh) on $RUN_DATE, commit $COMMIT."
  [ -n "${EDGELB_BENCH_REUSE:-}" ] && echo "Rendered again from that run's logs (no step re-run) by lab/bench.sh of commit $(git rev-parse --short HEAD)."
  echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r), shared with other engineers'"
  echo "builds: load average $LOAD_START at the start, $LOAD_END at the end (1/5/15 min); the run took $((ELAPSED / 60)) min."
  echo "Wall-clock figures on this machine include waiting for a core; rows give CPU time where the test measures it."
  echo "One run each — read them as orders of magnitude and ratios, not as fine-grained numbers."
  echo
  echo "| what | measured | goal | verdict | anchor |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${ROWS[@]}"
  echo
  echo "Verdicts: $MISSED goal(s) MISSED, $FAILED row(s) FAILED (a figure missing or its test failed)."
  echo
  echo "Each row comes from one line its test or benchmark prints (grep the step's log for MEASURED, \`nft cold sync\`,"
  echo "\`nft update\`, a Benchmark line, or the summary lines of the failover and BGP tests). Steps: plain benchmarks of"
  echo "every package without a build tag; \`-tags netns -bench Netns ./proxy/nft\`; \`lab/faults\` (netns); \`lb/k8s\` and"
  echo "\`lab/faults\` (k8s); \`announce/bgp\` (bgp); \`announce/l2\` (failover); \`lab/guest/run-suite.sh\` (IPVS guest"
  echo "benchmarks only). A row saying \"failed\" names the log of its step."
  echo
  echo "Anchors:"
  echo "[1] SIG Scalability, *Time To First Packet* SLI — SYN sent → first packet from the backend (SYN/ACK), what is measured here:"
  echo "    https://github.com/kubernetes/community/blob/master/sig-scalability/slos/first_packet_latency.md"
  echo "[2] KEP-3866 (nftables kube-proxy), *The iptables kernel subsystem has unfixable performance problems*: data-plane rules"
  echo "    O(n) in Services; no incremental control-plane change: https://github.com/kubernetes/enhancements/tree/master/keps/sig-network/3866-nftables-proxy"
  echo "[3] kubernetes/kubernetes#92836, on min-sync-period: \"lots of reports of people whose iptables runs were 4-5 seconds each\"."
  echo "[4] Measured on this machine before the dataplane was written (proxy/nft/README.md, *Layout*): 10,000 × 10 loaded"
  echo "    with nft -f as a chain + anonymous map per service (kube-proxy's nftables shape) 11–20 s, as flat shared maps"
  echo "    0.9 s. Same lab notes: hashicorp/memberlist's DefaultLANConfig detects a killed node in p50 ≈ 5.9 s (edgelb's"
  echo "    tuning, announce/l2: ~0.3 s)."
  echo "[5] kube-proxy \`--iptables-sync-period\` (and \`--ipvs-sync-period\`) default 30s: the periodic full resync"
  echo "    (kube-proxy reference; OpenShift's kubeProxyConfig table lists the same default)."
  echo "[6] lb/k8s/README.md, *Known limits*: informers re-watch on client-go's reconnect backoff (0.8 s doubling to 30 s)."
  echo "[7] SIG Scalability API call latency SLO: mutating calls on single objects, p99 ≤ 1 s:"
  echo "    https://github.com/kubernetes/community/blob/master/sig-scalability/slos/api_call_latency.md"
  echo "[8] RFC 5798 (VRRPv3) Master_Down_Interval = 3 × Advertisement_Interval + Skew_Time; keepalived's default"
  echo "    advert_int is 1 s. kube-vip and MetalLB figures as given in issue 5."
} >"$OUT"
echo "bench: wrote $OUT ($(grep -c '^| ' "$OUT") table lines); logs in $LOGS" >&2
