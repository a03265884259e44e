#!/usr/bin/env bash
# The local-path benchmark: libmc against a standalone agent on this machine, each figure
# next to its reference measured in the same run (memcpy, Redis on a unix socket), against
# the goals in docs/performance.md. About 2 minutes with the default 3 repetitions.
#
#   scripts/bench-local.sh             set up, build, run, print the table, and rewrite the
#                                      generated part of docs/performance.md and
#                                      docs/performance.png
#
# Environment: MC_BENCH_BUILD (build dir, default build), MC_BENCH_REPS (3; every figure
# is the median of the repetitions, every ratio the median of the per-repetition ratios),
# MC_BENCH_SECONDS (2, per mc-bench run), MC_BENCH_NO_BUILD=1 (use the build as it is),
# MC_BENCH_NO_DOCS=1 (print only), MC_BENCH_NOTE (a line added to the machine note),
# MC_BENCH_TRACE_REQUESTS (2000), MC_BENCH_TRACE_DRAM (256M), MC_BENCH_TRACE_BLOCK (64K): the
# trace replay (mc-bench --trace of a scripts/gen-trace.py trace) through a second standalone
# agent of MC_BENCH_TRACE_DRAM, the same total DRAM as scripts/bench-cluster.sh's trace
# cluster, against the offline LRU of that capacity.
# Every process it starts (agent, redis-server) is stopped on exit, whatever happens.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
builddir=${MC_BENCH_BUILD:-build}
reps=${MC_BENCH_REPS:-3}
secs=${MC_BENCH_SECONDS:-2}
trace_reqs=${MC_BENCH_TRACE_REQUESTS:-2000}
trace_dram=${MC_BENCH_TRACE_DRAM:-256M}
trace_block=${MC_BENCH_TRACE_BLOCK:-64K}
started=$(date +%s)

if [ "${MC_BENCH_NO_BUILD:-0}" != 1 ]; then
    scripts/setup.sh "$builddir" >/dev/null
    ninja -C "$builddir" daemon/agent/mc-agent tests/bench/memcpy-ref >/dev/null
    if ! ninja -C "$builddir" tests/bench/mc-bench >/dev/null 2>&1; then
        echo "bench-local: mc-bench is not built (libmc does not export mc_batch_* and" \
             "mc_buf_alloc yet: see tests/bench/meson.build)" >&2
        exit 1
    fi
fi
agent_bin=$builddir/daemon/agent/mc-agent
bench=$builddir/tests/bench/mc-bench
memcpy_ref=$builddir/tests/bench/memcpy-ref
for b in "$agent_bin" "$bench" "$memcpy_ref"; do
    [ -x "$b" ] || { echo "bench-local: $b is missing" >&2; exit 1; }
done

