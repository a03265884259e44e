#!/usr/bin/env bash
# Run mcstore. Commands:
#   demo   set up, build, start a standalone agent (256 MiB of DRAM) on a private socket,
#          run the demo workload (puts, gets, a hit/miss summary), print `mcctl stats`, stop
#          the agent.
#   start  --agents N [--masters M] [--dram SIZE] [--dir RUNDIR] [--netns | --hosts FILE]
#          [--build-dir DIR] [--set KEY=VALUE]... [--master-set KEY=VALUE]... [--timeout SEC]
#          start mc-master and N cluster-mode agents; returns once every daemon is ready
#          (with --masters: and the leader serves data operations), or stops what it started
#          and exits 1. --masters M (2..9): a local etcd (its data
#          under RUNDIR) and M masters that elect a leader in it; the agents follow etcd.
#   stop   [--dir RUNDIR] [--grace S]
#          SIGTERM the agents, then the masters, then etcd, SIGKILL what has not exited after
#          S seconds (default 20); returns once every daemon has exited; remove what start made
#   status [--dir RUNDIR]      one JSON object: the daemons, who leads (with --masters), and
#          `mcctl cluster` via an agent
# docs/operations.md ("A cluster with launch.sh") describes the three placements (local,
# --netns, --hosts), the files in RUNDIR and the exit statuses.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}

usage() {
    cat >&2 <<'EOF'
usage: scripts/launch.sh demo
       scripts/launch.sh start --agents N [--masters M] [--dram SIZE] [--dir RUNDIR]
                               [--netns | --hosts FILE] [--build-dir DIR] [--set KEY=VALUE]...
                               [--master-set KEY=VALUE]... [--timeout SEC]
       scripts/launch.sh stop [--dir RUNDIR] [--grace S]
       scripts/launch.sh status [--dir RUNDIR]
EOF
    exit 2
}

# ---------------------------------------------------------------------------------------
# Helpers shared by start, stop and status.

say() { echo "launch: $*"; }
warn() { echo "launch: $*" >&2; }

# shell-quote one word for a remote sh (paths and settings: no newlines)
q() { printf '%q' "$1"; }
qcmd() {
    local w out=
    for w in "$@"; do out+="$(q "$w") "; done
    printf '%s' "${out% }"
}

# a JSON string literal
json_str() {
    local s=$1
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\n'/\\n}
    s=${s//$'\r'/\\r}
    s=${s//$'\t'/\\t}
    printf '"%s"' "$s"
}
json_or_null() { if [ -n "$1" ]; then json_str "$1"; else printf 'null'; fi; }

# The state of a cluster lives in RUNDIR:
#   cluster     "mode M", "build DIR", "bridge BR" (netns), "etcd URL" and "cluster_id ID"
#               (--masters M > 1)
#   nodes       one line per daemon, masters first: NAME NETNS DEST ADDR ("-" = none). One
#               master is "master"; M > 1 are "master-1".."master-M", after "etcd" (etcd's
#               config is etcd.json, its data etcd.data)
#   token       the cluster token (0600); NAME.json, NAME.cmd, NAME.log, NAME.pid,
#   NAME.ready  (written by the daemon), NAME.addr (ADDR:PORT once ready)
mode='' build='' bridge='' etcd_url='' cluster_id=''
names=()
declare -A node_ns node_dest node_addr

is_master() { [[ $1 == master || $1 == master-* ]]; }
is_agent() { [[ $1 == agent-* ]]; }
# the names of one kind: masters, agents
names_of() {
    local name
    for name in "${names[@]}"; do
        if "is_$1" "$name"; then echo "$name"; fi
    done
}

load_state() {
    local k v name ns dest addr
    [ -f "$rundir/cluster" ] && [ -f "$rundir/nodes" ] || return 1
    mode='' build='' bridge='' etcd_url='' cluster_id=''
    names=()
    while read -r k v; do
        case $k in
        mode) mode=$v ;;
        build) build=$v ;;
        bridge) bridge=$v ;;
        etcd) etcd_url=$v ;;
        cluster_id) cluster_id=$v ;;
        esac
    done <"$rundir/cluster"
    while read -r name ns dest addr; do
        [ -n "$name" ] || continue
        names+=("$name")
        node_ns[$name]=$ns
        node_dest[$name]=$dest
        node_addr[$name]=$addr
    done <"$rundir/nodes"
    return 0
}

# ssh command for --hosts (MC_SSH overrides it, e.g. "ssh -p 2222 -i key")
read -ra ssh_cmd <<<"${MC_SSH:-ssh -o BatchMode=yes -o ConnectTimeout=10}"

# on_node NAME SCRIPT: run a POSIX sh script where NAME's files and processes are: here
# (local and netns modes: RUNDIR is shared, pids are this host's) or over ssh.
on_node() {
    local dest=${node_dest[$1]}
    if [ "$dest" = - ]; then
        sh -c "$2"
    else
        "${ssh_cmd[@]}" "$dest" "$2"
    fi
}

