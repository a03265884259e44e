#!/usr/bin/env bash
# scripts/launch.sh start --masters 3: a local etcd and three mc-master electing a leader in
# it, agents following etcd. status names the leader (with its epoch) and the standbys; a
# put through one agent; kill -9 of the leader's pid: status names another leader, of a
# higher epoch, within 10 s, and the object reads back through the other agent; stop stops
# etcd too and leaves nothing running. Then the same start with --netns (each master in its
# own namespace), when namespaces can be made here.
#
# Needs MC_BUILD_DIR and LAUNCH (meson sets both); without them, or without etcd (Debian
# etcd-server), it exits 77 (SKIP).
# shellcheck disable=SC2317 # the helpers are called through check and the trap
set -u
. "$(dirname "$0")/../lib/t_sh.sh"

if [ -z "${MC_BUILD_DIR:-}" ] || [ -z "${LAUNCH:-}" ]; then
    echo "MC_BUILD_DIR or LAUNCH not set: skipping" >&2
    exit 77
fi
if ! command -v "${MC_ETCD_BIN:-etcd}" >/dev/null || ! command -v curl >/dev/null; then
    echo "no etcd (or no curl): skipping" >&2
    exit 77
fi
mcctl=$MC_BUILD_DIR/libmc/mcctl
dir=$(mktemp -d /tmp/mc-lha-XXXXXX) || exit 1
dir=$(cd "$dir" && pwd -P)
failures=0

