#!/usr/bin/env bash
# How mcstore waits, on a quiet and on a busy host: 4 KiB gets at batch 1 by 1, 2 and 4
# clients against a standalone agent, next to redis-benchmark -P 1 over a unix socket in
# the same run, and next to mc's own fixed settings:
#   adaptive      the default (node-wide poller count, busy/quiet from the agent's run
#                 delay: docs/decisions.md, "Adaptive waiting")
#   always-sleep  agent_spin_us=0 and MC_CLIENT_SPIN_US=0: every round trip sleeps
#   always-spin   adaptive_wait=false: poll agent_spin_us / MC_CLIENT_SPIN_US whatever the
#                 load (what mcstore did before)
# first with the host as it is ("quiet"), then under `stress-ng --cpu $(nproc)` ("busy").
# Prints the figures, the ratios and the goals of issue 13 met or missed. Not part of CI.
# About 3 minutes.
#
# Environment: MC_BENCH_BUILD (build dir, default build), MC_BENCH_SECONDS (2, per run),
# MC_BENCH_NO_BUILD=1 (use the build as it is), MC_BENCH_LOOP (io_uring|epoll: the agent's
# loop, default io_uring). Every process it starts (agents, redis-server, stress-ng) is
# stopped on exit, whatever happens.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
builddir=${MC_BENCH_BUILD:-build}
secs=${MC_BENCH_SECONDS:-2}
loop=${MC_BENCH_LOOP:-io_uring}
keys=4096

if [ "${MC_BENCH_NO_BUILD:-0}" != 1 ]; then
    scripts/setup.sh "$builddir" >/dev/null
    ninja -C "$builddir" daemon/agent/mc-agent tests/bench/mc-bench >/dev/null
fi
agent_bin=$builddir/daemon/agent/mc-agent
bench=$builddir/tests/bench/mc-bench
for b in "$agent_bin" "$bench"; do
    [ -x "$b" ] || { echo "bench-busy: $b is missing" >&2; exit 1; }
done
for t in redis-server redis-benchmark stress-ng; do
    command -v "$t" >/dev/null || { echo "bench-busy: $t is missing (scripts/setup.sh)" >&2; exit 1; }
done

run=$(mktemp -d /tmp/mcstore-busy.XXXXXX)
raw=$run/raw
mkdir -p "$raw"
agent=""
redis=""
stress=""
# shellcheck disable=SC2317  # called from the traps
stop() {
    local p
    for p in "$@"; do
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in "$@"; do
        wait "$p" 2>/dev/null || true
    done
}
# shellcheck disable=SC2317
cleanup() {
    stop $agent $redis $stress
    rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for FILE PID WHAT: poll until FILE exists, for up to 10 s
wait_for() {
    local _
    for _ in $(seq 1 200); do
        [ -e "$1" ] && return 0
        kill -0 "$2" 2>/dev/null || { echo "bench-busy: $3 exited" >&2; return 1; }
        sleep 0.05
    done
    echo "bench-busy: $3 did not come up" >&2
    return 1
}

# agent_start SETTING: a fresh agent with SETTING's knobs on $run/agent.sock
agent_start() {
    local args=(--standalone --socket "$run/agent.sock" --dram 256M --ready-file "$run/ready"
                --set "loop=$loop")
    case $1 in
    always-sleep) args+=(--set agent_spin_us=0) ;;
    always-spin) args+=(--set adaptive_wait=false) ;;
    esac
    rm -f "$run/ready"
    "$agent_bin" "${args[@]}" 2>"$run/agent-$1.log" &
    agent=$!
    wait_for "$run/ready" "$agent" "the agent" || { cat "$run/agent-$1.log" >&2; exit 1; }
}

# mc COND SETTING CLIENTS: one mc-bench run of 4 KiB gets to raw/COND.SETTING.CLIENTS.json
mc() {
    local out=$raw/$1.$2.$3 spin=()
    [ "$2" = always-sleep ] && spin=(env MC_CLIENT_SPIN_US=0)
    if ! "${spin[@]}" "$bench" --socket "$run/agent.sock" --seconds "$secs" --op get \
        --size 4096 --batch 1 --clients "$3" --keys "$keys" >"$out.out" 2>"$out.err"; then
        echo "bench-busy: mc-bench ($1, $2, $3 clients) failed:" >&2
        cat "$out.err" >&2
        exit 1
    fi
    tail -n 1 "$out.out" >"$out.json"
}

