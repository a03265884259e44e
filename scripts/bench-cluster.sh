#!/usr/bin/env bash
# The cluster benchmark: a master and two agents on this machine (loopback only), each figure
# next to its reference measured in the same run, against the goals in docs/performance.md
# ("Cluster"). About 50 s with the default 3 repetitions on a quiet machine.
#
#   scripts/bench-cluster.sh [--build-dir DIR]
#                   set up, build, run, print the table, write it to RUN/results.md (RUN is
#                   a fresh /tmp/mcstore-bench-cluster.* directory, kept with the logs), and
#                   rewrite the generated part of the "Cluster" section of docs/performance.md
#
# What it measures, every repetition:
#   - ucx_perftest -t ucp_am_bw -s 16 MiB between two processes with the agents' UCX
#     settings: endpoints from the worker address with peer error handling (-e) and
#     UCX_MM_ERROR_HANDLING=y (docs/decisions.md, "UCX connection method and bulk path");
#     16 MiB AMs go by rendezvous, received with ucp_am_recv_data_nbx, as the agents' are;
#   - mc-bench gets of 16 MiB objects by a client of node b (--dram 0: holds no data) of
#     32 objects (512 MiB) put through node a, which holds them (goal: >= 0.9x the perftest);
#     then the same gets through node a (its local path; context);
#   - ucx_perftest -t ucp_am_bw at 64 KiB and at 256 KiB, each followed by mc-bench gets of
#     objects of that size at batch 32 through node b (goal: >= 0.8x that perftest);
#   - master-rpc-bench: mc-master's RPC rate with batches of 128 from two client processes
#     (goal: >= 300 k keys/s), next to the master library in-process on one core.
# Then, on a second cluster of three agents (t1 and t2 with MC_BENCH_TRACE_DRAM each, t3 with
# --dram 0), every repetition:
#   - ucx_perftest -t ucp_am_bw at the trace's block size (64 KiB), as above;
#   - mc-bench --trace through t3 of a trace made by scripts/gen-trace.py (growing
#     conversations, shared prefixes, Zipf reuse): prefix match, batch get of the hits, batch
#     put of the misses, bytes verified; GB/s moved against the perftest (goal >= 0.7x) and
#     its hit ratio against the offline LRU of the cluster's total DRAM (goal >= 0.95x);
#   - the same replay with MC_BENCH_TRACE_CLIENTS (4) clients taking the requests in order,
#     that many in flight (an engine serving several requests at once), same goals.
#
# The perftest reference is two busy pollers: it needs both vCPUs of this machine and
# collapses (to well under 1 GB/s) when anything else runs. So each repetition first waits up
# to MC_BENCH_QUIET_WAIT seconds for the CPUs to be at most 10% busy, the CPU share others
# used just before each perftest goes into the machine note, and a perftest that runs past
# 15 s is cut short (its figure so far is kept, and marked).
#
# Where users run: MC_BENCH_TRANSPORT=tcp runs the daemons with their default transport
# between each other (tcp: ucx_shm off) and the perftest with UCX_TLS=^mm, the same; the
# default, shm, gives both UCX shared memory. The perftest also gets the daemons' tcp
# receive segment (UCX_TCP_RX_SEG_SIZE=256K, set by mc-agent). MC_BENCH_BUSY=1 runs the whole benchmark
# under `stress-ng --cpu $(nproc)` (the perftest reference too: same run, same load), waits
# for no quiet CPUs, and writes its table into its own block of docs/performance.md
# (bench-cluster-busy, bench-cluster-tcp, bench-cluster-tcp-busy; bench-cluster for the
# quiet shm run).
#
# Environment: MC_BENCH_BUILD (build dir, default build; --build-dir wins), MC_BENCH_REPS (3;
# every figure is the median of the repetitions, every ratio the median of the
# per-repetition ratios), MC_BENCH_SECONDS (2, per mc-bench run), MC_BENCH_RPC_SECONDS (1, per
# master-rpc-bench phase), MC_BENCH_PERFTEST_ITERS (1000 messages of 16 MiB),
# MC_BENCH_QUIET_WAIT (20), MC_BENCH_TRACE_REQUESTS (2000 requests of the generated trace),
# MC_BENCH_TRACE_DRAM (128M per data node of the trace cluster), MC_BENCH_TRACE_BLOCK (64K),
# MC_BENCH_TRACE_PT_ITERS (50000 perftest messages at the block size), MC_BENCH_TRACE_CLIENTS
# (4, the second replay's clients), MC_BENCH_NO_BUILD=1 (use the build as it is), MC_BENCH_NO_DOCS=1
# (print only), MC_BENCH_FORCE_DOCS=1 (write the docs even from a busy machine, which a run
# otherwise leaves alone), MC_BENCH_NOTE (a line added to the machine note).
# Every process it starts (mc-master, both agents, the perftest server) is stopped on exit,
# whatever happens. Exit status: 0, also when a goal is missed; 1 when something failed to
# run.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
builddir=${MC_BENCH_BUILD:-build}
while [ $# -gt 0 ]; do
    case $1 in
    --build-dir) builddir=${2:?--build-dir needs a directory}; shift 2 ;;
    --build-dir=*) builddir=${1#--build-dir=}; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-cluster: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
reps=${MC_BENCH_REPS:-3}
secs=${MC_BENCH_SECONDS:-2}
rpc_secs=${MC_BENCH_RPC_SECONDS:-1}
pt_iters=${MC_BENCH_PERFTEST_ITERS:-1000}
quiet_wait=${MC_BENCH_QUIET_WAIT:-20}
transport=${MC_BENCH_TRANSPORT:-shm}
busy_run=${MC_BENCH_BUSY:-0}
case $transport in
# over shared memory an eager transfer costs a copy in and out of a FIFO and beats the
# rendezvous up to 1 MiB; over tcp only up to the default 128 KiB (docs/decisions.md)
shm) shm_set=(--set ucx_shm=true); agent_set=(--set bulk_eager_max=1M); pt_tls=() ;;
tcp) shm_set=(--set ucx_shm=false); agent_set=(); pt_tls=(UCX_TLS=^mm) ;;
*) echo "bench-cluster: MC_BENCH_TRANSPORT is shm or tcp, not $transport" >&2; exit 2 ;;
esac
block=bench-cluster
[ "$transport" = tcp ] && block=$block-tcp
[ "$busy_run" = 1 ] && block=$block-busy
[ "$busy_run" = 1 ] && quiet_wait=0
size=$((16 << 20))
nkeys=32
trace_reqs=${MC_BENCH_TRACE_REQUESTS:-2000}
trace_dram=${MC_BENCH_TRACE_DRAM:-128M}
trace_block=${MC_BENCH_TRACE_BLOCK:-64K}
trace_pt_iters=${MC_BENCH_TRACE_PT_ITERS:-50000}
trace_clients=${MC_BENCH_TRACE_CLIENTS:-4}
small_pt_bytes=$((4 << 30))    # perftest messages of 64 / 256 KiB: 4 GiB in all
small_keys_bytes=$((64 << 20)) # the 64 / 256 KiB objects read at batch 32: 64 MiB of each
started=$(date +%s)

