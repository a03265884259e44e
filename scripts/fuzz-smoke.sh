#!/usr/bin/env bash
# The fuzz smoke run of CI: builds the libFuzzer targets of tests/fuzz with clang in
# build-fuzz, replays each committed corpus (meson test --suite fuzz), then fuzzes each
# target for a bounded time, one after the other, from a copy of its corpus (the repository
# is not changed). Any crash, leak, sanitizer report or timeout fails the run; the input
# that caused it is printed in hex and kept in the work folder named at the end.
# Skips (exit 0) only when clang's libFuzzer cannot be installed on this machine.
#
# usage: scripts/fuzz-smoke.sh [SECONDS_PER_TARGET]    (default 20; FUZZ_BUILD_DIR: build-fuzz)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
secs=${1:-20}
builddir=${FUZZ_BUILD_DIR:-build-fuzz}
start=$SECONDS

# clang and its fuzzer runtime (libclang-rt-dev; clang only recommends it)
has_libfuzzer() {
    local d
    command -v clang >/dev/null 2>&1 || return 1
    d=$(mktemp -d)
    printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' \
        > "$d/probe.c"
    clang -fsanitize=fuzzer "$d/probe.c" -o "$d/probe" >/dev/null 2>&1
    local rc=$?
    rm -rf "$d"
    return $rc
}
if ! has_libfuzzer; then
    echo "fuzz-smoke: installing clang and its fuzzer runtime"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq || true
    $sudo apt-get install -y -qq --no-install-recommends clang libclang-rt-dev >/dev/null || true
    if ! has_libfuzzer; then
        echo "fuzz-smoke: SKIP: clang with libFuzzer (clang, libclang-rt-dev) cannot be installed"
        exit 0
    fi
fi

# a build folder configured with another compiler is made anew
if [ -f "$builddir/meson-info/intro-compilers.json" ] &&
    ! grep -q '"id": "clang"' "$builddir/meson-info/intro-compilers.json"; then
    rm -rf "$builddir"
fi
CC=clang scripts/setup.sh "$builddir" -Dfuzz=enabled -Dtests=disabled -Dwerror=true \
    -Dbuildtype=debugoptimized

# the targets and their corpora, as tests/fuzz/meson.build registers them
mapfile -t targets < <(meson introspect "$builddir" --tests | python3 -c '
import json, sys
for t in json.load(sys.stdin):
    if any(s.endswith(":fuzz") or s == "fuzz" for s in t["suite"]):
        print(t["cmd"][0], t["cmd"][-1])
')
[ ${#targets[@]} -gt 0 ] || { echo "fuzz-smoke: no fuzz targets configured" >&2; exit 1; }
exes=()
for t in "${targets[@]}"; do
    exes+=("$(realpath --relative-to="$builddir" "${t%% *}")")
done
# quiet when it builds; the whole output when it does not (a link error must be seen)
ninja -C "$builddir" "${exes[@]}" > "$builddir/fuzz-build.log" 2>&1 ||
    { cat "$builddir/fuzz-build.log"; echo "fuzz-smoke: the targets did not build" >&2; exit 1; }
meson test -C "$builddir" --suite fuzz --no-rebuild --print-errorlogs >/dev/null ||
    { meson test -C "$builddir" --suite fuzz --no-rebuild --print-errorlogs; exit 1; }
echo "fuzz-smoke: corpus replay passed (${#targets[@]} targets)"

work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-smoke.XXXXXX")
failed=()
# UBSan is built not to recover; these make ASan's and UBSan's reports complete
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
for t in "${targets[@]}"; do
    exe=${t%% *}
    corpus=${t#* }
    name=$(basename "$exe")
    mkdir -p "$work/$name/corpus"
    cp -r "$corpus/." "$work/$name/corpus/"
    rc=0
    timeout -k 10 $((secs + 120)) "$exe" -max_total_time="$secs" -rss_limit_mb=2048 \
        -timeout=25 -print_final_stats=1 -artifact_prefix="$work/$name/" \
        "$work/$name/corpus" > "$work/$name/log" 2>&1 || rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$name/log" | tail -1)
    cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$work/$name/log" | tail -1 || true)
    if [ $rc -eq 0 ]; then
        printf 'fuzz-smoke: %-20s ok    %10s runs in %ss  %s\n' "$name" "${runs:-?}" "$secs" "$cov"
        continue
    fi
    failed+=("$name")
    printf 'fuzz-smoke: %-20s FAILED (exit %d), log %s\n' "$name" "$rc" "$work/$name/log"
    grep -E -A40 '^==[0-9]+==ERROR|runtime error|^SUMMARY|deadly signal|ERROR: libFuzzer' \
        "$work/$name/log" | head -80 || tail -40 "$work/$name/log"
    for a in "$work/$name"/crash-* "$work/$name"/leak-* "$work/$name"/timeout-* \
        "$work/$name"/oom-*; do
        [ -f "$a" ] || continue
        echo "fuzz-smoke: $name input $(basename "$a") ($(stat -c %s "$a") bytes, hex):"
        od -An -tx1 -v "$a" | head -64
    done
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz-smoke: FAILED: ${failed[*]} (logs and inputs in $work)" >&2
    exit 1
fi
rm -rf "$work"
echo "fuzz-smoke: all ${#targets[@]} targets passed in $((SECONDS - start))s"
