#!/bin/bash
# mc-bench --trace against the real mc-agent (standalone): a generated trace
# (scripts/gen-trace.py) replays with every block's bytes verified and no failed call,
# with the offline LRU's hit ratio exactly while nothing is evicted, and through eviction
# (a pool smaller than the trace's blocks) without an error; hostile trace lines are reported
# with their line numbers and skipped, bad usage is exit 2. Needs MC_AGENT_BIN, MC_BENCH and
# GEN_TRACE (meson sets them); without them it exits 77 (SKIP).
set -u
. "$(dirname "$0")/../lib/t_sh.sh"

if [ -z "${MC_AGENT_BIN:-}" ] || [ -z "${MC_BENCH:-}" ] || [ -z "${GEN_TRACE:-}" ]; then
    echo "MC_AGENT_BIN, MC_BENCH or GEN_TRACE not set: skipping" >&2
    exit 77
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/mc-trace-XXXXXX") || exit 1
agent_pid=
failures=0

stop_agent() {
    stop_pid "$agent_pid"
    agent_pid=
}
cleanup() {
    stop_agent
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# start_agent DRAM: a fresh standalone agent, its ready file within 10 s
start_agent() {
    rm -f "$dir/ready"
    "$MC_AGENT_BIN" --standalone --socket "$dir/a.sock" --dram "$1" \
        --ready-file "$dir/ready" >"$dir/agent.log" 2>&1 &
    agent_pid=$!
    wait_ready "$dir/ready" "$agent_pid" "$dir/agent.log" || exit 1
}

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# field JSON NAME: one numeric field of mc-bench's JSON line (flat, numbers only)
field() {
    printf '%s\n' "$1" | sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p"
}

# replay WHAT ARGS...: run mc-bench --trace, insist on exit 0, no wrong bytes, no error
replay() {
    what=$1
    shift
    out=$("$MC_BENCH" --socket "$dir/a.sock" "$@" 2>"$dir/err")
    rc=$?
    json=$(printf '%s\n' "$out" | tail -n 1)
    echo "$what: $json"
    if [ $rc -ne 0 ]; then
        fail "$what: exit $rc"
        cat "$dir/err" >&2
        return 1
    fi
    [ "$(field "$json" wrong_bytes)" = 0 ] || fail "$what: wrong bytes"
    [ "$(field "$json" errors)" = 0 ] || fail "$what: failed calls"
    [ "$(field "$json" blocks_read)" -gt 0 ] || fail "$what: no block read"
    return 0
}

python3 "$GEN_TRACE" --requests 400 --conversations 40 --seed 7 >"$dir/t.jsonl" ||
    exit 1

# 1. 64 MiB, 16 KiB blocks: the trace's ~2 k distinct blocks (32 MiB) fit; no eviction,
#    so the store's hits are the LRU's exactly
start_agent 64M
if replay "fits" --trace "$dir/t.jsonl" --block-size 16K; then
    [ "$(field "$json" hit_blocks)" -gt 0 ] || fail "fits: no hit"
    [ "$(field "$json" hit_ratio)" = "$(field "$json" lru_hit_ratio)" ] ||
        fail "fits: hit ratio differs from the LRU's with nothing evicted"
    [ "$(field "$json" malformed_lines)" = 0 ] || fail "fits: malformed lines"
    # one client: its calls never overlap, so the busy time is their sum
    [ "$(field "$json" busy_s)" = "$(field "$json" store_s)" ] ||
        fail "fits: one client's busy_s differs from store_s"
fi

# 2. the same agent, 64 KiB blocks (128 MiB of distinct blocks in a 64 MiB pool): eviction
#    all along, registered buffers; still every byte right and no failed put
replay "evicting" --trace "$dir/t.jsonl" --block-size 64K --registered --batch 8

# 2b. four clients, four requests in flight, through eviction: every byte still right, no
#     failed call (a block another request is putting is MC_ERR_BUSY or EXISTS, not an
#     error), every request replayed once, and the busy time (calls of the four clients
#     overlapping) under the sum of the calls' times
if replay "four clients" --trace "$dir/t.jsonl" --block-size 64K --registered --batch 8 \
    --clients 4; then
    [ "$(field "$json" clients)" = 4 ] || fail "four clients: clients"
    [ "$(field "$json" requests)" = 400 ] || fail "four clients: requests"
    awk -v b="$(field "$json" busy_s)" -v s="$(field "$json" store_s)" \
        'BEGIN { exit !(b > 0 && b < s) }' ||
        fail "four clients: busy_s not under store_s (the calls never overlapped?)"
fi

# 3. hostile lines: reported with their numbers, skipped; the good ones replay
{
    echo '{"hash_ids":[1,2,3]}'
    echo 'not json at all'
    echo '{"hash_ids":[1,-2]}'
    echo ''
    printf '{"hash_ids":[1,2,3,4]}\n'
    echo '{"timestamp":"x","hash_ids":[1]}'
    echo '[{"hash_ids":[1]}]'
} >"$dir/bad.jsonl"
if replay "hostile" --trace "$dir/bad.jsonl" --block-size 4K; then
    [ "$(field "$json" malformed_lines)" = 4 ] || fail "hostile: malformed_lines"
    [ "$(field "$json" requests)" = 2 ] || fail "hostile: requests"
    for n in 2 3 6 7; do
        grep -q "bad.jsonl:$n: " "$dir/err" || fail "hostile: line $n not reported"
    done
    [ "$(field "$json" hit_blocks)" = 3 ] || fail "hostile: the second request's prefix"
fi

# 4. usage and missing files
"$MC_BENCH" --socket "$dir/a.sock" --trace "$dir/none.jsonl" >/dev/null 2>&1
[ $? -eq 1 ] || fail "a missing trace is exit 1"
"$MC_BENCH" --socket "$dir/a.sock" --trace "$dir/t.jsonl" --op get >/dev/null 2>&1
[ $? -eq 2 ] || fail "--trace with --op is exit 2"
"$MC_BENCH" --socket "$dir/a.sock" --op get --size 4K --capacity 1M >/dev/null 2>&1
[ $? -eq 2 ] || fail "--capacity without --trace is exit 2"

stop_agent
if grep -q 'ERROR' "$dir/agent.log"; then
    fail "the agent logged errors"
    grep 'ERROR' "$dir/agent.log" >&2
fi
if [ $failures -ne 0 ]; then
    echo "$failures failure(s)" >&2
    exit 1
fi
echo "all ok"
