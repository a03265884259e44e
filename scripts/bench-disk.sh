#!/usr/bin/env bash
# The disk tier's benchmark: the store's batch reads (mc-disk-bench: random batches of 32
# records, every read checked, on the engine the store picks) against fio's random O_DIRECT
# reads of the same file, with the same block size and queue depth, in one run. For each
# record size (256 KiB and 16 MiB): fio first, then mc-disk-bench, then the ratio, against
# the goal of docs/performance.md (>= 0.9x fio). A second pass forces the threads engine
# (pread/pwrite workers: io_uring denied) for the same figures.
#
#   scripts/bench-disk.sh [DIR]       DIR: where the file goes (default: $TMPDIR or /tmp);
#                                     it must be the file system the disk tier would use
#
# Environment: MC_BENCH_BUILD (build dir, default build), MC_BENCH_SECONDS (3, per run),
# MC_BENCH_REPS (3: fio and the store alternate, each figure the median, the ratio the
# median of the per-repetition ratios: a shared device's bandwidth drifts between runs),
# MC_BENCH_DISK_BYTES (1G: the file for each size; larger than the page cache would be
# fairer still, but O_DIRECT bypasses it either way), MC_BENCH_DEPTH (32: fio's queue depth,
# and the most I/Os the store has in flight), MC_BENCH_STAGING (32M: the store's staging
# memory, depth x chunk),
# MC_BENCH_NO_BUILD=1 (use the build as it is). The file is removed on exit.
#
# Then through the agent (docs/disk.md): a standalone mc-agent with a small DRAM pool
# (MC_BENCH_DRAM, 64M) and a disk file in DIR; mc-bench puts objects of 256 KiB and 16 MiB
# worth MC_BENCH_AGENT_BYTES (1152M: nearly all of them end on disk; 72 of 16 MiB, two
# clients' batches), then times batch gets
# of 32 (mc-bench --op get: every read a disk hit but the few still in DRAM), alternating
# with fio on that very file at the same block size and queue depth; and a trace replay
# (mc-bench --trace of `scripts/gen-trace.py --requests MC_BENCH_TRACE_REQS --seed 1`, 64 KiB
# blocks) with DRAM only (MC_BENCH_TRACE_DRAM, 48M), with DRAM plus a disk of 4x its size,
# each against the offline LRU of the same capacity that mc-bench computes.
# The gets run once per client count in MC_BENCH_AGENT_CLIENTS ("1 2"): one client waits for
# its whole batch before the next, leaving the disk idle between batches where fio keeps
# its queue full; two clients keep a batch in flight while the other is copied out, the
# device's queue still bounded by disk_depth (fio's depth) as before.
# MC_BENCH_BUSY=1 runs all of it beside `stress-ng --cpu 2`. MC_BENCH_PART=store|agent runs
# one part only.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
builddir=${MC_BENCH_BUILD:-build}
secs=${MC_BENCH_SECONDS:-3}
reps=${MC_BENCH_REPS:-3}
bytes=${MC_BENCH_DISK_BYTES:-1G}
depth=${MC_BENCH_DEPTH:-32}
staging=$(numfmt --from=iec "${MC_BENCH_STAGING:-32M}")
dir=${1:-${TMPDIR:-/tmp}}

command -v fio >/dev/null || { echo "bench-disk: fio is not installed (scripts/setup.sh)" >&2; exit 1; }
part=${MC_BENCH_PART:-all}
if [ "${MC_BENCH_NO_BUILD:-0}" != 1 ]; then
    scripts/setup.sh "$builddir" >/dev/null
    ninja -C "$builddir" tests/bench/mc-disk-bench tests/bench/mc-bench daemon/agent/mc-agent \
        >/dev/null
fi
hogs=
if [ "${MC_BENCH_BUSY:-0}" = 1 ]; then
    command -v stress-ng >/dev/null || { echo "bench-disk: stress-ng is not installed" >&2; exit 1; }
    stress-ng --cpu 2 --timeout 3600s --quiet &
    hogs=$!
fi
bench=$builddir/tests/bench/mc-disk-bench
file=$(mktemp "$dir/mc-bench-disk.XXXXXX")
run=$(mktemp -d "${TMPDIR:-/tmp}/mc-bench-disk-run.XXXXXX")
agent_pid=
cleanup() {
    [ -z "$agent_pid" ] || kill "$agent_pid" 2>/dev/null || true
    [ -z "$hogs" ] || kill "$hogs" 2>/dev/null || true
    rm -f "$file" "$dir"/mc-bench-agent-disk.*
    rm -rf "$run"
}
trap cleanup EXIT

to_bytes() {
    numfmt --from=iec "$1"
}

total=$(to_bytes "$bytes")
printf '# %s, %s (%s), load %s, %s per run, median of %s alternating fio/store runs\n' \
    "$(uname -r)" "$dir" "$(df -T "$dir" | awk 'NR==2 {print $2}')" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" "${secs}s" "$reps"
