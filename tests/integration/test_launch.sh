#!/usr/bin/env bash
# scripts/launch.sh start/status/stop against the real daemons: a local cluster (master + 3
# agents on loopback), a start that fails (it must leave nothing running), the --hosts
# layer through a stand-in for ssh that runs every command here, and a network-namespace
# cluster (master + 2 agents, each in its own namespace on a bridge). Each cluster: status
# JSON, a put through agent 1 read back byte-exact through the last agent, `mcctl cluster`,
# stop (each exit reported; the pids of the pid files gone when it returns), nothing left
# (processes, sockets, namespaces, bridge). A SIGSTOPped agent is SIGKILLed after
# --grace; a pid file naming another program leaves that program alone.
#
# Needs MC_BUILD_DIR and LAUNCH (meson sets both); without them it exits 77 (SKIP).
# Network namespaces need root and ip: where they cannot be made, the other parts still
# run, and the test then exits 77 (SKIP) saying why, rather than passing.
# shellcheck disable=SC2317 # the helpers are called through check
set -u
. "$(dirname "$0")/../lib/t_sh.sh"

if [ -z "${MC_BUILD_DIR:-}" ] || [ -z "${LAUNCH:-}" ]; then
    echo "MC_BUILD_DIR or LAUNCH not set: skipping" >&2
    exit 77
fi
mcctl=$MC_BUILD_DIR/libmc/mcctl

# a short path: sockets live in it
dir=$(mktemp -d /tmp/mc-launch-XXXXXX) || exit 1
dir=$(cd "$dir" && pwd -P) # as launch.sh names it
failures=0
fake_ssh=$dir/fake-ssh

