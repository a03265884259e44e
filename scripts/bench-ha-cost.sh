#!/usr/bin/env bash
# The steady-state cost of HA on the master's RPC rate (issue: >= 0.95x): master-rpc-bench
# without and with `--etcd` (a one-member etcd on loopback that this script starts), in
# PAIRS back-to-back pairs whose order alternates (without-with, with-without, ...) so that a
# drift of the host's load falls on both kinds alike. Each pair gives one ratio per phase
# (with / without); the figure is the median of the pairs' ratios, printed beside the range.
#
# usage: scripts/bench-ha-cost.sh [PAIRS [SECONDS]]      (default 8 pairs of 1 s runs)
#        MC_BENCH_BUSY=1: the same beside `stress-ng --cpu 2` (the busy-host figure)
#        MC_BUILD_DIR: the build folder (default build); MC_ETCD_BIN: etcd (default on PATH)
# Exit: 0 done (whatever the ratio: it is a measurement), 77 etcd or the bench missing.
set -euo pipefail

pairs=${1:-8}
secs=${2:-1}
top=$(cd "$(dirname "$0")/.." && pwd)
build=${MC_BUILD_DIR:-$top/build}
etcd_bin=${MC_ETCD_BIN:-etcd}
bench=$build/tests/bench/master-rpc-bench
[[ $pairs =~ ^[1-9][0-9]?$ ]] || { echo "bench-ha-cost: PAIRS must be 1..99" >&2; exit 2; }
[[ $secs =~ ^[1-9][0-9]?$ ]] || { echo "bench-ha-cost: SECONDS must be 1..99" >&2; exit 2; }
command -v "$etcd_bin" >/dev/null || { echo "bench-ha-cost: no etcd (etcd-server)" >&2; exit 77; }
[ -x "$bench" ] || { echo "bench-ha-cost: $bench not built" >&2; exit 77; }

dir=$(mktemp -d /tmp/mcstore-ha-cost.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
. "$top/scripts/lib-etcd.sh"
mc_etcd_start "$dir" || exit 1
if [ "${MC_BENCH_BUSY:-0}" = 1 ]; then
    command -v stress-ng >/dev/null || { echo "bench-ha-cost: no stress-ng" >&2; exit 77; }
    stress-ng --cpu 2 --timeout 3600s >/dev/null 2>&1 &
    pids+=($!)
    host="busy (stress-ng --cpu 2)"
else
    host="quiet"
fi

run() { # run KIND N: one bench run, its JSON line into $dir/KIND.N
    local args=(--seconds "$secs")
    [ "$1" = with ] && args+=(--etcd "$etcd_url")
    "$bench" "${args[@]}" 2>"$dir/$1.$2.err" | grep '^{' >"$dir/$1.$2" ||
        { echo "bench-ha-cost: master-rpc-bench failed ($1, pair $2):" >&2
          tail -5 "$dir/$1.$2.err" >&2; exit 1; }
}
echo "bench-ha-cost: $pairs pairs of ${secs}s runs, $host, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$pairs"); do
    if [ $((i % 2)) -eq 1 ]; then run without "$i"; run with "$i"; else run with "$i"; run without "$i"; fi
done
python3 - "$dir" "$pairs" <<'EOF'
import json, statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
print(f"{'phase':>6} {'without keys/s (median)':>24} {'with keys/s (median)':>21} "
      f"{'with/without per pair (median, min-max)':>40}")
for ph in ("put", "get", "exist"):
    k = f"{ph}_keys_per_s"
    wo = [json.load(open(f"{d}/without.{i}"))[k] for i in range(1, n + 1)]
    wi = [json.load(open(f"{d}/with.{i}"))[k] for i in range(1, n + 1)]
    r = [b / a for a, b in zip(wo, wi) if a > 0]
    print(f"{ph:>6} {statistics.median(wo):>24.0f} {statistics.median(wi):>21.0f} "
          f"{statistics.median(r):>23.2f}x ({min(r):.2f}-{max(r):.2f})")
EOF
echo "bench-ha-cost: load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