if [ "${MC_BENCH_NO_BUILD:-0}" != 1 ]; then
    scripts/setup.sh "$builddir" >/dev/null
    ninja -C "$builddir" daemon/mcmaster/mc-master daemon/agent/mc-agent \
        tests/bench/mc-bench tests/bench/master-rpc-bench >/dev/null
fi
master_bin=$builddir/daemon/mcmaster/mc-master
agent_bin=$builddir/daemon/agent/mc-agent
bench=$builddir/tests/bench/mc-bench
rpc_bench=$builddir/tests/bench/master-rpc-bench
for b in "$master_bin" "$agent_bin" "$bench" "$rpc_bench"; do
    [ -x "$b" ] || { echo "bench-cluster: $b is missing" >&2; exit 1; }
done
command -v ucx_perftest >/dev/null ||
    { echo "bench-cluster: ucx_perftest is missing (Debian package ucx-utils)" >&2; exit 1; }

load=$(cut -d' ' -f1-3 /proc/loadavg) # before anything of ours runs: for the machine note
run=$(mktemp -d /tmp/mcstore-bench-cluster.XXXXXX)
raw=$run/raw
mkdir -p "$raw"
master=""
agent_a=""
agent_b=""
agents_t=""
pt_server=""
stress=""
# stop_cluster: the agents first, so that they do not go looking for a master that has gone
stop_cluster() {
    local p
    for p in $pt_server $agents_t $agent_b $agent_a; do
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in $pt_server $agents_t $agent_b $agent_a; do
        wait "$p" 2>/dev/null || true
    done
    if [ -n "$master" ]; then
        kill -TERM "$master" 2>/dev/null || true
        wait "$master" 2>/dev/null || true
    fi
    pt_server="" agents_t="" agent_b="" agent_a="" master=""
}
# shellcheck disable=SC2317  # called from the trap
cleanup() {
    stop_cluster
    if [ -n "$stress" ]; then
        kill -TERM "$stress" 2>/dev/null || true
        wait "$stress" 2>/dev/null || true
    fi
    rm -f "$run"/*.sock
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for FILE PID WHAT: poll (not a fixed sleep) until FILE is not empty, for up to 20 s
wait_for() {
    local _
    for _ in $(seq 1 400); do
        [ -s "$1" ] && return 0
        kill -0 "$2" 2>/dev/null || { echo "bench-cluster: $3 exited" >&2; return 1; }
        sleep 0.05
    done
    echo "bench-cluster: $3 did not come up" >&2
    return 1
}

# cpu_busy: the share (%) of both CPUs' time spent running anything over the next 0.5 s
# (iowait counts as idle)
cpu_busy() {
    local a b i tot=0
    read -ra a </proc/stat
    sleep 0.5
    read -ra b </proc/stat
    for i in 1 2 3 4 5 6 7 8; do
        tot=$((tot + b[i] - a[i]))
    done
    [ "$tot" -gt 0 ] || { echo 0; return; }
    echo $((100 - 100 * (b[4] - a[4] + b[5] - a[5]) / tot))
}

# wait_quiet REP: wait up to quiet_wait seconds for the CPUs to be at most 10% busy; what
# they were last goes to raw/busy.REP
wait_quiet() {
    local rep=$1 busy deadline=$((SECONDS + quiet_wait))
    while :; do
        busy=$(cpu_busy)
        [ "$busy" -le 10 ] || [ "$SECONDS" -ge "$deadline" ] && break
    done
    [ "$busy" -le 10 ] || [ "$busy_run" = 1 ] ||
        echo "bench-cluster: the CPUs are $busy% busy with something else: the perftest" \
             "reference will be low" >&2
    echo "$busy" >"$raw/busy.$rep"
}

# a free loopback TCP port (for ucx_perftest's own address exchange)
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

if [ "$busy_run" = 1 ]; then
    command -v stress-ng >/dev/null ||
        { echo "bench-cluster: stress-ng is missing (scripts/setup.sh)" >&2; exit 1; }
    stress-ng --cpu "$(nproc)" --quiet &
    stress=$!
fi

# the cluster: one token for this run, every address on 127.0.0.1, ports picked by the kernel
MC_CLUSTER_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export MC_CLUSTER_TOKEN
# ucx_shm=true: the daemons use UCX's shared-memory transports between each other, as the
# perftest reference does (same UCX settings). Off by default: a sender killed mid-message
# can block a receiver's shared-memory queue (docs/decisions.md); multi-host clusters never
# use them.
"$master_bin" --listen 127.0.0.1:0 "${shm_set[@]}" --ready-file "$run/master.ready" \
    2>"$run/master.log" &
master=$!
wait_for "$run/master.ready" "$master" "mc-master" || { cat "$run/master.log" >&2; exit 1; }
read -r _ master_port <"$run/master.ready"
# node a holds the objects (512 MiB of them, and room for the new versions); node b holds none
"$agent_bin" --master "127.0.0.1:$master_port" --listen 127.0.0.1:0 --node a "${shm_set[@]}" "${agent_set[@]}" \
    --socket "$run/a.sock" --dram 1G --ready-file "$run/a.ready" 2>"$run/agent-a.log" &
agent_a=$!
"$agent_bin" --master "127.0.0.1:$master_port" --listen 127.0.0.1:0 --node b "${shm_set[@]}" "${agent_set[@]}" \
    --socket "$run/b.sock" --dram 0 --ready-file "$run/b.ready" 2>"$run/agent-b.log" &
agent_b=$!
wait_for "$run/a.ready" "$agent_a" "agent a" || { cat "$run/agent-a.log" >&2; exit 1; }
wait_for "$run/b.ready" "$agent_b" "agent b" || { cat "$run/agent-b.log" >&2; exit 1; }

failed=0
# perftest REP [SIZE ITERS TAG]: one ucx_perftest ucp_am_bw pair (server in the background,
# then the client); the client's CSV (-v: a line a second, then the final one) goes to
# raw/TAG.REP.csv (TAG: perftest); cut short after 15 s (raw/TAG.REP.cut), its last line so
# far is the figure
perftest() {
    local rep=$1 sz=${2:-$size} iters=${3:-$pt_iters} tag=${4:-perftest} port rc=0 _
    local args=(-t ucp_am_bw -s "$sz" -n "$iters" -e -v)
    port=$(free_port)
    env "${pt_tls[@]}" UCX_MM_ERROR_HANDLING=y UCX_TCP_RX_SEG_SIZE=256K timeout 60 ucx_perftest -p "$port" "${args[@]}" \
        >"$raw/$tag-server.$rep.out" 2>&1 &
    pt_server=$!
    for _ in $(seq 1 200); do
        ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
        sleep 0.05
    done
    env "${pt_tls[@]}" UCX_MM_ERROR_HANDLING=y UCX_TCP_RX_SEG_SIZE=256K timeout 15 ucx_perftest 127.0.0.1 -p "$port" \
        "${args[@]}" \
        >"$raw/$tag.$rep.csv" 2>"$raw/$tag.$rep.err" || rc=$?
    if [ "$rc" = 124 ] && grep -q '^\[thread' "$raw/$tag.$rep.csv"; then
        echo "bench-cluster: ucx_perftest cut short after 15 s (a busy machine)" >&2
        touch "$raw/$tag.$rep.cut"
        kill -TERM "$pt_server" 2>/dev/null || true
    elif [ "$rc" != 0 ]; then
        echo "bench-cluster: ucx_perftest ${args[*]} failed:" >&2
        cat "$raw/$tag.$rep.err" "$raw/$tag-server.$rep.out" >&2
        failed=1
    fi
    wait "$pt_server" 2>/dev/null || true
    pt_server=""
}
# mc TAG REP ARGS...: one mc-bench run; its JSON line goes to raw/TAG.REP.json
mc() {
    local tag=$1 rep=$2
    shift 2
    if ! "$bench" --seconds "$secs" "$@" >"$raw/$tag.$rep.out" 2>"$raw/$tag.$rep.err"; then
        echo "bench-cluster: mc-bench $* failed:" >&2
        cat "$raw/$tag.$rep.err" >&2
        failed=1
    fi
    tail -n 1 "$raw/$tag.$rep.out" >"$raw/$tag.$rep.json"
}
# rpc REP: one master-rpc-bench run (it starts its own mc-master); JSON to raw/rpc.REP.json
rpc() {
    local rep=$1
    if ! "$rpc_bench" --master-bin "$master_bin" --clients 2 --batch 128 \
        --seconds "$rpc_secs" >"$raw/rpc.$rep.out" 2>"$raw/rpc.$rep.err"; then
        echo "bench-cluster: master-rpc-bench failed:" >&2
        tail -n 20 "$raw/rpc.$rep.err" >&2
        failed=1
    fi
    tail -n 1 "$raw/rpc.$rep.out" >"$raw/rpc.$rep.json"
}

get16m=(--op get --size "$size" --batch 1 --clients 1 --keys "$nkeys" --registered)
for rep in $(seq 1 "$reps"); do
    echo "bench-cluster: repetition $rep of $reps" >&2
    wait_quiet "$rep"
    perftest "$rep"
    # the keys are put through a (the first repetition stores them, later ones find them
    # present), then read through b, which holds nothing: every get crosses from a to b
    mc get16m_remote "$rep" --socket "$run/b.sock" --fill-socket "$run/a.sock" "${get16m[@]}"
    mc get16m_local "$rep" --socket "$run/a.sock" "${get16m[@]}"
    # small and medium blocks, batches of 32, through b: against ucp_am_bw at that size
    for sz in 65536 262144; do
        wait_quiet "s$sz.$rep"
        perftest "$rep" "$sz" "$((small_pt_bytes / sz))" "perftest_$sz"
        mc "getb32_$sz" "$rep" --socket "$run/b.sock" --fill-socket "$run/a.sock" --op get \
            --size "$sz" --batch 32 --clients 1 --keys "$((small_keys_bytes / sz))" --registered
    done
    rpc "$rep"
done
for n in a b; do
    "$builddir/libmc/mcctl" --socket "$run/$n.sock" stats >"$run/stats-$n.json" 2>/dev/null || true
done
stop_cluster

# the trace cluster: a fresh master, two data nodes, one --dram 0 node the replay goes through
python3 scripts/gen-trace.py --requests "$trace_reqs" --seed 1 >"$run/trace.jsonl"
"$master_bin" --listen 127.0.0.1:0 "${shm_set[@]}" --ready-file "$run/tmaster.ready" \
    2>"$run/tmaster.log" &
master=$!
wait_for "$run/tmaster.ready" "$master" "mc-master (trace)" || { cat "$run/tmaster.log" >&2; exit 1; }
read -r _ master_port <"$run/tmaster.ready"
for n in t1 t2 t3; do
    dram=$trace_dram
    [ "$n" = t3 ] && dram=0
    "$agent_bin" --master "127.0.0.1:$master_port" --listen 127.0.0.1:0 --node "$n" \
        "${shm_set[@]}" "${agent_set[@]}" --socket "$run/$n.sock" --dram "$dram" --ready-file "$run/$n.ready" \
        2>"$run/agent-$n.log" &
    agents_t="$agents_t $!"
    wait_for "$run/$n.ready" "$!" "agent $n" || { cat "$run/agent-$n.log" >&2; exit 1; }
done
trace_cap=$(( $(numfmt --from=iec "$trace_dram") * 2 ))
trace_block_b=$(numfmt --from=iec "$trace_block")
for rep in $(seq 1 "$reps"); do
    echo "bench-cluster: trace repetition $rep of $reps" >&2
    wait_quiet "t$rep"
    perftest "$rep" "$trace_block_b" "$trace_pt_iters" perftest_block
    # every repetition its own keys: it starts cold, as the offline LRU does (the blocks of
    # the repetition before are the oldest in the pool and go first)
    if ! "$bench" --socket "$run/t3.sock" --trace "$run/trace.jsonl" --block-size "$trace_block" \
        --capacity "$trace_cap" --registered --key-prefix "trace$rep" \
        >"$raw/trace.$rep.out" 2>"$raw/trace.$rep.err"; then
        echo "bench-cluster: mc-bench --trace failed:" >&2
        cat "$raw/trace.$rep.err" >&2
        failed=1
    fi
    tail -n 1 "$raw/trace.$rep.out" >"$raw/trace.$rep.json"
    # the same trace with several requests in flight, as an engine serving several has them
    if ! "$bench" --socket "$run/t3.sock" --trace "$run/trace.jsonl" --block-size "$trace_block" \
        --capacity "$trace_cap" --registered --key-prefix "tracec$rep" --clients "$trace_clients" \
        >"$raw/tracec.$rep.out" 2>"$raw/tracec.$rep.err"; then
        echo "bench-cluster: mc-bench --trace --clients $trace_clients failed:" >&2
        cat "$raw/tracec.$rep.err" >&2
        failed=1
    fi
    tail -n 1 "$raw/tracec.$rep.out" >"$raw/tracec.$rep.json"
done
for n in t1 t2 t3; do
    "$builddir/libmc/mcctl" --socket "$run/$n.sock" stats >"$run/stats-$n.json" 2>/dev/null || true
done
stop_cluster

# machine note
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
l3=$(lscpu 2>/dev/null | sed -n 's/^L3 cache:[[:space:]]*//p' | head -n 1)
mem=$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
ucx_version=$(ucx_info -v 2>/dev/null | sed -n 's/^# Version //p' | head -n 1)
machine="$(nproc) vCPUs ($cpu), L3 ${l3:-?}, $mem, kernel $(uname -r), UCX ${ucx_version:-?}, load average $load at the start"
busy=$(cat "$raw"/busy.* 2>/dev/null | paste -sd/ -)
machine="$machine; daemons' transport: $transport"
if [ "$busy_run" = 1 ]; then
    machine="$machine; **busy host**: stress-ng --cpu $(nproc) ran throughout (perftest too);"
    machine="$machine CPUs busy before each perftest: ${busy:-?} %"
else
    machine="$machine; CPUs busy before each perftest: ${busy:-?} %"
fi
cut=$(find "$raw" -name 'perftest*.cut' | wc -l)
[ "$cut" -gt 0 ] && machine="$machine; $cut perftest run(s) cut short after 15 s"
[ -n "${MC_BENCH_NOTE:-}" ] && machine="$machine. ${MC_BENCH_NOTE}"
elapsed=$(($(date +%s) - started))

docs_md=docs/performance.md
[ "${MC_BENCH_NO_DOCS:-0}" = 1 ] && docs_md=""
noisy=$(cat "$raw"/busy.* 2>/dev/null | awk '$1 > 10 { n++ } END { print n + 0 }')
[ "$busy_run" = 1 ] && noisy=0 # busy is what this run measures
if [ -n "$docs_md" ] && [ $((noisy + cut)) -gt 0 ] && [ "${MC_BENCH_FORCE_DOCS:-0}" != 1 ]; then
    echo "bench-cluster: a busy machine (see the note): $docs_md left as it was" \
         "(MC_BENCH_FORCE_DOCS=1 writes it anyway)" >&2
    docs_md=""
fi

MC_BENCH_BLOCK=$block python3 - "$raw" "$reps" "$machine" "$run" "$docs_md" "$secs" "$elapsed" "$rpc_secs" \
    "$pt_iters" "$trace_reqs" "$trace_dram" "$trace_block" "$trace_pt_iters" "$trace_clients" <<'PY'
import datetime, json, os, statistics, sys

raw, reps, machine, run, docs_md, secs, elapsed, rpc_secs, pt_iters = sys.argv[1:10]
trace_reqs, trace_dram, trace_block, trace_pt_iters, trace_clients = sys.argv[10:15]
reps = int(reps)

def load_json(tag, rep):
    try:
        with open(os.path.join(raw, f"{tag}.{rep}.json")) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None

def perftest_row(rep, tag):
    # the last line of -v's CSV: iterations, p50 lat, avg lat, overall lat, avg bw,
    # overall bw (MB/s = MiB/s), avg msg rate, overall msg rate; the lines a second before
    # the final one start with "[thread 0]"
    with open(os.path.join(raw, f"{tag}.{rep}.csv")) as f:
        rows = [l.split("]")[-1].split(",") for l in f.read().splitlines() if l.strip()]
    rows = [r for r in rows if len(r) == 8 and r[0].strip().isdigit()]
    return rows[-1]

def perftest_gbs(rep, tag="perftest"):
    return float(perftest_row(rep, tag)[5]) * 1048576 / 1e9

def perftest_msgs(rep, tag):
    return float(perftest_row(rep, tag)[7])

trace_gbs = lambda rep: perftest_gbs(rep, "perftest_block")

def per_rep(fn):
    out = []
    for rep in range(1, reps + 1):
        try:
            v = fn(rep)
        except (TypeError, KeyError, ValueError, ZeroDivisionError, OSError, IndexError):
            v = None
        if v is not None:
            out.append(float(v))
    return out

def med(xs):
    return statistics.median(xs) if xs else None

mcj = lambda tag, key: (lambda rep: load_json(tag, rep)[key])

# (label, unit, mc(rep), reference label, ref(rep), goal kind, goal): kind "ratio" holds
# mc / reference to the goal, "abs" the mc figure itself; None: context, no goal
rows = [
    ("16 MiB get through node b (`--dram 0`) of objects held by node a, registered",
     "GB/s", mcj("get16m_remote", "gb_per_s"),
     "ucx_perftest ucp_am_bw 16 MiB, same UCX settings", perftest_gbs, "ratio", 0.9),
    ("master RPC put (PUT_START + PUT_END), batches of 128, 2 clients", "keys/s",
     mcj("rpc", "put_keys_per_s"), "master in-process, 1 core",
     mcj("rpc", "inproc_put_keys_per_s"), "abs", 300e3),
    ("master RPC get (GET + LEASE_RELEASE), batches of 128, 2 clients", "keys/s",
     mcj("rpc", "get_keys_per_s"), "master in-process, 1 core",
     mcj("rpc", "inproc_get_keys_per_s"), "abs", 300e3),
    ("master RPC exist, batches of 128, 2 clients", "keys/s",
     mcj("rpc", "exist_keys_per_s"), "master in-process, 1 core",
     mcj("rpc", "inproc_exist_keys_per_s"), "abs", 300e3),
    (f"trace replay through t3 (`--dram 0`) of a 3-agent cluster, {trace_block} blocks, "
     "bytes moved (read + written)", "GB/s", mcj("trace", "gb_per_s"),
     f"ucx_perftest ucp_am_bw {trace_block}, same UCX settings", trace_gbs, "ratio", 0.7),
    ("trace replay: hit ratio (leading blocks read and verified / blocks)", "",
     mcj("trace", "hit_ratio"),
     f"offline LRU of the cluster's DRAM (2 x {trace_dram})", mcj("trace", "lru_hit_ratio"),
     "ratio", 0.95),
    # context, no goal
    ("16 MiB get through node a (holds them: the local path), registered", "GB/s",
     mcj("get16m_local", "gb_per_s"),
     "ucx_perftest ucp_am_bw 16 MiB, same UCX settings", perftest_gbs, None, None),
    ("trace replay: blocks moved", "blocks/s", mcj("trace", "blocks_per_s"),
     f"ucx_perftest ucp_am_bw {trace_block}: messages",
     lambda rep: perftest_msgs(rep, "perftest_block"), None, None),
    ("trace replay: p99 per request (prefix match + gets + puts)", "ms",
     mcj("trace", "p99_ms"), "its p50", mcj("trace", "p50_ms"), None, None),
    ("64 KiB gets at batch 32 through node b (`--dram 0`) of objects held by node a, "
     "registered", "GB/s", mcj("getb32_65536", "gb_per_s"),
     "ucx_perftest ucp_am_bw 64 KiB, same UCX settings",
     lambda rep: perftest_gbs(rep, "perftest_65536"), "ratio", 0.8),
    ("256 KiB gets at batch 32 through node b (`--dram 0`) of objects held by node a, "
     "registered", "GB/s", mcj("getb32_262144", "gb_per_s"),
     "ucx_perftest ucp_am_bw 256 KiB, same UCX settings",
     lambda rep: perftest_gbs(rep, "perftest_262144"), "ratio", 0.8),
    (f"trace replay as row 5, {trace_clients} clients taking the requests in order "
     f"({trace_clients} in flight)", "GB/s", mcj("tracec", "gb_per_s"),
     f"ucx_perftest ucp_am_bw {trace_block}, same UCX settings", trace_gbs, "ratio", 0.7),
    (f"trace replay, {trace_clients} clients: hit ratio", "", mcj("tracec", "hit_ratio"),
     f"offline LRU of the cluster's DRAM (2 x {trace_dram})", mcj("tracec", "lru_hit_ratio"),
     "ratio", 0.95),
]

def fmt(v, unit):
    if v is None:
        return "n/a"
    if unit == "keys/s":
        return f"{v / 1000:.0f} k"
    if unit == "blocks/s":
        return f"{v / 1000:.1f} k"
    if unit == "":
        return f"{v:.3f}"
    return f"{v:.2f}"

table = []
missed = 0
for i, (label, unit, mcf, rlabel, rf, kind, goal) in enumerate(rows, 1):
    mcv, refv = per_rep(mcf), per_rep(rf)
    ratios = per_rep(lambda r: float(mcf(r)) / float(rf(r)))
    m, ref, ratio = med(mcv), med(refv), med(ratios)
    if kind is None:
        verdict, gtxt = "", ""
    else:
        gtxt = f"≥ {goal:g}x" if kind == "ratio" else f"≥ {fmt(goal, unit)} {unit}"
        judged = ratio if kind == "ratio" else m
        if judged is None:
            verdict = "no figure"
            missed += 1
        else:
            ok = judged >= goal
            missed += not ok
            verdict = "met" if ok else "**missed**"
    spread = ""
    if len(ratios) > 1:
        spread = f" ({min(ratios):.2f}–{max(ratios):.2f})"
    mspread = ""
    if kind == "abs" and len(mcv) > 1:
        mspread = f" ({fmt(min(mcv), unit)}–{fmt(max(mcv), unit)})"
    table.append(f"| {i} | {label} | {fmt(m, unit)} {unit}{mspread} | {rlabel}: "
                 f"{fmt(ref, unit)} {unit} | {'n/a' if ratio is None else f'{ratio:.2f}x'}"
                 f"{spread} | {gtxt} | {verdict} |")

now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
head = [
    f"Run {now}, `scripts/bench-cluster.sh` ({reps} repetitions: {pt_iters} perftest "
    f"messages, {secs} s per mc-bench run, {rpc_secs} s per master-rpc-bench phase; trace: "
    f"`scripts/gen-trace.py --requests {trace_reqs} --seed 1`, {trace_pt_iters} perftest "
    f"messages of {trace_block}; the script took {elapsed} s).",
    f"Machine: {machine}.",
    "",
    "| # | measurement | mc | reference (same run) | mc / reference (min–max) | goal | |",
    "|---|---|---|---|---|---|---|",
]
foot = [
    "",
    "Figures are medians over the repetitions; a ratio is the median of the per-repetition "
    "ratios (each mc figure against the reference of its own repetition), with its range. "
    "Rows 1, 5, 6 and 10–13's goals are on the ratio; rows 2–4's on the RPC rate itself (its "
    "range in brackets), the in-process master being context. Rows 7–9 have no goal. The trace "
    "replay's GB/s and blocks/s count the time during which a store call was in flight (rows "
    "5, 6, 8, 9: one client, one request at a time; rows 12, 13: "
    f"{trace_clients} clients, each one request at a time; batches of 32). GB/s = 1e9 B/s "
    "(perftest's MB/s are MiB/s, converted).",
]
text = "\n".join(head + table + foot)
print()
print(text)
print()
print(f"bench-cluster: {missed} goal(s) missed")
with open(os.path.join(run, "results.md"), "w") as f:
    f.write(text + "\n")

if docs_md:
    name = os.environ.get("MC_BENCH_BLOCK", "bench-cluster")
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    block = f"{begin}\n{text}\n{end}"
    try:
        with open(docs_md) as f:
            old = f.read()
    except OSError:
        old = ""
    if begin in old and end in old:
        new = old[: old.index(begin)] + block + old[old.index(end) + len(end):]
    else:
        new = old.rstrip("\n") + "\n\n## Cluster\n\n" + block + "\n"
    with open(docs_md, "w") as f:
        f.write(new)
PY

echo "bench-cluster: results and logs in $run" >&2
[ -n "$docs_md" ] && echo "bench-cluster: wrote $docs_md" >&2
exit "$failed"
