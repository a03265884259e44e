#!/usr/bin/env bash
# The Python package against libmc itself: Store.batch_get_into of 32 x 256 KiB into arena
# memory (tests/bench/py_bench.py) and mc-bench with the same shape (--op get --size 262144
# --batch 32 --clients 1 --registered), alternately, against one standalone agent in the
# same run. Prints each figure and the ratio python / mc-bench (the median of the
# per-repetition ratios), and the same ratio from the median call times (p50 of each run:
# what stolen CPU time on a busy host disturbs least); the goal is >= 0.9
# (docs/performance.md).
#
#   scripts/bench-python.sh
#
# Environment: MC_BENCH_BUILD (build dir, default build), MC_BENCH_REPS (5),
# MC_BENCH_SECONDS (2, per run), MC_BENCH_NO_BUILD=1 (use the build as it is).
# The agent it starts is stopped on exit, whatever happens.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
builddir=${MC_BENCH_BUILD:-build}
reps=${MC_BENCH_REPS:-5}
secs=${MC_BENCH_SECONDS:-2}
size=262144
batch=32
keys=1024

if [ "${MC_BENCH_NO_BUILD:-0}" != 1 ]; then
    scripts/setup.sh "$builddir" >/dev/null
    ninja -C "$builddir" daemon/agent/mc-agent tests/bench/mc-bench libmc/libmc.so >/dev/null
fi
agent_bin=$builddir/daemon/agent/mc-agent
bench=$builddir/tests/bench/mc-bench
for b in "$agent_bin" "$bench" "$builddir/libmc/libmc.so"; do
    [ -e "$b" ] || { echo "bench-python: $b is missing" >&2; exit 1; }
done
command -v python3 >/dev/null || { echo "bench-python: no python3" >&2; exit 1; }

run=$(mktemp -d /tmp/mcstore-bench-python.XXXXXX)
agent=""
# shellcheck disable=SC2317  # called from the trap
cleanup() {
    if [ -n "$agent" ]; then
        kill -TERM "$agent" 2>/dev/null || true
        wait "$agent" 2>/dev/null || true
    fi
    rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$agent_bin" --standalone --socket "$run/a.sock" --dram 1G --ready-file "$run/ready" \
    >"$run/agent.log" 2>&1 &
agent=$!
for _ in $(seq 1000); do
    [ -e "$run/ready" ] && break
    kill -0 "$agent" 2>/dev/null || { cat "$run/agent.log" >&2; exit 1; }
    sleep 0.01
done
[ -e "$run/ready" ] || { echo "bench-python: the agent did not get ready" >&2; exit 1; }

export MCSTORE_LIBMC=$top/$builddir/libmc/libmc.so
export PYTHONPATH=$top/libmc/python
export PYTHONDONTWRITEBYTECODE=1
LD_LIBRARY_PATH=$top/$builddir/libmc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH

field() { sed -n "s/.*\"$1\":\\([0-9.]*\\).*/\\1/p" | tail -n 1; }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

ratios=()
p50s=()
echo "shape: get, $batch x $((size / 1024)) KiB per call, 1 client, arena buffers, $keys keys"
for r in $(seq "$reps"); do
    # mc-bench also makes the keys present (first run), untimed
    c=$("$bench" --socket "$run/a.sock" --op get --size "$size" --batch "$batch" \
        --clients 1 --seconds "$secs" --registered --keys "$keys" 2>/dev/null | tail -n 1)
    p=$(python3 tests/bench/py_bench.py --socket "$run/a.sock" --size "$size" \
        --batch "$batch" --keys "$keys" --seconds "$secs" | tail -n 1)
    cg=$(field gb_per_s <<<"$c")
    pg=$(field gb_per_s <<<"$p")
    cp=$(field p50_us <<<"$c")
    pp=$(field p50_us <<<"$p")
    ratio=$(awk -v p="$pg" -v c="$cg" 'BEGIN { printf "%.3f", p / c }')
    ratio50=$(awk -v p="$pp" -v c="$cp" 'BEGIN { printf "%.3f", c / p }')
    ratios+=("$ratio")
    p50s+=("$ratio50")
    printf 'rep %d: mc-bench %s GB/s (p50 %s us/call), python %s GB/s (p50 %s us/call): ' \
        "$r" "$cg" "$cp" "$pg" "$pp"
    printf 'ratio %s, by p50 %s\n' "$ratio" "$ratio50"
done
echo "python / mc-bench, GB/s (median of $reps): $(printf '%s\n' "${ratios[@]}" | median)"
echo "python / mc-bench, by p50 call time (median of $reps): $(printf '%s\n' "${p50s[@]}" | median)"
echo "goal: >= 0.9"