# measure COND: every setting and Redis, on the host as it is now
measure() {
    local setting c
    for setting in adaptive always-sleep always-spin; do
        echo "bench-busy: $1, $setting" >&2
        agent_start "$setting"
        for c in 1 2 4; do
            mc "$1" "$setting" "$c"
        done
        "$builddir/libmc/mcctl" --socket "$run/agent.sock" stats >"$raw/$1.$setting.stats" \
            2>/dev/null || true
        stop "$agent"
        agent=""
    done
    echo "bench-busy: $1, redis" >&2
    for c in 1 4; do
        redis-benchmark -s "$run/redis.sock" --csv -t get -d 4096 -P 1 -c "$c" \
            -n $((c == 1 ? 100000 : 200000)) >"$raw/$1.redis.$c.csv" 2>"$raw/$1.redis.$c.err"
    done
}

redis-server --port 0 --unixsocket "$run/redis.sock" --unixsocketperm 700 --save '' \
    --appendonly no --dir "$run" --logfile "$run/redis.log" --daemonize no &
redis=$!
wait_for "$run/redis.sock" "$redis" "redis-server" || { cat "$run/redis.log" >&2; exit 1; }
# the keys redis-benchmark GETs: one, of 4 KiB (as its own SET would leave)
redis-benchmark -s "$run/redis.sock" -t set -d 4096 -n 1000 -c 1 -q >/dev/null

measure quiet
stress-ng --cpu "$(nproc)" --timeout 0 --quiet &
stress=$!
sleep 1
measure busy
stop "$stress"
stress=""

machine="$(nproc) vCPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)),"
machine="$machine kernel $(uname -r), $(redis-server --version | cut -d' ' -f1-3), loop $loop,"
machine="$machine load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$raw" "$machine" "$secs" <<'PY'
import csv, json, os, sys

raw, machine, secs = sys.argv[1:4]

def mc(cond, setting, clients):
    try:
        with open(os.path.join(raw, f"{cond}.{setting}.{clients}.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def redis(cond, clients):
    try:
        with open(os.path.join(raw, f"{cond}.redis.{clients}.csv")) as f:
            r = {row["test"]: row for row in csv.DictReader(f)}["GET"]
        return {"ops_per_s": float(r["rps"]), "p50_us": 1000 * float(r["p50_latency_ms"]),
                "p99_us": 1000 * float(r["p99_latency_ms"])}
    except (OSError, KeyError, ValueError):
        return None

def fmt(x, unit):
    if x is None:
        return "-"
    if unit == "ops/s":
        return f"{x / 1000:.1f} k/s" if x >= 1000 else f"{x:.0f} /s"
    return f"{x:.1f} µs" if x < 1000 else f"{x / 1000:.2f} ms"

print(f"\n4 KiB get, batch 1, {secs} s per run; {machine}\n")
print(f"| host | clients | adaptive | always-sleep | always-spin | Redis -P 1 |")
print(f"|---|---|---|---|---|---|")
for cond in ("quiet", "busy"):
    for c in (1, 2, 4):
        cells = []
        for s in ("adaptive", "always-sleep", "always-spin"):
            m = mc(cond, s, c)
            cells.append("-" if m is None else
                         f"{fmt(m['ops_per_s'], 'ops/s')}, p50 {fmt(m['p50_us'], 'us')}, "
                         f"p99 {fmt(m['p99_us'], 'us')}")
        r = redis(cond, c) if c != 2 else None
        cells.append("-" if r is None else
                     f"{fmt(r['ops_per_s'], 'ops/s')}, p50 {fmt(r['p50_us'], 'us')}, "
                     f"p99 {fmt(r['p99_us'], 'us')}")
        print(f"| {cond} | {c} | " + " | ".join(cells) + " |")

goals = []
def goal(what, got, want, cmp):
    ok = got is not None and (got >= want if cmp == ">=" else got <= want)
    goals.append(ok)
    g = "-" if got is None else f"{got:.2f}"
    print(f"{'met   ' if ok else 'MISSED'}  {what}: {g} ({cmp} {want})")

def ratio(a, b, key="ops_per_s"):
    return a[key] / b[key] if a and b and b[key] else None

print("\ngoals (issue 13):")
for c in (1, 4):
    a = mc("busy", "adaptive", c)
    goal(f"busy, {c} client(s): adaptive / Redis throughput", ratio(a, redis("busy", c)),
         2.0, ">=")
    goal(f"busy, {c} client(s): adaptive / always-sleep throughput",
         ratio(a, mc("busy", "always-sleep", c)), 0.9, ">=")
    goal(f"busy, {c} client(s): adaptive p99 / Redis p99",
         ratio(a, redis("busy", c), "p99_us"), 1.0, "<=")
    goal(f"quiet, {c} client(s): adaptive / always-spin throughput",
         ratio(mc("quiet", "adaptive", c), mc("quiet", "always-spin", c)), 0.9, ">=")
q2 = mc("quiet", "adaptive", 2)
goal("quiet, 2 clients: adaptive p99 / p50", ratio(q2, q2, "p99_us") and
     q2["p99_us"] / q2["p50_us"], 4.0, "<=")
print(f"\n{sum(goals)} of {len(goals)} goals met")
PY