[ -z "$hogs" ] || echo "# busy host: stress-ng --cpu 2 running"
if [ "$part" != agent ]; then
printf '%-8s %-9s %9s %10s %10s %10s %6s\n' size engine fio_depth staging fio_GB/s store_GB/s \
    ratio
for size in 256K 16M; do
    sz=$(to_bytes "$size")
    count=$((total / (sz + 4096 * 2)))
    [ "$count" -ge 64 ] || count=64
    # the store's staging: chunks of the record's size up to 4 MiB, as many as fit in
    # $staging bytes, at most $depth (256 KiB: 32 x 256 KiB; 16 MiB: 8 x 4 MiB, where fio has
    # 32 x 16 MiB in flight; docs/decisions.md)
    chunk=$((sz < 4194304 ? sz : 4194304))
    sdepth=$((staging / chunk))
    [ "$sdepth" -le "$depth" ] || sdepth=$depth
    # write the records once (kept), then fio and the store read the same file in turn
    "$bench" --file "$file" --size "$sz" --count "$count" --batch 32 --depth "$sdepth" \
        --chunk "$chunk" --seconds 1 --keep >/dev/null 2>&1
    fsize=$(stat -c %s "$file")
    for engine in auto threads; do
        runs=()
        for _ in $(seq "$reps"); do
            fio_kb=$(fio --name=ref --filename="$file" --rw=randread --bs="$sz" \
                --iodepth="$depth" --direct=1 --ioengine=io_uring --runtime="$secs" \
                --time_based --offset=4096 --size=$((fsize - 4096)) --output-format=terse \
                2>/dev/null | awk -F';' '{print $7}')
            out=$("$bench" --file "$file" --size "$sz" --count "$count" --batch 32 \
                --depth "$sdepth" --chunk "$chunk" --engine "$engine" --seconds "$secs" \
                --keep --no-write 2>/dev/null)
            runs+=("$fio_kb $out")
        done
        python3 - "$size" "$depth" "$sdepth" "$chunk" "${runs[@]}" <<'PY'
import json, statistics, sys
size, depth, sdepth, chunk = sys.argv[1:5]
fio, store, ratio, write = [], [], [], []
for run in sys.argv[5:]:
    kb, out = run.split(" ", 1)
    r = json.loads(out)
    f = int(kb) * 1024 / 1e9
    fio.append(f)
    store.append(r["read_gb_per_s"])
    ratio.append(r["read_gb_per_s"] / f)
    engine = r["engine"]