cleanup() {
    local d
    for d in "$dir"/*/; do
        [ -f "$d/cluster" ] || continue
        "$LAUNCH" stop --dir "$d" --grace 5 >/dev/null 2>&1
    done
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

is() { [ "$1" = "$2" ] || { echo "  got '$1', expected '$2'" >&2; return 1; }; }
# field FILE EXPR: a jq-less read of the "ha" object's scalar fields
ha_field() { grep -o "\"ha\":{[^}]*}" "$1" | grep -o "\"$2\":[^,}]*" | cut -d: -f2- | tr -d '"'; }
standbys() { grep -o '"standbys":\[[^]]*\]' "$1" | grep -o '"master-[0-9]"' | tr -d '"' | sort | tr '\n' ' '; }
# the standbys mcctl cluster lists through agent-1 of RUN
cluster_standbys() {
    "$mcctl" --socket "$1/agent-1.sock" cluster | grep -o '"standbys":\[[^]]*\]' |
        grep -oE '"[0-9.]+:[0-9]+"' | wc -l
}

# exercise RUN: a started --masters 3 --agents 2 cluster
exercise() {
    local run=$1 lead epoch lead2 epoch2 t0 s
    "$LAUNCH" status --dir "$run" >"$run.status"
    check "status exits 0" test $? -eq 0
    check "status: etcd alive" is "$(ha_field "$run.status" etcd_alive)" true
    lead=$(ha_field "$run.status" leader)
    epoch=$(ha_field "$run.status" epoch)
    check "status: a master leads" test -n "$lead" -a "$lead" != null
    check "status: an epoch" test -n "$epoch" -a "$epoch" != null
    s=$(standbys "$run.status")
    check "status: the two others stand by" is "$(echo "$s" | wc -w)" 2
    check "status: the leader is not a standby" test "${s/$lead/}" = "$s"
    check "status: the agent follows that epoch" \
        grep -qF "\"epoch\":$epoch" <(grep -o '"cluster":.*' "$run.status")
    # mcctl cluster: the two masters that do not lead, as standbys (their member keys in
    # etcd; the agent reads them every second)
    t0=$SECONDS
    while [ "$(cluster_standbys "$run")" -ne 2 ] && [ $((SECONDS - t0)) -lt 5 ]; do sleep 0.2; done
    check "mcctl cluster lists two standbys" is "$(cluster_standbys "$run")" 2
    check "... not the leader" test -z "$("$mcctl" --socket "$run/agent-1.sock" cluster |
        grep -o '"standbys":\[[^]]*\]' | grep -F "\"$(cat "$run/$lead.addr")\"")"

    head -c 2000000 /dev/urandom >"$run.in"
    "$mcctl" --socket "$run/agent-1.sock" put lha-key "$run.in"
    check "put through agent-1" test $? -eq 0

    kill -9 "$(cat "$run/$lead.pid")"
    t0=$SECONDS
    lead2=
    while [ $((SECONDS - t0)) -lt 10 ]; do
        "$LAUNCH" status --dir "$run" >"$run.status2"
        lead2=$(ha_field "$run.status2" leader)
        if [ -n "$lead2" ] && [ "$lead2" != null ] && [ "$lead2" != "$lead" ]; then break; fi
        sleep 0.2
    done
    check "status names a new leader within 10 s of kill -9 of $lead" \
        test -n "$lead2" -a "$lead2" != null -a "$lead2" != "$lead"
    epoch2=$(ha_field "$run.status2" epoch)
    check "its epoch is higher" test "${epoch2:-0}" -gt "$epoch" 2>/dev/null
    check "one standby left" is "$(standbys "$run.status2" | wc -w)" 1
    check "the killed master is not alive" \
        grep -qF "\"node\":\"$lead\",\"pid\":$(cat "$run/$lead.pid"),\"alive\":false" "$run.status2"
    # the agents rejoin the new leader and report; a read may answer UNAVAILABLE meanwhile
    t0=$SECONDS
    while ! MC_OP_TIMEOUT_MS=2000 "$mcctl" --socket "$run/agent-2.sock" get lha-key "$run.out" \
        2>/dev/null && [ $((SECONDS - t0)) -lt 15 ]; do
        sleep 0.2
    done
    check "the object reads back through agent-2 after the failover" cmp -s "$run.in" "$run.out"

    "$LAUNCH" stop --dir "$run" 2>"$run.stop.err"
    check "stop exits 0" test $? -eq 0
    cat "$run.stop.err" >&2
    check "stop stops etcd" grep -qE '^launch: etcd \(pid [0-9]+\) exited' "$run.stop.err"
    check "etcd's data removed" test ! -e "$run/etcd.data"
    check "nothing left running" nothing_running_in "$run"
    "$LAUNCH" status --dir "$run" >"$run.status3"
    check "status after stop: nothing alive" is "$(grep -oF '"alive":true' "$run.status3" | wc -l)" 0
}

run=$dir/local
"$LAUNCH" start --masters 3 --agents 2 --dram 64M --dir "$run" --build-dir "$MC_BUILD_DIR"
check "local --masters 3 start exits 0" test $? -eq 0
exercise "$run"

"$LAUNCH" start --masters 3 --hosts /dev/null --dir "$dir/h" --build-dir "$MC_BUILD_DIR" 2>/dev/null
check "--masters with --hosts is refused (usage)" test $? -eq 2
"$LAUNCH" start --masters 0 --agents 1 --dir "$dir/z" --build-dir "$MC_BUILD_DIR" 2>/dev/null
check "--masters 0 is a usage error" test $? -eq 2

no_netns=
if [ "$(id -u)" -ne 0 ]; then
    no_netns="not root"
elif ! command -v ip >/dev/null; then
    no_netns="no ip command"
elif ! ip netns add "mc-lha-probe-$$" 2>/dev/null; then
    no_netns="ip netns add failed"
else
    ip netns del "mc-lha-probe-$$"
fi
if [ -z "$no_netns" ]; then
    run=$dir/netns
    "$LAUNCH" start --netns --masters 3 --agents 2 --dram 64M --dir "$run" \
        --build-dir "$MC_BUILD_DIR"
    check "netns --masters 3 start exits 0" test $? -eq 0
    "$LAUNCH" status --dir "$run" >"$run.status0"
    check "netns: each master in its own namespace" \
        is "$(grep -oE '"netns":"mcstore[0-9]+-master-[0-9]"' "$run.status0" | sort -u | wc -l)" 3
    exercise "$run"
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
    echo "SKIP: the netns part cannot run here ($no_netns); the local part passed" >&2
    exit 77
fi
exit 0
