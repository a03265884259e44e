#!/usr/bin/env bash
# The test command: setup, build (warnings are errors), every meson test suite (gpu among
# them: the test device stands in for a GPU; scripts/gpu-check.sh on a real one) (slow last,
# on its own: tests/slow/meson.build), the integration, fault and cluster suites with io_uring
# denied (tests/launcher/meson.build; fault and cluster with `stress-ng --cpu 2` running), then the
# unit, integration, fault, cluster, gpu and disk suites again in an AddressSanitizer + UBSan build (the agent
# runs instrumented too, and must exit with no leak), then the fuzz smoke run (every libFuzzer
# target for a bounded time: scripts/fuzz-smoke.sh).
#
# usage: scripts/test.sh
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

scripts/setup.sh build -Dwerror=true
ninja -C build
# every suite but slow, ha included (master HA: a directory rebuilt, failover on an etcd the
# tests start themselves, about 45 s; skipped without the etcd binary)
meson test -C build --print-errorlogs --num-processes 2 --no-suite slow
meson test -C build --suite slow --print-errorlogs   # once, alone: soak 60 s, < 4 min in all
# integration, fault and cluster again with io_uring denied to every process the tests start
# (mc-no-io-uring: Docker's default seccomp profile): the agents run their epoll loop. The
# fault and cluster suites of this pass run on a busy host: `stress-ng --cpu 2` keeps both
# cores taken meanwhile (agents, masters and tests compete with CPU hogs, as beside an engine)
meson test -C build --suite integration --suite disk --print-errorlogs \
    --num-processes 2 --wrapper "$top/build/tests/launcher/mc-no-io-uring"
stress-ng --cpu 2 --timeout 1800s --quiet &
hogs=$!
trap 'kill "$hogs" 2>/dev/null || true' EXIT
meson test -C build --suite fault --suite cluster --print-errorlogs \
    --num-processes 2 --wrapper "$top/build/tests/launcher/mc-no-io-uring"
kill "$hogs"
wait "$hogs" 2>/dev/null || true
trap - EXIT

scripts/setup.sh build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbuildtype=debug
ninja -C build-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --suite unit --suite integration --suite fault --suite cluster \
    --suite gpu --suite disk --print-errorlogs \
    --num-processes 2
scripts/fuzz-smoke.sh
echo "test: all suites passed"
