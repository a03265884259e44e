# Sourced by the scripts that need a throw-away one-member etcd on loopback (bench-ha-cost.sh,
# ha-lease-soak.sh). Defines free_port and mc_etcd_start; uses $etcd_bin and the caller's
# pids array (the caller's cleanup kills what is in it).

# A TCP port on 127.0.0.1 that was free a moment ago.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# mc_etcd_start DIR [ETCD-ARGS...]: start etcd with its data in DIR/e0 and its log in
# DIR/etcd.log, append its pid to pids, wait (up to 10 s) until it answers, and set etcd_url.
# Returns 1 when it never answered.
mc_etcd_start() {
    local dir=$1 cport pport
    shift
    cport=$(free_port)
    pport=$(free_port)
    "$etcd_bin" --name e0 --data-dir "$dir/e0" --listen-client-urls "http://127.0.0.1:$cport" \
        --advertise-client-urls "http://127.0.0.1:$cport" --listen-peer-urls "http://127.0.0.1:$pport" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
        --initial-cluster "e0=http://127.0.0.1:$pport" --log-level warn "$@" >"$dir/etcd.log" 2>&1 &
    pids+=($!)
    etcd_url="http://127.0.0.1:$cport"
    for _ in $(seq 100); do
        curl -s -m 1 -X POST -d '{}' "$etcd_url/v3/maintenance/status" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "etcd did not answer on $etcd_url (log: $dir/etcd.log)" >&2
    return 1
}