print("%-8s %-9s %9s %10s %10.3f %10.3f %6.2f" % (size, engine, depth,
      "%s x %dK" % (sdepth, int(chunk) // 1024), statistics.median(fio), statistics.median(store),
      statistics.median(ratio)))
PY
    done
    rm -f "$file"
done

fi # part store

[ "$part" != store ] || exit 0

# --- through the agent --------------------------------------------------------------------
agent_bin=$builddir/daemon/agent/mc-agent
mcb=$builddir/tests/bench/mc-bench
dram=${MC_BENCH_DRAM:-64M}
abytes=$(to_bytes "${MC_BENCH_AGENT_BYTES:-1152M}")

# start_agent SOCKNAME DRAM [ARGS...]: a standalone agent, waited for
start_agent() {
    local name=$1 d=$2
    shift 2
    rm -f "$run/$name.ready"
    "$agent_bin" --standalone --socket "$run/$name.sock" --dram "$d" \
        --ready-file "$run/$name.ready" "$@" 2>"$run/$name.log" &
    agent_pid=$!
    for _ in $(seq 600); do
        [ -f "$run/$name.ready" ] && return 0
        kill -0 "$agent_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "bench-disk: the agent did not start:" >&2
    cat "$run/$name.log" >&2
    exit 1
}
stop_agent() {
    kill "$agent_pid" 2>/dev/null || true
    wait "$agent_pid" 2>/dev/null || true
    agent_pid=
}

echo
echo "# through mc-agent: --dram $dram, a disk file in $dir; mc-bench gets (batch 32, CLIENTS"
echo "# clients) of objects put beforehand (nearly all on disk) against fio on the same file"
printf '%-8s %7s %6s %9s %10s %10s %10s %6s %10s\n' size clients keys fio_depth staging fio_GB/s \
    get_GB/s ratio disk_hits
for size in 256K 16M; do
    sz=$(to_bytes "$size")
    keys=$((abytes / sz))
    dfile=$(mktemp "$dir/mc-bench-agent-disk.XXXXXX")
    rm -f "$dfile"
    dsize=$((abytes + abytes / 4 + 64 * 1048576))
    # the agent reads a record's whole blocks straight into its landing block (staging only
    # for a header and a last partial block), so it keeps fio's depth at every size:
    # disk_depth I/Os in flight, chunks of up to 4 MiB for what does go through staging
    chunk=$((sz < 4194304 ? sz : 4194304))
    sdepth=$depth
    # the landing segment takes a batch of 32 objects per client at once
    maxc=1
    for cl in ${MC_BENCH_AGENT_CLIENTS:-1 2}; do [ "$cl" -le "$maxc" ] || maxc=$cl; done
    land=$((maxc * 32 * sz + 64 * 1048576))
    start_agent bench "$dram" --disk "$dfile" --disk-size "$dsize" --set disk_depth="$sdepth" \
        --set disk_chunk="$chunk" --set landing="$land"
    # mc-bench's prefill (untimed) puts every key first: all but the last few go to disk
    for clients in ${MC_BENCH_AGENT_CLIENTS:-1 2}; do
        if [ "$keys" -lt $((32 * clients)) ]; then
            echo "$size: $clients clients need $((32 * clients)) keys, $keys fit (MC_BENCH_AGENT_BYTES)"
            continue
        fi
        runs=()
        hits0=$("$builddir/libmc/mcctl" --socket "$run/bench.sock" stats |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["disk"]["disk_hits"])')
        for _ in $(seq "$reps"); do
            fio_kb=$(fio --name=ref --filename="$dfile" --rw=randread --bs="$sz" \
                --iodepth="$depth" --direct=1 --ioengine=io_uring --runtime="$secs" \
                --time_based --offset=4096 --size="$abytes" --output-format=terse \
                2>/dev/null | awk -F';' '{print $7}')
            # a failed item (a timeout on a host too busy) is reported, the figure still printed
            out=$("$mcb" --socket "$run/bench.sock" --op get --size "$sz" --batch 32 \
                --clients "$clients" --seconds "$secs" --keys "$keys" 2>"$run/get.err" |
                tail -n 1) || sed 's/^/bench-disk: /' "$run/get.err" >&2
            runs+=("$fio_kb $out")
        done
        hits=$("$builddir/libmc/mcctl" --socket "$run/bench.sock" stats |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["disk"]["disk_hits"])')
        python3 - "$size" "$clients" "$keys" "$depth" "$((hits - hits0))" \
            "$sdepth x $((chunk / 1024))K" "${runs[@]}" <<'PY'
import json, statistics, sys
size, clients, keys, depth, hits, staging = sys.argv[1:7]
fio, get, ratio = [], [], []
for run in sys.argv[7:]:
    kb, out = run.split(" ", 1)
    r = json.loads(out)
    f = int(kb) * 1024 / 1e9
    fio.append(f)
    get.append(r["gb_per_s"])
    ratio.append(r["gb_per_s"] / f if f > 0 else 0)
print("%-8s %7s %6s %9s %10s %10.3f %10.3f %6.2f %10s" % (size, clients, keys, depth, staging,
      statistics.median(fio), statistics.median(get), statistics.median(ratio), hits))
PY
    done
    stop_agent
    rm -f "$dfile"
done

# --- the trace: DRAM only, DRAM + 4x disk, each against the offline LRU of its capacity ---
treqs=${MC_BENCH_TRACE_REQS:-3000}
tdram=${MC_BENCH_TRACE_DRAM:-48M}
python3 scripts/gen-trace.py --requests "$treqs" --seed 1 >"$run/trace.jsonl"
echo
echo "# trace: scripts/gen-trace.py --requests $treqs --seed 1, 64 KiB blocks, batch 32;"
echo "# hit_ratio (the store) vs lru_hit_ratio (offline LRU of the same capacity_bytes)"
printf '%-16s %14s %9s %9s %8s %9s %10s\n' setup capacity_bytes hit_ratio lru_ratio vs_lru \
    put_waits disk_hits
for setup in dram dram+4xdisk; do
    dfile=
    if [ "$setup" = dram ]; then
        start_agent trace "$tdram"
    else
        dfile=$(mktemp "$dir/mc-bench-agent-disk.XXXXXX")
        rm -f "$dfile"
        start_agent trace "$tdram" --disk "$dfile" \
            --disk-size $((4 * $(to_bytes "$tdram") + 4096))
    fi
    out=$("$mcb" --socket "$run/trace.sock" --trace "$run/trace.jsonl" 2>"$run/trace.err" |
        tail -n 1) || { cat "$run/trace.err" >&2; exit 1; }
    hits=$("$builddir/libmc/mcctl" --socket "$run/trace.sock" stats |
        python3 -c 'import json,sys; print(json.load(sys.stdin).get("disk", {}).get("disk_hits", "-"))')
    stop_agent
    [ -z "$dfile" ] || rm -f "$dfile"
    python3 - "$setup" "$hits" "$out" <<'PY'
import json, sys
setup, hits, out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
print("%-16s %14d %9.4f %9.4f %8.3f %9d %10s" % (setup, out["capacity_bytes"], out["hit_ratio"],
      out["lru_hit_ratio"], out["hit_vs_lru"], out.get("put_waits", 0), hits))
PY
done
