#!/usr/bin/env bash
# Run mcstore. Commands:
#   demo   set up, build, start a standalone agent (256 MiB of DRAM) on a private socket,
#          run the demo workload (puts, gets, a hit/miss summary), print `mcctl stats`, stop
#          the agent.
# Cluster start/stop/status come with mc-master.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}

case "$cmd" in
demo)
    cd "$top"
    scripts/setup.sh build >/dev/null
    ninja -C build >/dev/null
    run=$(mktemp -d /tmp/mcstore-demo.XXXXXX)
    sock="$run/agent.sock"
    build/daemon/agent/mc-agent --standalone --socket "$sock" --dram 256M \
        --ready-file "$run/ready" 2>"$run/agent.log" &
    agent=$!
    cleanup() {
        kill -TERM "$agent" 2>/dev/null || true
        wait "$agent" 2>/dev/null || true
        rm -rf "$run"
    }
    trap cleanup EXIT
    for _ in $(seq 1 100); do
        [ -f "$run/ready" ] && break
        kill -0 "$agent" 2>/dev/null || { cat "$run/agent.log"; exit 1; }
        sleep 0.05
    done
    [ -f "$run/ready" ] || { echo "launch: the agent did not come up"; cat "$run/agent.log"; exit 1; }
    echo "launch: agent pid $agent on $sock"
    build/tests/bench/demo_workload --socket "$sock" --prompts 16 --blocks 32 --block-size 65536
    echo "launch: mcctl stats"
    build/libmc/mcctl --socket "$sock" stats
    echo
    ;;
*)
    echo "usage: scripts/launch.sh demo" >&2
    exit 2
    ;;
esac