# push NAME FILE: copy a RUNDIR file to NAME's host (mode 0600; by rename, so a host that
# shares RUNDIR with this one reads a whole file)
push() {
    [ "${node_dest[$1]}" != - ] || return 0
    # shellcheck disable=SC2094 # a temporary file, renamed
    on_node "$1" "umask 077 && mkdir -p $(q "$rundir") && cat >$(q "$2.tmp") && mv $(q "$2.tmp") $(q "$2")" <"$2"
}

# sh snippets: is PID a running (not zombie) process; is it NAME's daemon (its command line
# has our config file, so a reused pid is never taken for it)
# shellcheck disable=SC2016 # expanded by that sh
sh_running() { printf 's=$(cat /proc/%s/stat 2>/dev/null) && s=${s##*) } && [ "${s%%%% *}" != Z ]' "$1"; }
sh_is_daemon() {
    printf '%s && tr "\\000" "\\n" </proc/%s/cmdline 2>/dev/null | grep -qxF -- %s' \
        "$(sh_running "$2")" "$2" "$(q "$rundir/$1.json")"
}
node_pid() {
    local pid
    pid=$(cat "$rundir/$1.pid" 2>/dev/null) || true
    if [[ $pid =~ ^[0-9]+$ ]]; then echo "$pid"; fi
}
node_alive() {
    local pid
    pid=$(node_pid "$1")
    [ -n "$pid" ] && on_node "$1" "$(sh_is_daemon "$1" "$pid")"
}

# ---------------------------------------------------------------------------------------
# stop: agents first (SIGTERM: they finish their ops and leave the cluster), then the
# masters, then etcd; each waits up to the grace period (--grace, default 20 s), then SIGKILL, and
# stop returns only once every daemon it signalled has exited. Each step is reported on
# stderr. Then what start created: sockets and ready files left behind, network
# namespaces, the bridge. Nothing running: exit 0.
#
# A daemon is identified once, before its SIGTERM: its pid file names a running process
# whose command line has its config file (sh_is_daemon). From then on it is followed by
# its start time (/proc/PID/stat), not its command line: an exiting process loses its
# command line before it closes its sockets, and a pid reused meanwhile has another start
# time, so neither is taken for the daemon, nor signalled.

# sh snippets (expanded by that sh): print PID's start time (clock ticks since boot) if it
# runs (not a zombie); is PID still the process that started at START
# shellcheck disable=SC2016
sh_start_of() {
    printf '%s && set -- $s && shift 19 && echo "$1"' "$(sh_running "$1")"
}
# shellcheck disable=SC2016
sh_same() { printf '[ "$(%s)" = %s ]' "$(sh_start_of "$1")" "$2"; }

