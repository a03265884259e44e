# Helpers shared by the shell tests (bash). Source it from a test:
#     . "$(dirname "$0")/../lib/t_sh.sh"
# A test keeps its own count in `failures` (check adds to it) and exits non-zero if any.

failures=${failures:-0}

# check WHAT CMD...: run CMD; "ok: WHAT" or "FAIL: WHAT" (counted)
check() {
    local what=$1
    shift
    if "$@"; then
        echo "ok: $what"
    else
        echo "FAIL: $what" >&2
        failures=$((failures + 1))
    fi
}

# stop_pid PID: SIGTERM, up to 5 s for a clean exit, then SIGKILL; reaps a child
stop_pid() {
    local i=0
    [ -n "$1" ] || return 0
    kill -TERM "$1" 2>/dev/null
    while kill -0 "$1" 2>/dev/null && [ $i -lt 500 ]; do
        sleep 0.01
        i=$((i + 1))
    done
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    return 0
}

# wait_ready FILE PID LOG: poll for FILE up to 10 s (no fixed sleep); if PID exits first or
# the time runs out, print LOG and fail
wait_ready() {
    local i=0
    while [ ! -e "$1" ]; do
        if ! kill -0 "$2" 2>/dev/null || [ $i -ge 1000 ]; then
            echo "pid $2 did not become ready ($1):" >&2
            cat "$3" >&2
            return 1
        fi
        sleep 0.01
        i=$((i + 1))
    done
}

# procs_in DIR: pids of processes whose command line mentions DIR/
procs_in() {
    local p args
    for p in /proc/[0-9]*; do
        mapfile -d '' args 2>/dev/null <"$p/cmdline" || continue
        [[ "${args[*]}" == *"$1/"* ]] && echo "${p#/proc/}"
    done
    return 0
}

# nothing_running_in DIR: no process mentions DIR/ (says which do)
nothing_running_in() {
    local left
    left=$(procs_in "$1")
    [ -z "$left" ] || { echo "  still running: $left" >&2; return 1; }
}
