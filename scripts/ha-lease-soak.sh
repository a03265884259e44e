#!/usr/bin/env bash
# Whether a leader keeps its etcd lease on a loaded host (docs/performance.md, "Master
# failover"): a one-member etcd on loopback, three mc-master standing for one cluster with
# etcd_ttl_ms=TTL_MS, `stress-ng --cpu 2` for SECONDS; then counts, in the masters' logs, the
# wins, the step-downs and the renewals that failed. Any step-down means the lease is too
# short for this host (every one is a failover the clients see).
#
# usage: scripts/ha-lease-soak.sh [TTL_MS [SECONDS]]     (default 1000 60; MC_BUILD_DIR:
#        the build folder, default build; MC_ETCD_BIN: etcd, default etcd on the PATH)
set -euo pipefail

ttl=${1:-1000}
secs=${2:-60}
top=$(cd "$(dirname "$0")/.." && pwd)
build=${MC_BUILD_DIR:-$top/build}
etcd_bin=${MC_ETCD_BIN:-etcd}
master=$build/daemon/mcmaster/mc-master
command -v "$etcd_bin" >/dev/null || { echo "ha-lease-soak: no etcd (etcd-server)" >&2; exit 77; }
command -v stress-ng >/dev/null || { echo "ha-lease-soak: no stress-ng" >&2; exit 77; }
[ -x "$master" ] || { echo "ha-lease-soak: $master not built" >&2; exit 2; }

dir=$(mktemp -d /tmp/mcstore-lease-soak.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
. "$top/scripts/lib-etcd.sh"
mc_etcd_start "$dir" --heartbeat-interval 50 --election-timeout 500 || exit 1
export MC_CLUSTER_TOKEN=lease-soak
masters=()
for i in 0 1 2; do
    "$master" --listen 127.0.0.1:0 --etcd "$etcd_url" --cluster-id soak \
        --set "etcd_ttl_ms=$ttl" >"$dir/m$i.log" 2>&1 &
    masters+=($!)
done
sleep 3
stress-ng --cpu 2 --timeout "${secs}s" >/dev/null 2>&1 || true
kill "${masters[@]}"
wait "${masters[@]}" 2>/dev/null || true
wins=$(cat "$dir"/m*.log | grep -c 'leading cluster' || true)
downs=$(cat "$dir"/m*.log | grep -c 'stepping down\|not leading any more' || true)
warns=$(cat "$dir"/m*.log | grep -c 'renewing the leader lease' || true)
echo "lease $ttl ms, $secs s under stress-ng --cpu 2: $wins win(s), $downs step-down(s)," \
     "$warns failed renewal(s)"
grep -h 'stepping down\|not leading any more\|renewing the leader lease' "$dir"/m*.log | head -5 || true
[ "$downs" -eq 0 ]
