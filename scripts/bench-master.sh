#!/usr/bin/env bash
# The main job until the agent exists: set up, build, and run the master service benchmark
# at 1 M and 10 M objects (about a minute and 2 GB of memory). Extra arguments go to
# master_bench (e.g. --objects 1000000 --key-bytes 64).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
scripts/setup.sh build
ninja -C build tests/bench/master_bench >/dev/null
exec build/tests/bench/master_bench "$@"