now_ms() {
    local t=${EPOCHREALTIME:-}
    t=${t//[!0-9]/}
    if [ -n "$t" ]; then echo $((10#$t / 1000)); else echo $((SECONDS * 1000)); fi
}
# secs_since MS: seconds since then, one decimal
secs_since() {
    local d=$(($(now_ms) - $1))
    printf '%d.%d' $((d / 1000)) $((d % 1000 / 100))
}

declare -A stop_pid stop_start
stop_quiet=
running=()

# wait_exit MS WHAT SINCE NAME...: until every NAME's process has exited, at most MS
# milliseconds; each exit is reported with the seconds since SINCE (now_ms) and WHAT
# ("after SIGTERM"). Leaves those still there in `running`; a host that cannot be asked
# (ssh fails: exit status other than 0 or 1) counts as still there.
wait_exit() {
    local ms=$1 what=$2 since=$3 name deadline poll=0.05 rc
    shift 3
    deadline=$(($(now_ms) + ms))
    [ "$mode" != hosts ] || poll=0.5
    running=("$@")
    while [ ${#running[@]} -gt 0 ]; do
        local still=()
        for name in "${running[@]}"; do
            rc=0
            on_node "$name" "$(sh_same "${stop_pid[$name]}" "${stop_start[$name]}")" || rc=$?
            if [ $rc -eq 1 ]; then
                warn "$name (pid ${stop_pid[$name]}) exited $(secs_since "$since") s $what"
            else
                still+=("$name")
            fi
        done
        running=("${still[@]+"${still[@]}"}")
        if [ ${#running[@]} -eq 0 ] || [ "$(now_ms)" -ge "$deadline" ]; then break; fi
        sleep $poll
    done
}

# stop_daemons NAME...: SIGTERM to each NAME whose daemon runs, SIGKILL to those still
# there after the grace period; returns 1 if one is still there 10 s after its SIGKILL
stop_daemons() {
    local name pid st t0 sent=() killed=()
    for name in "$@"; do
        pid=$(node_pid "$name")
        [ -n "$pid" ] || continue # never started
        # identify and signal in one go (one ssh round trip in --hosts mode)
        st=$(on_node "$name" "$(sh_is_daemon "$name" "$pid") &&
            st=\$($(sh_start_of "$pid")) && kill -TERM $pid && echo \$st" 2>/dev/null) || st=
        if [ -n "$st" ]; then
            stop_pid[$name]=$pid
            stop_start[$name]=$st
            sent+=("$name")
        elif on_node "$name" "$(sh_running "$pid")" 2>/dev/null; then
            warn "$name: pid $pid of $name.pid is another program now: left alone"
        elif [ -z "$stop_quiet" ]; then
            warn "$name (pid $pid) was not running"
        fi
    done
    [ ${#sent[@]} -gt 0 ] || return 0
    t0=$(now_ms)
    local list=
    for name in "${sent[@]}"; do list+=", $name (pid ${stop_pid[$name]})"; done
    warn "SIGTERM to ${list#, }"
    wait_exit $((grace * 1000)) "after SIGTERM" "$t0" "${sent[@]}"
    [ ${#running[@]} -gt 0 ] || return 0
    t0=$(now_ms)
    for name in "${running[@]}"; do
        warn "$name (pid ${stop_pid[$name]}) did not exit in $grace s: SIGKILL"
        on_node "$name" "$(sh_same "${stop_pid[$name]}" "${stop_start[$name]}") &&
            kill -KILL ${stop_pid[$name]}" || true
        killed+=("$name")
    done
    wait_exit 10000 "after SIGKILL" "$t0" "${killed[@]}"
    for name in "${running[@]+"${running[@]}"}"; do
        warn "$name (pid ${stop_pid[$name]}) still there 10 s after SIGKILL (stuck in the kernel?)"
    done
    [ ${#running[@]} -eq 0 ]
}

do_stop() {
    local quiet=${1:-} name agent_names=() master_names=() ns rc=0
    stop_quiet=$quiet
    if ! load_state; then
        [ -n "$quiet" ] || say "nothing to stop in $rundir"
        return 0
    fi
    mapfile -t agent_names < <(names_of agent)
    mapfile -t master_names < <(names_of master)
    stop_daemons "${agent_names[@]+"${agent_names[@]}"}" || rc=1
    stop_daemons "${master_names[@]+"${master_names[@]}"}" || rc=1
    if [ -n "$etcd_url" ]; then
        if stop_daemons etcd; then
            rm -rf "$rundir/etcd.data"
        else
            rc=1
        fi
    fi
    for name in "${names[@]}"; do
        if is_agent "$name" &&
            on_node "$name" "test -S $(q "$rundir/$name.sock")" 2>/dev/null; then
            warn "$name left its socket behind (it did not stop cleanly; see $name.log): removing it"
        fi
        on_node "$name" "rm -f $(q "$rundir/$name.sock") $(q "$rundir/$name.ready")" || true
    done
    if [ "$mode" = netns ]; then
        [ "$(id -u)" -eq 0 ] || warn "not root: cannot remove the namespaces and $bridge"
        # the veth first (deleting one end deletes both, at once; a namespace's devices
        # go away asynchronously after `ip netns del`, and the next start may reuse the name)
        for name in "${names[@]}"; do
            ns=${node_ns[$name]}
            [ "$ns" != - ] || continue
            ip link del "$(veth_name "${bridge#mcbr}" "$name")" 2>/dev/null || true
            ip netns del "$ns" 2>/dev/null || true
        done
        [ -z "$bridge" ] || ip link del "$bridge" 2>/dev/null || true
    fi
    if [ $rc -ne 0 ]; then
        warn "not every daemon of $rundir could be stopped"
        return 1
    fi
    [ -n "$quiet" ] || say "stopped the cluster in $rundir"
}

# ---------------------------------------------------------------------------------------
# status: one JSON object on stdout.

# node_health NAME: what NAME's daemon says of its own health, as JSON, or null when it
# cannot be asked. `alive` is the pid's word (the process runs); this is the daemon's: its
# GET /health (the daemons serve it on metrics_listen, which start sets; the port is in the
# log line "metrics on HOST:PORT"), asked on NAME's host (in its namespace), bounded by 2 s.
# {"ok":true,"code":200,"reason":"ok"}, or ok false with the daemon's one-line reason.
# shellcheck disable=SC2016 # expanded by the node's bash
node_health() {
    local probe ns=${node_ns[$1]} out code reason
    # one line: the node's sh reads it (q's quoting of a newline is bash's own)
    probe='hp=$(grep -o "metrics on [^ ]*" '"$(q "$rundir/$1.log")"' 2>/dev/null | tail -1);'
    probe+=' hp=${hp#metrics on }; [ -n "$hp" ] || exit 1;'
    probe+=' h=${hp%:*}; p=${hp##*:}; h=${h#[}; h=${h%]};'
    probe+=' exec 3<>"/dev/tcp/$h/$p" || exit 1;'
    probe+=' printf "GET /health HTTP/1.0\r\nHost: %s\r\n\r\n" "$h" >&3; cat <&3'
    probe="timeout 2 bash -c $(q "$probe")"
    [ "$ns" = - ] || probe="ip netns exec $(q "$ns") $probe"
    out=$(on_node "$1" "$probe" 2>/dev/null | tr -d '\r') || out=
    code=$(printf '%s\n' "$out" | sed -n '1s/^HTTP\/[0-9.]* \([0-9]*\).*/\1/p')
    if [ -z "$code" ]; then
        printf 'null'
        return 0
    fi
    reason=$(printf '%s\n' "$out" | sed '/^$/,$!d' | sed '/^$/d' | head -1)
    printf '{"ok":%s,"code":%s,"reason":%s}' "$([ "$code" = 200 ] && echo true || echo false)" \
        "$code" "$(json_str "$reason")"
}

# etcd_leader: sets lead (the master whose address the leader key holds, empty when none
# or etcd cannot be asked in 2 s) and epoch (the key's create revision), through etcd's v3
# JSON gateway
etcd_leader() {
    local key resp val
    lead='' epoch=''
    key=$(printf '/mcstore/%s/leader' "$cluster_id" | base64 -w0)
    resp=$(curl -sf -m 2 -X POST "${etcd_url%%,*}/v3/kv/range" -d "{\"key\":\"$key\"}" \
        2>/dev/null) || return 0
    val=$(printf '%s' "$resp" | grep -o '"value":"[A-Za-z0-9+/=]*"' | head -1 | cut -d'"' -f4)
    [ -n "$val" ] || return 0
    val=$(printf '%s' "$val" | base64 -d 2>/dev/null) || return 0
    epoch=$(printf '%s' "$resp" | grep -o '"create_revision":"[0-9]*"' | head -1 | cut -d'"' -f4)
    for name in $(names_of master); do
        if [ -f "$rundir/$name.addr" ] && [ "$(cat "$rundir/$name.addr")" = "$val" ]; then
            lead=$name
        fi
    done
}

do_status() {
    local name pid alive addr k first=1 sock cluster='' out
    if ! load_state; then
        printf '{"mode":null,"dir":%s,"master":null,"agents":[],"cluster":null}\n' \
            "$(json_str "$rundir")"
        return 0
    fi
    node_json() { # NAME: the fields every daemon has
        pid=$(node_pid "$1")
        alive=false
        node_alive "$1" && alive=true
        addr=
        [ -f "$rundir/$1.addr" ] && addr=$(cat "$rundir/$1.addr")
        local ns=${node_ns[$1]} dest=${node_dest[$1]}
        [ "$ns" != - ] || ns=
        [ "$dest" != - ] || dest=
        printf '"node":%s,"pid":%s,"alive":%s,"health":%s,"addr":%s,"netns":%s,"host":%s,' \
            "$(json_str "$1")" "${pid:-null}" "$alive" "$(node_health "$1")" \
            "$(json_or_null "$addr")" "$(json_or_null "$ns")" "$(json_or_null "$dest")"
        printf '"config":%s,"log":%s' "$(json_str "$rundir/$1.json")" "$(json_str "$rundir/$1.log")"
    }
    out=$(printf '{"mode":%s,"dir":%s,"build":%s,"master":' "$(json_str "$mode")" \
        "$(json_str "$rundir")" "$(json_str "$build")")
    if [ -z "$etcd_url" ]; then
        out+="{$(node_json master)}"
    else
        # who leads per etcd; "master" is the leader's entry (null when none leads)
        local lead epoch masters_json='' standbys='' etcd_alive=false leader_json=null
        etcd_leader
        for name in $(names_of master); do
            [ -z "$masters_json" ] || masters_json+=','
            masters_json+="{$(node_json "$name")}"
            if [ "$name" = "$lead" ]; then
                leader_json="{$(node_json "$name")}"
            elif node_alive "$name"; then
                standbys+="${standbys:+,}$(json_str "$name")"
            fi
        done
        node_alive etcd && etcd_alive=true
        out+="$leader_json,\"masters\":[$masters_json]"
        out+=$(printf ',"ha":{"etcd":%s,"etcd_pid":%s,"etcd_alive":%s,"cluster_id":%s,' \
            "$(json_str "$etcd_url")" "$(node_pid etcd | grep . || echo null)" "$etcd_alive" \
            "$(json_str "$cluster_id")")
        out+=$(printf '"leader":%s,"epoch":%s,"standbys":[%s]}' "$(json_or_null "$lead")" \
            "${epoch:-null}" "$standbys")
    fi
    out+=',"agents":['
    for name in $(names_of agent); do
        k=${name#agent-}
        sock=$rundir/$name.sock
        [ $first -eq 1 ] || out+=','
        first=0
        out+=$(printf '{"k":%s,"socket":%s,' "$k" "$(json_str "$sock")")
        out+=$(node_json "$name")
        out+='}'
        # the cluster as the first live agent sees it (bounded: the master may be gone)
        if [ -z "$cluster" ] && node_alive "$name"; then
            cluster=$(on_node "$name" "MC_OP_TIMEOUT_MS=2000 timeout 5 $(q "$build/libmc/mcctl") --socket $(q "$sock") cluster" 2>/dev/null) || cluster=
            case $cluster in "{"*) ;; *) cluster= ;; esac
        fi
    done
    out+="],\"cluster\":${cluster:-null}}"
    printf '%s\n' "$out"
}

# ---------------------------------------------------------------------------------------
# start

# spawn NAME CMD...: start NAME's daemon in its own session, detached (logs to NAME.log);
# echo its pid. In netns mode it runs inside NAME's namespace with UCX restricted to TCP
# over the namespace's eth0.
spawn() {
    local name=$1 ns=${node_ns[$1]} log=$rundir/$1.log
    shift
    # a ready file of an earlier run must not pass for this one's
    on_node "$name" "rm -f $(q "$rundir/$name.ready")"
    if [ "${node_dest[$name]}" = - ]; then
        (
            cd /
            MC_CLUSTER_TOKEN=$(cat "$rundir/token")
            export MC_CLUSTER_TOKEN
            if [ "$ns" != - ]; then
                export UCX_TLS=$netns_ucx_tls UCX_NET_DEVICES=eth0
                exec setsid ip netns exec "$ns" "$@"
            fi
            exec setsid "$@"
        ) >"$log" 2>&1 </dev/null &
        echo $!
    else
        on_node "$name" "mkdir -p $(q "$rundir") && cd / && MC_CLUSTER_TOKEN=\$(cat $(q "$rundir/token")) && export MC_CLUSTER_TOKEN && { setsid $(qcmd "$@") >$(q "$log") 2>&1 </dev/null & echo \$!; }"
    fi
}

# the command line an operator would use to restart NAME by hand
write_cmd() {
    local name=$1 env
    # shellcheck disable=SC2016 # the $(cat ...) is for the operator's shell
    env='MC_CLUSTER_TOKEN=$(cat '"$(q "$rundir/token")"')'
    shift
    if [ "${node_ns[$name]}" != - ]; then
        env+=" UCX_TLS=$netns_ucx_tls UCX_NET_DEVICES=eth0 ip netns exec ${node_ns[$name]}"
    fi
    printf '%s %s\n' "$env" "$(qcmd "$@")" >"$rundir/$name.cmd"
}

# write_json FILE KEY VALUE...: a flat object of string values
write_json() {
    local f=$1 sep=
    shift
    {
        printf '{\n'
        while [ $# -gt 0 ]; do
            printf '%s  %s: %s' "$sep" "$(json_str "$1")" "$(json_str "$2")"
            sep=$',\n'
            shift 2
        done
        printf '\n}\n'
    } >"$f"
}

# wait_ready NAME...: until each ready file is there ("PID PORT"); a daemon that exits
# first, or the deadline, fails the start with the end of its log
wait_ready() {
    local name pid ready left=("$@") poll=0.05
    [ "$mode" != hosts ] || poll=0.5
    while [ ${#left[@]} -gt 0 ]; do
        local still=()
        for name in "${left[@]}"; do
            ready=$(on_node "$name" "cat $(q "$rundir/$name.ready") 2>/dev/null" || true)
            if [[ $ready =~ ^[0-9]+\ [0-9]+$ ]]; then
                pid=${ready%% *}
                echo "$pid" >"$rundir/$name.pid"
                echo "${node_addr[$name]}:${ready##* }" >"$rundir/$name.addr"
                continue
            fi
            pid=$(node_pid "$name")
            if ! on_node "$name" "$(sh_running "$pid")"; then
                fail "$name exited before it was ready; the end of $rundir/$name.log:" \
                    "$(on_node "$name" "tail -n 20 $(q "$rundir/$name.log")" 2>/dev/null || true)"
            fi
            still+=("$name")
        done
        left=("${still[@]+"${still[@]}"}")
        [ ${#left[@]} -gt 0 ] || break
        if [ $SECONDS -ge $start_deadline ]; then
            fail "not ready after ${timeout}s: ${left[*]} (logs in $rundir)"
        fi
        sleep $poll
    done
}

start_ok=
fail() {
    local line
    for line in "$@"; do warn "$line"; done
    exit 1 # the EXIT trap stops what was started
}
on_start_exit() {
    [ -z "$start_ok" ] || return 0
    trap - INT TERM
    warn "start failed: stopping what was started"
    do_stop quiet || true
}

# UCX between namespaces: TCP only. Its shared-memory transports (posix, sysv, cma) see
# one host and would be chosen between daemons of different namespaces.
netns_ucx_tls=${MC_NETNS_UCX_TLS:-tcp}

# veth_name I NAME: the bridge-side end of NAME's link (at most 15 characters)
veth_name() {
    case $2 in
    master) echo "mc${1}m" ;;
    master-*) echo "mc${1}m${2#master-}" ;;
    *) echo "mc${1}a${2#agent-}" ;;
    esac
}

# master_names: master, or master-1..master-M with --masters M > 1
master_names() {
    if [ "$masters" -eq 1 ]; then echo master; else seq -f 'master-%g' 1 "$masters"; fi
}

# netns_setup: a bridge mcbrI (10.77.I.1/24) in this namespace and one namespace per
# daemon on it: mcstoreI-master at 10.77.I.2 (mcstoreI-master-K at 10.77.I.(1+K)),
# mcstoreI-agent-K at 10.77.I.(10+K). I is the first index whose bridge, namespaces and
# subnet are all free. etcd (--masters) runs in this namespace on 10.77.I.1.
netns_setup() {
    local i name ns addr k=0 host_side addrs nslist
    [ "$(id -u)" -eq 0 ] || fail "--netns needs root (network namespaces, veth, a bridge)"
    command -v ip >/dev/null || fail "--netns needs ip (iproute2)"
    [ "$agents" -le 240 ] || fail "--netns: at most 240 agents"
    addrs=$(ip -4 addr show)
    nslist=$(ip netns list)
    for i in $(seq 0 63); do
        ip link show "mcbr$i" >/dev/null 2>&1 && continue
        [[ $addrs != *"inet 10.77.$i."* ]] || continue
        [[ $'\n'$nslist != *$'\n'"mcstore$i-"* ]] || continue
        ip link add "mcbr$i" type bridge 2>/dev/null || continue
        bridge=mcbr$i
        break
    done
    [ -n "$bridge" ] || fail "--netns: no free bridge index (mcbr0..mcbr63 all taken)"
    echo "bridge $bridge" >>"$rundir/cluster"
    ip addr add "10.77.$i.1/24" dev "$bridge"
    ip link set "$bridge" up
    : >"$rundir/nodes"
    [ "$masters" -eq 1 ] || echo "etcd - - 10.77.$i.1" >>"$rundir/nodes"
    for name in $(master_names) $(seq -f 'agent-%g' 1 "$agents"); do
        ns=mcstore$i-$name
        host_side=$(veth_name "$i" "$name")
        if [ "$name" = master ]; then
            addr=10.77.$i.2
        elif [[ $name == master-* ]]; then
            addr=10.77.$i.$((1 + ${name#master-}))
        else
            k=${name#agent-}
            addr=10.77.$i.$((10 + k))
        fi
        # recorded first, so a failure below still removes it
        echo "$name $ns - $addr" >>"$rundir/nodes"
        ip netns add "$ns"
        ip link add "$host_side" type veth peer name eth0 netns "$ns"
        ip link set "$host_side" master "$bridge" up
        ip -n "$ns" addr add "$addr/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
    done
}

# hosts_setup FILE: the first entry runs the master, the next N the agents. An entry is
# "SSH_DESTINATION [ADDRESS]" (ADDRESS: where the others reach it; default the
# destination without user@).
hosts_setup() {
    local dest addr rest entries=() i=0 name
    while read -r dest addr rest; do
        case $dest in '' | '#'*) continue ;; esac
        [ -n "$addr" ] || addr=${dest#*@}
        entries+=("$dest $addr")
    done <"$hosts_file"
    [ ${#entries[@]} -ge 2 ] || fail "$hosts_file: needs a master and at least one agent entry"
    [ -n "$agents" ] || agents=$((${#entries[@]} - 1))
    [ "$agents" -le $((${#entries[@]} - 1)) ] ||
        fail "$hosts_file: --agents $agents but only $((${#entries[@]} - 1)) agent entries"
    : >"$rundir/nodes"
    for name in master $(seq -f 'agent-%g' 1 "$agents"); do
        read -r dest addr <<<"${entries[$i]}"
        echo "$name - $dest $addr" >>"$rundir/nodes"
        i=$((i + 1))
    done
}

# free_port ADDR: a TCP port nothing listens on at ADDR (for etcd, which takes no port 0)
free_port() {
    local p i
    for i in $(seq 1 100); do
        p=$((20000 + (RANDOM * 32768 + RANDOM) % 30000))
        if ! (exec 3<>"/dev/tcp/$1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    fail "no free port on $1 for etcd"
}

# etcd_start: one etcd member (MC_ETCD_BIN, default etcd) in this namespace, its config
# in etcd.json (JSON is YAML: etcd's --config-file reads it), its data in etcd.data;
# returns once it serves, with etcd_url set and recorded in RUNDIR/cluster
etcd_start() {
    local addr=${node_addr[etcd]} cport pport resp
    cport=$(free_port "$addr")
    pport=$(free_port "$addr")
    [ "$cport" != "$pport" ] || pport=$(free_port "$addr")
    etcd_url=http://$addr:$cport
    write_json "$rundir/etcd.json" name etcd data-dir "$rundir/etcd.data" \
        listen-client-urls "$etcd_url" advertise-client-urls "$etcd_url" \
        listen-peer-urls "http://$addr:$pport" initial-advertise-peer-urls "http://$addr:$pport" \
        initial-cluster "etcd=http://$addr:$pport" initial-cluster-state new \
        logger zap log-level warn
    # not a string: after write_json's last line (its JSON gateway, off by default in a
    # config file, is what the daemons and status talk to)
    sed -i '$d' "$rundir/etcd.json"
    sed -i '$s/$/,/' "$rundir/etcd.json"
    printf '  "enable-grpc-gateway": true\n}\n' >>"$rundir/etcd.json"
    write_cmd etcd "${MC_ETCD_BIN:-etcd}" --config-file "$rundir/etcd.json"
    echo "etcd $etcd_url" >>"$rundir/cluster"
    spawn etcd "${MC_ETCD_BIN:-etcd}" --config-file "$rundir/etcd.json" >"$rundir/etcd.pid"
    while :; do
        resp=$(curl -sf -m 1 "$etcd_url/health" 2>/dev/null) || resp=
        [[ $resp != *'"health":"true"'* ]] || break
        node_alive etcd || fail "etcd exited before it served; the end of $rundir/etcd.log:" \
            "$(tail -n 20 "$rundir/etcd.log" 2>/dev/null)"
        [ $SECONDS -lt $start_deadline ] || fail "etcd does not serve after ${timeout}s (see $rundir/etcd.log)"
        sleep 0.1
    done
}

do_start() {
    local name pid sock master_addr extra cfg mk new_build f master_list=() agent_list=()
    [ -n "$agents" ] || [ -n "$hosts_file" ] || { warn "start: --agents N is required"; usage; }
    if ! [[ $masters =~ ^[1-9]$ ]]; then
        warn "--masters: 1..9"
        usage
    fi
    if [ "$masters" -gt 1 ] && [ -n "$hosts_file" ]; then
        warn "--masters with --hosts: not supported (start etcd and the masters by hand, docs/operations.md)"
        usage
    fi
    if [ "$masters" -gt 1 ] && ! command -v "${MC_ETCD_BIN:-etcd}" >/dev/null; then
        warn "--masters $masters needs etcd (Debian etcd-server; MC_ETCD_BIN names another)"
        exit 2
    fi
    if [ -n "$agents" ] && { ! [[ $agents =~ ^[0-9]+$ ]] || [ "$agents" -lt 1 ]; }; then
        warn "--agents: a number >= 1"
        usage
    fi
    [[ $timeout =~ ^[0-9]+$ ]] || { warn "--timeout: seconds"; usage; }
    if [ -n "$netns" ] && [ -n "$hosts_file" ]; then
        warn "--netns and --hosts exclude each other"
        usage
    fi
    [ -z "$hosts_file" ] || [ -r "$hosts_file" ] || { warn "$hosts_file: cannot read"; exit 2; }

    if [ -n "$build_dir" ]; then
        new_build=$(cd "$build_dir" && pwd) || exit 2
    else
        cd "$top"
        scripts/setup.sh build >/dev/null
        ninja -C build >/dev/null
        new_build=$top/build
    fi
    for f in daemon/mcmaster/mc-master daemon/agent/mc-agent libmc/mcctl; do
        [ -x "$new_build/$f" ] || { warn "$new_build/$f: not built"; exit 2; }
    done

    # RUNDIR: ours alone (0700); a cluster still running there is refused, leftovers of a
    # stopped one are cleared
    mkdir -p "$rundir"
    rundir=$(cd "$rundir" && pwd -P)
    if [ ${#rundir} -gt 90 ]; then
        warn "--dir $rundir: too long for unix socket paths (at most 90 characters)"
        exit 2
    fi
    [ -O "$rundir" ] || { warn "$rundir: not owned by us"; exit 2; }
    chmod 700 "$rundir"
    if load_state; then
        for name in "${names[@]}"; do
            if node_alive "$name"; then
                warn "a cluster is running in $rundir ($name, pid $(node_pid "$name")): launch.sh stop --dir $rundir"
                exit 1
            fi
        done
        do_stop quiet
        for name in "${names[@]}"; do
            rm -f "$rundir/$name".{json,cmd,log,pid,ready,addr,sock}
        done
        rm -rf "$rundir/etcd.data"
        rm -f "$rundir/cluster" "$rundir/nodes" "$rundir/token"
    fi

    trap on_start_exit EXIT
    trap 'exit 1' INT TERM
    start_deadline=$((SECONDS + timeout))
    (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$rundir/token")
    if [ -n "$netns" ]; then
        mode=netns
    elif [ -n "$hosts_file" ]; then
        mode=hosts
    else
        mode=local
    fi
    build=$new_build
    printf 'mode %s\nbuild %s\n' "$mode" "$build" >"$rundir/cluster"
    case $mode in
    local)
        : >"$rundir/nodes"
        for name in $([ "$masters" -eq 1 ] || echo etcd) $(master_names) \
            $(seq -f 'agent-%g' 1 "$agents"); do
            echo "$name - - 127.0.0.1" >>"$rundir/nodes"
        done
        ;;
    netns) netns_setup ;;
    hosts) hosts_setup ;;
    esac
    if [ "$masters" -gt 1 ]; then
        cluster_id=launch
        echo "cluster_id $cluster_id" >>"$rundir/cluster"
    fi
    load_state
    mapfile -t master_list < <(names_of master)
    mapfile -t agent_list < <(names_of agent)
    [ "$masters" -eq 1 ] || etcd_start

    # the masters
    for name in "${master_list[@]}"; do
        cfg=$rundir/$name.json
        if [ -n "$etcd_url" ]; then
            write_json "$cfg" listen "${node_addr[$name]}:0" \
                metrics_listen "${node_addr[$name]}:0" etcd "$etcd_url" cluster_id "$cluster_id"
        else
            write_json "$cfg" listen "${node_addr[$name]}:0" metrics_listen "${node_addr[$name]}:0"
        fi
        push "$name" "$rundir/token"
        push "$name" "$cfg"
        mk=("$build/daemon/mcmaster/mc-master" --config "$cfg" --ready-file "$rundir/$name.ready")
        for extra in "${master_sets[@]+"${master_sets[@]}"}"; do mk+=(--set "$extra"); done
        write_cmd "$name" "${mk[@]}"
        pid=$(spawn "$name" "${mk[@]}")
        echo "$pid" >"$rundir/$name.pid"
    done
    wait_ready "${master_list[@]}"
    if [ -n "$etcd_url" ]; then
        # one of them leads before the agents start (they would wait for it anyway)
        local lead epoch
        while etcd_leader && [ -z "$lead" ]; do
            [ $SECONDS -lt $start_deadline ] || fail "no master leads after ${timeout}s (logs in $rundir)"
            sleep 0.1
        done
        master_addr="etcd $etcd_url, cluster $cluster_id"
    else
        master_addr=$(cat "$rundir/master.addr")
    fi

    # the agents, all at once
    for name in "${agent_list[@]}"; do
        cfg=$rundir/$name.json
        sock=$rundir/$name.sock
        if [ -n "$etcd_url" ]; then
            write_json "$cfg" etcd "$etcd_url" cluster_id "$cluster_id" \
                listen "${node_addr[$name]}:0" node_name "$name" socket "$sock" dram "$dram" \
                metrics_listen "${node_addr[$name]}:0"
        else
            write_json "$cfg" master_addr "$master_addr" listen "${node_addr[$name]}:0" \
                node_name "$name" socket "$sock" dram "$dram" metrics_listen "${node_addr[$name]}:0"
        fi
        push "$name" "$rundir/token"
        push "$name" "$cfg"
        mk=("$build/daemon/agent/mc-agent" --config "$cfg" --ready-file "$rundir/$name.ready")
        for extra in "${agent_sets[@]+"${agent_sets[@]}"}"; do mk+=(--set "$extra"); done
        write_cmd "$name" "${mk[@]}"
        pid=$(spawn "$name" "${mk[@]}")
        echo "$pid" >"$rundir/$name.pid"
    done
    wait_ready "${agent_list[@]}"
    if [ -n "$etcd_url" ]; then
        # a new leader serves no data operation in its recovery window (recovery_ms, 1 s by
        # default: docs/master.md), and a first reign does not know which agents to wait for,
        # so it waits it out: start returns once an agent's data operations are served
        local probe=${agent_list[0]} out
        while :; do
            out=$(on_node "$probe" "MC_OP_TIMEOUT_MS=2000 timeout 5 $(q "$build/libmc/mcctl") \
                --socket $(q "$rundir/$probe.sock") exist launch-probe 2>&1" || true)
            [[ $out == *unavailable* ]] || break
            [ $SECONDS -lt $start_deadline ] ||
                fail "no data operation served after ${timeout}s (logs in $rundir)"
            sleep 0.1
        done
    fi

    start_ok=1
    trap - EXIT INT TERM
    if [ -n "$etcd_url" ]; then
        say "$mode cluster in $rundir: etcd pid $(node_pid etcd) at $etcd_url, cluster $cluster_id"
        for name in "${master_list[@]}"; do
            say "  $name pid $(node_pid "$name") at $(cat "$rundir/$name.addr")$([ "$name" != "$lead" ] || echo " (leads, epoch $epoch)")"
        done
    else
        say "$mode cluster in $rundir: master pid $(node_pid master) at $master_addr"
    fi
    for name in "${agent_list[@]}"; do
        say "  $name pid $(node_pid "$name") at $(cat "$rundir/$name.addr"), socket $rundir/$name.sock"
    done
}

# ---------------------------------------------------------------------------------------

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
start | stop | status)
    shift
    agents='' masters=1 dram=256M rundir=${XDG_RUNTIME_DIR:-/tmp}/mcstore netns='' hosts_file='' build_dir=
    timeout=60 agent_sets=() master_sets=() grace=20
    while [ $# -gt 0 ]; do
        case $1 in
        --agents | --masters | --dram | --dir | --hosts | --build-dir | --set | --master-set | \
            --timeout | --grace)
            [ $# -ge 2 ] || { warn "$1 needs a value"; usage; }
            case $1 in
            --agents) agents=$2 ;;
            --masters) masters=$2 ;;
            --dram) dram=$2 ;;
            --dir) rundir=$2 ;;
            --hosts) hosts_file=$2 ;;
            --build-dir) build_dir=$2 ;;
            --set) agent_sets+=("$2") ;;
            --master-set) master_sets+=("$2") ;;
            --timeout) timeout=$2 ;;
            --grace) grace=$2 ;;
            esac
            shift 2
            ;;
        --netns)
            netns=1
            shift
            ;;
        *)
            warn "unknown argument: $1"
            usage
            ;;
        esac
    done
    [[ $grace =~ ^[0-9]+$ ]] || { warn "--grace: seconds"; usage; }
    if [ "$cmd" != start ] && [ -d "$rundir" ]; then
        rundir=$(cd "$rundir" && pwd -P)
    fi
    case $cmd in
    start) do_start ;;
    stop) do_stop ;;
    status) do_status ;;
    esac
    ;;
*)
    usage
    ;;
esac
