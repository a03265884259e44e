#!/bin/bash
# mcctl against the real mc-agent: exit codes (0 ok, 1 not found, 2 usage, 3 other) and
# round trips through files and pipes. Needs MC_AGENT_BIN and MCCTL (meson sets both);
# without them it exits 77 (SKIP). Starts its own agent in a temporary directory and stops
# it on every way out.
set -u
. "$(dirname "$0")/../lib/t_sh.sh"

if [ -z "${MC_AGENT_BIN:-}" ] || [ -z "${MCCTL:-}" ]; then
    echo "MC_AGENT_BIN or MCCTL not set: skipping" >&2
    exit 77
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/mc-mcctl-XXXXXX") || exit 1
agent_pid=
failures=0

cleanup() {
    stop_pid "$agent_pid"
    agent_pid=
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

"$MC_AGENT_BIN" --standalone --socket "$dir/a.sock" --dram 64M --ready-file "$dir/ready" \
    >"$dir/agent.log" 2>&1 &
agent_pid=$!

wait_ready "$dir/ready" "$agent_pid" "$dir/agent.log" || exit 1

mc() {
    "$MCCTL" --socket "$dir/a.sock" "$@"
}

# expect CODE DESCRIPTION -- COMMAND...: run it, compare its exit status
expect() {
    want=$1
    what=$2
    shift 3
    "$@"
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: $what: exit $got, expected $want" >&2
        failures=$((failures + 1))
    else
        echo "ok: $what"
    fi
}


# usage errors: 2
expect 2 "no command" -- "$MCCTL"
expect 2 "unknown command" -- mc frobnicate k
expect 2 "get without key" -- mc get
expect 2 "bad --pin" -- mc put k /dev/null --pin medium
expect 2 "bad --replicas" -- mc put k /dev/null --replicas x
expect 2 "unknown option" -- mc get k --bogus
expect 2 "empty key" -- mc exist ""
expect 2 "extra argument" -- mc rm k extra
expect 0 "--help" -- "$MCCTL" --help
expect 2 "--socket without a path" -- "$MCCTL" --socket
"$MCCTL" --socket 2>"$dir/nosock.err"
check "--socket without a path says it needs one" \
    grep -q -- "--socket needs a path" "$dir/nosock.err"
check "--socket without a path is not an unknown option" \
    sh -c "! grep -q 'unknown option' '$dir/nosock.err'"
expect 2 "--socket= without a path" -- "$MCCTL" --socket= exist k
printf 'ttl' >"$dir/ttl.src"
expect 2 "--ttl above the maximum" -- mc put k "$dir/ttl.src" --ttl 18446744073709551615

# no agent there: 3
expect 3 "wrong socket" -- "$MCCTL" --socket "$dir/nope.sock" exist k

# absent key: 1
expect 1 "exist absent" -- mc exist k
expect 1 "get absent" -- mc get k "$dir/never"
check "get absent creates no file" test ! -e "$dir/never"
expect 1 "rm absent" -- mc rm k
expect 1 "stat absent" -- mc stat k

# round trip through stdin / stdout
printf 'hello, store' | mc put k -
expect 0 "put from stdin" -- test $? -eq 0
out=$(mc get k)
check "get to stdout" test "$out" = "hello, store"
expect 0 "exist present" -- mc exist k
printf 'other' >"$dir/other"
expect 3 "put existing key" -- mc put k "$dir/other"
expect 0 "put --upsert" -- mc put k "$dir/other" --upsert
out=$(mc get k -)
check "get after upsert" test "$out" = "other"
mc stat k >"$dir/stat.json"
expect 0 "stat" -- test $? -eq 0
check "stat size" grep -q '"size": 5' "$dir/stat.json"
check "stat version" grep -q '"version": 2' "$dir/stat.json"
check "stat fields" grep -q '"replicas": 1.*"flags": 0.*"ttl_remaining_ms": 0' "$dir/stat.json"

# a file in pieces (3 MiB + a bit), through files both ways
head -c 3146000 /dev/urandom >"$dir/big"
expect 0 "put big file" -- mc put big "$dir/big"
expect 0 "get big file" -- mc get big "$dir/big.out"
check "big round trip" cmp -s "$dir/big" "$dir/big.out"
mc get big - >"$dir/big.stdout"
check "big round trip via stdout" cmp -s "$dir/big" "$dir/big.stdout"

# options
expect 0 "put with options" -- mc put opt "$dir/other" --replicas 1 --pin soft --ttl 60000
mc stat opt >"$dir/opt.json"
check "stat shows the soft pin" grep -q '"flags": 2' "$dir/opt.json"
check "stat shows a ttl" grep -q '"ttl_remaining_ms": [1-9]' "$dir/opt.json"
expect 0 "put --pin hard" -- mc put hard "$dir/other" --pin hard

# an empty input is refused
expect 3 "put empty input" -- mc put empty /dev/null

# stats: the agent's JSON
mc stats >"$dir/stats.json"
expect 0 "stats" -- test $? -eq 0
for f in objects used_bytes capacity_bytes evictions clients; do
    check "stats has $f" grep -q "\"$f\"" "$dir/stats.json"
done

# ls and rm by prefix
for n in 1 2 3 4 5; do
    printf 'v%s' "$n" | mc put "pfx/$n" -
done
printf 'x' | mc put "other/1" -
mc ls --prefix pfx/ >"$dir/ls.out"
expect 0 "ls --prefix" -- test $? -eq 0
check "ls --prefix lists the five" test "$(sort "$dir/ls.out" | tr '\n' ' ')" = "pfx/1 pfx/2 pfx/3 pfx/4 pfx/5 "
mc ls >"$dir/ls.all"
check "ls lists other keys too" grep -qx "other/1" "$dir/ls.all"
check "ls lists pfx keys too" grep -qx "pfx/3" "$dir/ls.all"
mc ls --prefix pfx/ --limit 2 >"$dir/ls.lim"
check "ls --limit 2" test "$(wc -l <"$dir/ls.lim")" -eq 2
out=$(mc ls --prefix nothing/)
check "ls of an absent prefix is empty" test -z "$out"
expect 2 "ls --limit 0" -- mc ls --limit 0
expect 2 "rm --prefix without value" -- mc rm --prefix
expect 2 "rm --prefix empty" -- mc rm --prefix ""
out=$(mc rm --prefix pfx/)
check "rm --prefix prints the count" test "$out" = "5"
expect 1 "exist after rm --prefix" -- mc exist pfx/3
expect 0 "other prefix untouched" -- mc exist other/1
out=$(mc rm --prefix pfx/)
check "rm --prefix again removes nothing" test "$out" = "0"

# remove
expect 0 "rm" -- mc rm k
expect 1 "exist after rm" -- mc exist k
expect 1 "get after rm" -- mc get k "$dir/never"

if [ $failures -ne 0 ]; then
    echo "$failures check(s) failed; agent log:" >&2
    cat "$dir/agent.log" >&2
    exit 1
fi
exit 0
