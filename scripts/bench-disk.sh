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
if [ "${MC_BENCH_NO_BUILD:-0}" != 1 ]; then
    scripts/setup.sh "$builddir" >/dev/null
    ninja -C "$builddir" tests/bench/mc-disk-bench >/dev/null
fi
bench=$builddir/tests/bench/mc-disk-bench
file=$(mktemp "$dir/mc-bench-disk.XXXXXX")
trap 'rm -f "$file"' EXIT

to_bytes() {
    numfmt --from=iec "$1"
}

total=$(to_bytes "$bytes")
printf '# %s, %s (%s), load %s, %s per run, median of %s alternating fio/store runs\n' \
    "$(uname -r)" "$dir" "$(df -T "$dir" | awk 'NR==2 {print $2}')" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" "${secs}s" "$reps"
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