run=$(mktemp -d /tmp/mcstore-bench.XXXXXX)
sock=$run/agent.sock
rsock=$run/redis.sock
raw=$run/raw
mkdir -p "$raw"
agent=""
tagent=""
redis=""
# shellcheck disable=SC2317  # called from the trap
cleanup() {
    local p
    for p in $agent $tagent $redis; do
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in $agent $tagent $redis; do
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for FILE PID WHAT: poll (not a fixed sleep) until FILE exists, for up to 10 s
wait_for() {
    local _
    for _ in $(seq 1 200); do
        [ -e "$1" ] && return 0
        kill -0 "$2" 2>/dev/null || { echo "bench-local: $3 exited" >&2; return 1; }
        sleep 0.05
    done
    echo "bench-local: $3 did not come up" >&2
    return 1
}

# 2 GiB: 4 KiB keys fill half of it (mc-bench's default), the 16 MiB and 1 MiB keys
# another 576 MiB, and upserts need room for the new versions.
"$agent_bin" --standalone --socket "$sock" --dram 2G --ready-file "$run/ready" \
    2>"$run/agent.log" &
agent=$!
wait_for "$run/ready" "$agent" "the agent" || { cat "$run/agent.log" >&2; exit 1; }
# the trace replay's agent: the capacity the offline LRU is given
"$agent_bin" --standalone --socket "$run/trace.sock" --dram "$trace_dram" \
    --ready-file "$run/trace.ready" 2>"$run/trace-agent.log" &
tagent=$!
wait_for "$run/trace.ready" "$tagent" "the trace agent" ||
    { cat "$run/trace-agent.log" >&2; exit 1; }
python3 scripts/gen-trace.py --requests "$trace_reqs" --seed 1 >"$run/trace.jsonl"

redis-server --port 0 --unixsocket "$rsock" --unixsocketperm 700 --save '' \
    --appendonly no --dir "$run" --logfile "$run/redis.log" --daemonize no &
redis=$!
wait_for "$rsock" "$redis" "redis-server" || { cat "$run/redis.log" >&2; exit 1; }
redis_version=$(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')

failed=0
# mc TAG REP ARGS...: one mc-bench run; its JSON line goes to raw/TAG.REP.json
mc() {
    local tag=$1 rep=$2
    shift 2
    if ! "$bench" --socket "$sock" --seconds "$secs" "$@" >"$raw/$tag.$rep.out" \
        2>"$raw/$tag.$rep.err"; then
        echo "bench-local: mc-bench $* failed:" >&2
        cat "$raw/$tag.$rep.err" >&2
        failed=1
    fi
    tail -n 1 "$raw/$tag.$rep.out" >"$raw/$tag.$rep.json"
}
# rb TAG REP ARGS...: one redis-benchmark run (CSV) to raw/TAG.REP.csv
rb() {
    local tag=$1 rep=$2
    shift 2
    redis-benchmark -s "$rsock" --csv "$@" >"$raw/$tag.$rep.csv" 2>"$raw/$tag.$rep.err" || {
        echo "bench-local: redis-benchmark $* failed" >&2
        cat "$raw/$tag.$rep.err" >&2
        failed=1
    }
}

for rep in $(seq 1 "$reps"); do
    echo "bench-local: repetition $rep of $reps" >&2
    "$memcpy_ref" --working-set 512 --seconds 1 >"$raw/memcpy.$rep.json"
    rb redis_p32_c1 "$rep" -t set,get -d 4096 -P 32 -c 1 -n 300000
    rb redis_p1_c8 "$rep" -t get -d 4096 -P 1 -c 8 -n 200000
    rb redis_1m "$rep" -t set,get -d 1048576 -P 1 -c 1 -n 2000
    # put first: on a fresh agent its first pass stores new keys; later passes (and later
    # repetitions) upsert
    mc put4k_b32 "$rep" --op put --size 4096 --batch 32 --clients 1
    mc get4k_b32 "$rep" --op get --size 4096 --batch 32 --clients 1
    mc get16m "$rep" --op get --size 16777216 --batch 1 --clients 1 --keys 32 --registered
    mc get4k_c2 "$rep" --op get --size 4096 --batch 1 --clients 2
    mc get4k_c8 "$rep" --op get --size 4096 --batch 1 --clients 8
    mc get1m "$rep" --op get --size 1048576 --batch 1 --clients 1 --keys 64
    # every repetition its own keys: it starts cold, as the offline LRU does
    if ! "$bench" --socket "$run/trace.sock" --trace "$run/trace.jsonl" \
        --block-size "$trace_block" --registered --key-prefix "trace$rep" \
        >"$raw/trace.$rep.out" 2>"$raw/trace.$rep.err"; then
        echo "bench-local: mc-bench --trace failed:" >&2
        cat "$raw/trace.$rep.err" >&2
        failed=1
    fi
    tail -n 1 "$raw/trace.$rep.out" >"$raw/trace.$rep.json"
done
"$builddir/libmc/mcctl" --socket "$sock" stats >"$run/stats.json" 2>/dev/null || true

# machine note
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
l3=$(lscpu 2>/dev/null | sed -n 's/^L3 cache:[[:space:]]*//p' | head -n 1)
mem=$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
machine="$(nproc) vCPUs ($cpu), L3 ${l3:-?}, $mem, kernel $(uname -r), Redis $redis_version"
[ -n "${MC_BENCH_NOTE:-}" ] && machine="$machine. ${MC_BENCH_NOTE}"
elapsed=$(($(date +%s) - started))

docs_md=docs/performance.md
docs_png=docs/performance.png
[ "${MC_BENCH_NO_DOCS:-0}" = 1 ] && docs_md="" && docs_png=""

python3 - "$raw" "$reps" "$machine" "$run" "$docs_md" "$secs" "$elapsed" "$trace_reqs" \
    "$trace_dram" "$trace_block" <<'PY'
import csv, datetime, json, os, statistics, sys

raw, reps, machine, run, docs_md, secs, elapsed = sys.argv[1:8]
trace_reqs, trace_dram, trace_block = sys.argv[8:11]
reps = int(reps)

def load_json(tag, rep):
    try:
        with open(os.path.join(raw, f"{tag}.{rep}.json")) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None

def load_csv(tag, rep):
    try:
        with open(os.path.join(raw, f"{tag}.{rep}.csv")) as f:
            return {r["test"]: r for r in csv.DictReader(f)}
    except (OSError, KeyError):
        return None

def per_rep(fn):
    out = []
    for rep in range(1, reps + 1):
        try:
            v = fn(rep)
        except (TypeError, KeyError, ValueError, ZeroDivisionError):
            v = None
        if v is not None:
            out.append(float(v))
    return out

def med(xs):
    return statistics.median(xs) if xs else None

mcj = lambda tag, key: (lambda rep: load_json(tag, rep)[key])
rcsv = lambda tag, test, key: (lambda rep: load_csv(tag, rep)[test][key])
memj = lambda key: (lambda rep: load_json("memcpy", rep)[key])

# (label, unit, mc(rep), reference label, ref(rep), goal comparison, goal ratio)
rows = [
    ("4 KiB get, batch 32, 1 client", "ops/s", mcj("get4k_b32", "ops_per_s"),
     "Redis GET -P 32 -c 1", lambda r: float(rcsv("redis_p32_c1", "GET", "rps")(r)),
     ">=", 2.0),
    ("4 KiB put, batch 32, 1 client", "ops/s", mcj("put4k_b32", "ops_per_s"),
     "Redis SET -P 32 -c 1", lambda r: float(rcsv("redis_p32_c1", "SET", "rps")(r)),
     ">=", 1.0),
    ("16 MiB get, 512 MiB working set, registered, checksums", "GB/s",
     mcj("get16m", "gb_per_s"),
     "memcpy 16 MiB from 512 MiB, 1 thread", memj("copy_16m_gb_per_s"), ">=", 0.8),
    ("4 KiB get, batch 1, 2 clients: p99 vs p50", "µs", mcj("get4k_c2", "p99_us"),
     "mc p50, same run", mcj("get4k_c2", "p50_us"), "<=", 4.0),
    ("4 KiB get, batch 1, 8 clients: p99", "µs", mcj("get4k_c8", "p99_us"),
     "Redis GET -P 1 -c 8 p99",
     lambda r: 1000 * float(rcsv("redis_p1_c8", "GET", "p99_latency_ms")(r)), "<=", 1.0),
    # context, no goal
    ("4 KiB get, batch 1, 8 clients: throughput", "ops/s", mcj("get4k_c8", "ops_per_s"),
     "Redis GET -P 1 -c 8", lambda r: float(rcsv("redis_p1_c8", "GET", "rps")(r)),
     None, None),
    ("4 KiB get, batch 32, 1 client: bytes", "GB/s", mcj("get4k_b32", "gb_per_s"),
     "memcpy 4 KiB from 512 MiB, 1 thread", memj("copy_4k_gb_per_s"), None, None),
    ("1 MiB get, batch 1, 1 client", "GB/s", mcj("get1m", "gb_per_s"),
     "Redis GET 1 MiB -P 1 -c 1",
     lambda r: float(rcsv("redis_1m", "GET", "rps")(r)) * 1048576 / 1e9, None, None),
    ("4 KiB put, batch 32, 1 client: p99", "µs", mcj("put4k_b32", "p99_us"),
     "Redis SET -P 32 -c 1 p99",
     lambda r: 1000 * float(rcsv("redis_p32_c1", "SET", "p99_latency_ms")(r)), None, None),
    (f"trace replay, {trace_block} blocks, `--dram {trace_dram}`: bytes moved", "GB/s",
     mcj("trace", "gb_per_s"), "memcpy 16 MiB from 512 MiB, 1 thread",
     memj("copy_16m_gb_per_s"), None, None),
    ("trace replay: p99 per request", "ms", mcj("trace", "p99_ms"), "its p50",
     mcj("trace", "p50_ms"), None, None),
    ("trace replay: hit ratio", "", mcj("trace", "hit_ratio"),
     f"offline LRU of {trace_dram}", mcj("trace", "lru_hit_ratio"), None, None),
]

def fmt(v, unit):
    if v is None:
        return "n/a"
    if unit == "ops/s":
        return f"{v / 1000:.0f} k"
    if unit == "GB/s":
        return f"{v:.2f}"
    if unit == "":
        return f"{v:.3f}"
    return f"{v:.1f}"

table = []
plot = []
missed = 0
for i, (label, unit, mcf, rlabel, rf, gop, goal) in enumerate(rows, 1):
    mcv, refv = per_rep(mcf), per_rep(rf)
    ratios = per_rep(lambda r: float(mcf(r)) / float(rf(r)))
    m, ref, ratio = med(mcv), med(refv), med(ratios)
    if gop is None:
        verdict, gtxt = "", ""
    elif ratio is None:
        verdict, gtxt = "no figure", f"{gop.replace('>=', '≥').replace('<=', '≤')} {goal:g}x"
        missed += 1
    else:
        ok = ratio >= goal if gop == ">=" else ratio <= goal
        missed += not ok
        verdict = "met" if ok else "**missed**"
        gtxt = f"{gop.replace('>=', '≥').replace('<=', '≤')} {goal:g}x"
    spread = ""
    if len(ratios) > 1:
        spread = f" ({min(ratios):.2f}–{max(ratios):.2f})"
    table.append(f"| {i} | {label} | {fmt(m, unit)} {unit} | {rlabel}: {fmt(ref, unit)} {unit}"
                 f" | {'n/a' if ratio is None else f'{ratio:.2f}x'}{spread} | {gtxt} | {verdict} |")
    if gop is not None:
        plot.append((i, ratio if ratio is not None else float("nan"), goal, gop))

now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
head = [
    f"Run {now}, `scripts/bench-local.sh` ({reps} repetitions of {secs} s per mc-bench run; "
    f"the script took {elapsed} s).",
    f"Machine: {machine}.",
    "",
    "| # | measurement | mc | reference (same run) | mc / reference (min–max) | goal | |",
    "|---|---|---|---|---|---|---|",
]
foot = [
    "",
    "Figures are medians over the repetitions; a ratio is the median of the per-repetition "
    "ratios (each mc figure against the reference of its own repetition), with its range. "
    "Rows 4 and 5 are latencies (lower is better): row 4 compares mc's p99 with its own p50, "
    "row 5 with Redis's p99. Rows 6–12 have no goal and are there for context; rows 10–12 "
    f"replay `scripts/gen-trace.py --requests {trace_reqs} --seed 1` (mc-bench --trace: "
    "one client, one request at a time, batches of 32, bytes verified; its rates count the "
    "time in store calls).",
]
text = "\n".join(head + table + foot)
print()
print(text)
print()
print(f"bench-local: {missed} goal(s) missed")

if docs_md:
    begin, end = "<!-- bench-local:begin -->", "<!-- bench-local:end -->"
    block = f"{begin}\n{text}\n\n![mc / reference per goal](performance.png)\n{end}"
    try:
        with open(docs_md) as f:
            old = f.read()
    except OSError:
        old = "# Local-path performance\n\n" + begin + "\n" + end + "\n"
    if begin in old and end in old:
        new = old[: old.index(begin)] + block + old[old.index(end) + len(end):]
    else:
        new = old.rstrip("\n") + "\n\n" + block + "\n"
    with open(docs_md, "w") as f:
        f.write(new)
    with open(os.path.join(run, "plot.dat"), "w") as f:
        for i, ratio, goal, gop in plot:
            sign = "≥" if gop == ">=" else "≤"
            f.write(f'"{i}: goal {sign}{goal:g}x" 1 {ratio} {goal}\n')
PY

if [ -n "$docs_png" ] && [ -s "$run/plot.dat" ]; then
    gnuplot <<GP || echo "bench-local: gnuplot failed; $docs_png not written" >&2
set terminal pngcairo size 900,480 font "sans,10"
set output "$docs_png"
set title "mc vs reference, same run (reference = 1; rows 4-5 are latencies: lower is better)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set yrange [0:*]
set grid ytics
set ylabel "relative to the reference"
set key top right
plot "$run/plot.dat" using 2:xtic(1) title "reference" lc rgb "#999999", \
     "" using 3 title "mc" lc rgb "#1f77b4", \
     "" using 4 title "goal" lc rgb "#d62728"
GP
fi
[ -n "$docs_md" ] && echo "bench-local: wrote $docs_md and $docs_png" >&2
exit "$failed"