cleanup() {
    local d
    for d in "$dir"/*/; do
        [ -f "$d/cluster" ] || continue
        MC_SSH=$fake_ssh "$LAUNCH" stop --dir "$d" >/dev/null 2>&1
    done
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM


# count PATTERN FILE: fixed-string occurrences
count() { grep -oF -- "$1" "$2" | wc -l; }
is() { [ "$1" -eq "$2" ] || { echo "  got $1, expected $2" >&2; return 1; }; }
valid_json() { ! command -v jq >/dev/null || jq -e . "$1" >/dev/null; }

# pids of processes whose command line mentions DIR/
no_sockets_in() { ! ls "$1"/*.sock >/dev/null 2>&1; }

# is PID a live process (kill -0 also reaches a zombie: that one has exited)
pid_lives() {
    local s
    kill -0 "$1" 2>/dev/null || return 1
    s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    s=${s##*) }
    [ "${s%% *}" != Z ]
}
# no pid of RUN's pid files is a live process
no_pid_alive_in() {
    local f pid left=
    for f in "$1"/*.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        if pid_lives "$pid"; then left+=" $pid"; fi
    done
    [ -z "$left" ] || { echo "  still alive:$left" >&2; return 1; }
}

# exercise RUN N: a started cluster of N agents in RUN: status, put/get, cluster, stop
exercise() {
    local run=$1 n=$2 rc
    "$LAUNCH" status --dir "$run" >"$run.status"
    check "status exits 0" test $? -eq 0
    check "status is JSON" valid_json "$run.status"
    check "status: master and $n agents alive" is "$(count '"alive":true' "$run.status")" $((n + 1))
    check "status: nothing dead" is "$(count '"alive":false' "$run.status")" 0
    check "status: the cluster as an agent sees it, $n nodes alive" \
        is "$(count '"state":"alive"' "$run.status")" "$n"
    check "status: every daemon says it is healthy (its GET /health)" \
        is "$(count '"health":{"ok":true,"code":200,"reason":"ok"}' "$run.status")" $((n + 1))
    check "status: agent sockets" grep -qF "\"socket\":\"$run/agent-$n.sock\"" "$run.status"

    head -c 3000000 /dev/urandom >"$run.in"
    "$mcctl" --socket "$run/agent-1.sock" put launch-key "$run.in"
    check "put through agent-1" test $? -eq 0
    "$mcctl" --socket "$run/agent-$n.sock" get launch-key "$run.out"
    check "get through agent-$n" test $? -eq 0
    check "byte-exact across agents" cmp -s "$run.in" "$run.out"
    "$mcctl" --socket "$run/agent-$n.sock" cluster >"$run.cluster"
    check "mcctl cluster: $n nodes alive" is "$(count '"state":"alive"' "$run.cluster")" "$n"
    check "mcctl cluster: no dead node" is "$(count '"state":"dead"' "$run.cluster")" 0

    "$LAUNCH" stop --dir "$run" 2>"$run.stop.err"
    check "stop exits 0" test $? -eq 0
    check "no pid of the run alive once stop returned" no_pid_alive_in "$run"
    cat "$run.stop.err" >&2
    check "stop reports each daemon's exit after SIGTERM" \
        is "$(grep -cE '^launch: (master|agent-[0-9]+) \(pid [0-9]+\) exited [0-9.]+ s after SIGTERM$' \
            "$run.stop.err")" $((n + 1))
    check "every daemon stopped on SIGTERM, cleanly" \
        test -z "$(grep -E 'SIGKILL|socket behind|not running|another program' "$run.stop.err")"
    "$LAUNCH" status --dir "$run" >"$run.status2"
    check "status after stop is JSON" valid_json "$run.status2"
    check "status after stop: nothing alive" is "$(count '"alive":true' "$run.status2")" 0
    check "status after stop: no daemon to ask for its health" \
        is "$(count '"health":null' "$run.status2")" $((n + 1))
    check "status after stop: no cluster" grep -qF '"cluster":null' "$run.status2"
    check "no daemon left after stop" nothing_running_in "$run"
    check "no socket left after stop" no_sockets_in "$run"
    "$LAUNCH" stop --dir "$run" >/dev/null
    rc=$?
    check "a second stop exits 0" test $rc -eq 0
}

# --- network namespaces: can this machine make them? (asked first, used last)
no_netns=
if [ "$(id -u)" -ne 0 ]; then
    no_netns="not root"
elif ! command -v ip >/dev/null; then
    no_netns="no ip command (iproute2)"
elif ! ip netns add "mc-launch-probe-$$" 2>"$dir/probe.err"; then
    no_netns="ip netns add failed: $(cat "$dir/probe.err")"
else
    if ! ip link add "mcprobe$$" type bridge 2>"$dir/probe.err"; then
        no_netns="cannot create a bridge: $(cat "$dir/probe.err")"
    fi
    ip link del "mcprobe$$" 2>/dev/null
    ip netns del "mc-launch-probe-$$"
fi

# --- local: master + 3 agents on loopback
run=$dir/local
"$LAUNCH" start --agents 3 --dram 64M --dir "$run" --build-dir "$MC_BUILD_DIR"
check "local start exits 0" test $? -eq 0
check "local: generated configs" test -s "$run/master.json" -a -s "$run/agent-3.json"
check "local: token is 0600" test "$(stat -c %a "$run/token")" = 600
check "local: logs and pid files" test -s "$run/agent-1.log" -a -s "$run/agent-1.pid"
"$LAUNCH" start --agents 1 --dram 64M --dir "$run" --build-dir "$MC_BUILD_DIR" 2>/dev/null
check "a second start in a running RUNDIR is refused" test $? -ne 0
check "... and leaves the running cluster alone" \
    is "$("$LAUNCH" status --dir "$run" | grep -oF '"alive":true' | wc -l)" 4
exercise "$run" 3

# --- stop of a daemon that does not exit on SIGTERM (SIGSTOPped): SIGKILL after --grace,
# reported; a pid file naming another program is left alone; start right after stop
run=$dir/stuck
"$LAUNCH" start --agents 2 --dram 64M --dir "$run" --build-dir "$MC_BUILD_DIR" >/dev/null
check "stuck: start exits 0" test $? -eq 0
stuck=$(cat "$run/agent-1.pid")
kill -STOP "$stuck"
t0=$SECONDS
"$LAUNCH" stop --dir "$run" --grace 1 2>"$run.stop.err"
rc=$?
cat "$run.stop.err" >&2
check "stuck: stop exits 0" test $rc -eq 0
check "stuck: stop did not wait for the default grace" test $((SECONDS - t0)) -lt 15
check "stuck: SIGKILL after the grace, reported" \
    grep -qxF "launch: agent-1 (pid $stuck) did not exit in 1 s: SIGKILL" "$run.stop.err"
check "stuck: its exit after SIGKILL, reported" \
    grep -qE "^launch: agent-1 \(pid $stuck\) exited [0-9.]+ s after SIGKILL$" "$run.stop.err"
check "stuck: the others exited on SIGTERM" \
    is "$(grep -cE 'exited [0-9.]+ s after SIGTERM$' "$run.stop.err")" 2
check "stuck: no pid of the run alive once stop returned" no_pid_alive_in "$run"
check "stuck: no daemon left" nothing_running_in "$run"
sleep 60 &
other=$!
echo "$other" >"$run/agent-2.pid"
"$LAUNCH" stop --dir "$run" --grace 1 2>"$run.stop2.err"
check "a pid file naming another program: stop exits 0" test $? -eq 0
check "... leaves that program alone" pid_lives "$other"
check "... and says so" grep -qF "agent-2: pid $other of agent-2.pid is another program" \
    "$run.stop2.err"
kill "$other" 2>/dev/null
wait "$other" 2>/dev/null
"$LAUNCH" start --agents 1 --dram 64M --dir "$run" --build-dir "$MC_BUILD_DIR" >/dev/null
check "start right after stop in the same RUNDIR" test $? -eq 0
"$LAUNCH" stop --dir "$run" 2>/dev/null
check "... and its stop" no_pid_alive_in "$run"

# --- a start that fails (an agent refuses its --dram) stops what it started
run=$dir/bad
"$LAUNCH" start --agents 2 --dram lots --dir "$run" --build-dir "$MC_BUILD_DIR" \
    >"$dir/bad.out" 2>&1
rc=$?
check "start with a bad --dram exits non-zero" test $rc -ne 0
check "the failure names the agent's complaint" grep -q "dram" "$dir/bad.out"
check "no daemon left after a failed start" nothing_running_in "$run"
check "no socket left after a failed start" no_sockets_in "$run"
"$LAUNCH" status --dir "$run" >"$run.status"
check "status after a failed start: nothing alive" is "$(count '"alive":true' "$run.status")" 0
"$LAUNCH" start --agents 0 --dir "$run" --build-dir "$MC_BUILD_DIR" 2>/dev/null
check "--agents 0 is a usage error" test $? -eq 2

# --- --hosts, through a stand-in for ssh (every "host" is this one)
run=$dir/hosts
printf '#!/bin/sh\n# ssh DEST COMMAND: run COMMAND here\nshift\nexec sh -c "$*"\n' >"$fake_ssh"
chmod +x "$fake_ssh"
printf '# the master first, then the agents\nroot@127.0.0.1\n127.0.0.1 127.0.0.1\n\n127.0.0.1\n' \
    >"$dir/hosts.txt"
export MC_SSH=$fake_ssh
"$LAUNCH" start --hosts "$dir/hosts.txt" --dram 64M --dir "$run" --build-dir "$MC_BUILD_DIR"
check "hosts start exits 0" test $? -eq 0
check "hosts: status says hosts" grep -qF '"mode":"hosts"' <("$LAUNCH" status --dir "$run")
exercise "$run" 2
unset MC_SSH

# --- network namespaces: master + 2 agents, each its own host on a bridge
if [ -z "$no_netns" ]; then
    run=$dir/netns
    "$LAUNCH" start --netns --agents 2 --dram 64M --dir "$run" --build-dir "$MC_BUILD_DIR"
    check "netns start exits 0" test $? -eq 0
    "$LAUNCH" status --dir "$run" >"$run.status0"
    check "netns: status says netns" grep -qF '"mode":"netns"' "$run.status0"
    check "netns: agents on bridge addresses" \
        is "$(grep -oE '"addr":"10\.77\.[0-9]+\.1[12]:[0-9]+"' "$run.status0" | wc -l)" 2
    namespaces=$(grep -oE '"netns":"[^"]+"' "$run.status0" | cut -d'"' -f4)
    check "netns: three namespaces" is "$(echo "$namespaces" | grep -c .)" 3
    bridge=$(sed -n 's/^bridge //p' "$run/cluster")
    for ns in $namespaces; do
        for f in "$run"/*.pid; do
            [ "$(ip netns identify "$(cat "$f")")" = "$ns" ] && continue 2
        done
        check "netns: a daemon runs in $ns" false
    done
    exercise "$run" 2
    listed=$(ip netns list)
    for ns in $namespaces; do
        check "netns: $ns removed" test "${listed/$ns/}" = "$listed"
    done
    check "netns: bridge $bridge removed" test -n "$bridge" -a ! -e "/sys/class/net/$bridge"
fi

if [ $failures -ne 0 ]; then
    echo "$failures check(s) failed; logs:" >&2
    for f in "$dir"/*/*.log; do
        [ -f "$f" ] || continue
        echo "== $f" >&2
        tail -n 20 "$f" >&2
    done
    exit 1
fi
if [ -n "$no_netns" ]; then
    echo "SKIP: the netns part cannot run here ($no_netns); the other parts passed" >&2
    exit 77
fi
exit 0
