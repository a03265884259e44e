#!/bin/bash
# The agent where io_uring is denied (mc-no-io-uring, the io_uring part of Docker's default
# seccomp profile): it says so once in its log, runs its epoll loop ("loop":"epoll" in
# mcctl stats), and serves a client that is denied io_uring too (mcctl under the same
# filter). Also loop=epoll chosen by config where io_uring works. Needs MC_AGENT_BIN, MCCTL
# and MC_NO_IO_URING (meson sets them); without them it exits 77 (SKIP).
set -u
. "$(dirname "$0")/../lib/t_sh.sh"

if [ -z "${MC_AGENT_BIN:-}" ] || [ -z "${MCCTL:-}" ] || [ -z "${MC_NO_IO_URING:-}" ]; then
    echo "MC_AGENT_BIN, MCCTL or MC_NO_IO_URING not set: skipping" >&2
    exit 77
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/mc-nouring-XXXXXX") || exit 1
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

# start_agent TAG [WRAPPER...] -- [AGENT ARGS...]: start it, wait for its ready file
start_agent() {
    tag=$1
    shift
    wrap=
    while [ "$1" != "--" ]; do
        wrap="$wrap $1"
        shift
    done
    shift
    rm -f "$dir/ready" "$dir/a.sock"
    # shellcheck disable=SC2086  # the wrapper is words
    $wrap "$MC_AGENT_BIN" --standalone --socket "$dir/a.sock" --dram 64M \
        --ready-file "$dir/ready" "$@" >"$dir/$tag.log" 2>&1 &
    agent_pid=$!
    wait_ready "$dir/ready" "$agent_pid" "$dir/$tag.log" || exit 1
}


# a put and a get by a client under the filter, and the loop the agent reports
round_trip() {
    tag=$1
    printf 'payload of %s' "$tag" >"$dir/$tag.src"
    check "$tag: put by a client denied io_uring" \
        "$MC_NO_IO_URING" "$MCCTL" --socket "$dir/a.sock" put "k-$tag" "$dir/$tag.src"
    check "$tag: get by a client denied io_uring" \
        "$MC_NO_IO_URING" "$MCCTL" --socket "$dir/a.sock" get "k-$tag" "$dir/$tag.dst"
    check "$tag: the bytes read back" cmp -s "$dir/$tag.src" "$dir/$tag.dst"
    "$MCCTL" --socket "$dir/a.sock" stats >"$dir/$tag.stats" 2>&1
    check "$tag: mcctl stats says \"loop\":\"epoll\"" grep -q '"loop":"epoll"' "$dir/$tag.stats"
}

check "the filter denies io_uring_setup with EPERM" "$MC_NO_IO_URING" --check

# the default (loop=io_uring) where io_uring is denied: one warning, then epoll
start_agent denied "$MC_NO_IO_URING" --
round_trip denied
check "denied: the fallback is logged" \
    grep -q 'io_uring unavailable (Operation not permitted): the event loop uses epoll' \
    "$dir/denied.log"
check "denied: logged once" test "$(grep -c 'io_uring unavailable' "$dir/denied.log")" -eq 1
check "denied: futex waits through futex_waitv" grep -q 'futex waits yes' "$dir/denied.log"
stop_agent

# loop=epoll asked for: no fallback message
start_agent asked -- --set loop=epoll
round_trip asked
check "asked: no fallback message" sh -c "! grep -q 'io_uring unavailable' '$dir/asked.log'"
stop_agent

# a value that is not a backend is refused at start
check "loop=bogus is refused" sh -c \
    "! '$MC_AGENT_BIN' --standalone --socket '$dir/b.sock' --set loop=bogus 2>'$dir/bogus.log'"
check "loop=bogus names the key" grep -q 'loop' "$dir/bogus.log"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
fi
echo "all checks passed"
