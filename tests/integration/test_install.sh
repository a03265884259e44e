#!/usr/bin/env bash
# `meson install` of the build into a temporary DESTDIR, checked the way a user of the
# installed tree meets it: every file where it belongs (daemons in sbin, mcctl in bin,
# libmc with its soname, the headers, libmc.pc, the systemd units, the example configs), a
# client compiled with nothing but `pkg-config --cflags --libs libmc` that puts and gets
# through an agent started from the installed mc-agent, a reinstall that keeps edited
# configs, and a fresh configure with another --prefix that installs under it alone.
#
# Needs MC_BUILD_DIR, MC_SOURCE_DIR, MC_VERSION and the install paths MC_PREFIX, MC_BINDIR,
# MC_SBINDIR, MC_LIBDIR, MC_INCLUDEDIR, MC_SYSCONFDIR, MC_UNITDIR (meson sets them all);
# without them it exits 77 (SKIP). Runs as any user; leaves nothing behind.
set -u
. "$(dirname "$0")/../lib/t_sh.sh"

for v in MC_BUILD_DIR MC_SOURCE_DIR MC_VERSION MC_PREFIX MC_BINDIR MC_SBINDIR MC_LIBDIR MC_INCLUDEDIR \
    MC_SYSCONFDIR MC_UNITDIR; do
    if [ -z "${!v:-}" ]; then
        echo "$v not set: skipping" >&2
        exit 77
    fi
done
for tool in pkg-config readelf "${CC:-cc}"; do
    command -v "$tool" >/dev/null || { echo "no $tool: skipping" >&2; exit 77; }
done

tmp=$(mktemp -d /tmp/mc-install-XXXXXX) || exit 1
root=$tmp/root
agent_pid=
failures=0

cleanup() {
    local i=0
    if [ -n "$agent_pid" ]; then
        kill -TERM "$agent_pid" 2>/dev/null
        while kill -0 "$agent_pid" 2>/dev/null && [ $i -lt 500 ]; do
            sleep 0.01
            i=$((i + 1))
        done
        kill -KILL "$agent_pid" 2>/dev/null
        wait "$agent_pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM


# --- install
meson install -C "$MC_BUILD_DIR" --destdir "$root" --no-rebuild >"$tmp/install.log" 2>&1
rc=$?
check "meson install --destdir exits 0" test $rc -eq 0
[ $rc -eq 0 ] || { cat "$tmp/install.log" >&2; exit 1; }

libdir=$root$MC_LIBDIR
check "mc-master in sbin" test -x "$root$MC_SBINDIR/mc-master"
check "mc-agent in sbin" test -x "$root$MC_SBINDIR/mc-agent"
check "mcctl in bin" test -x "$root$MC_BINDIR/mcctl"
check "mc.h installed" test -f "$root$MC_INCLUDEDIR/mc/mc.h"
check "mc_status.h installed" test -f "$root$MC_INCLUDEDIR/mc/mc_status.h"
check "mc_limits.h installed" test -f "$root$MC_INCLUDEDIR/mc/mc_limits.h"
check "libmc.pc installed" test -f "$libdir/pkgconfig/libmc.pc"
check "libmc.so.0 -> the library" test "$(readlink "$libdir/libmc.so.0")" = "libmc.so.$MC_VERSION"
check "libmc.so (for -lmc) -> libmc.so.0" test "$(readlink "$libdir/libmc.so")" = libmc.so.0
check "units installed" test -f "$root$MC_UNITDIR/mc-master.service" \
    -a -f "$root$MC_UNITDIR/mc-agent.service"
check "units start the installed daemons" \
    grep -qxF "ExecStart=$MC_SBINDIR/mc-agent --config $MC_SYSCONFDIR/mcstore/agent.json \$MC_AGENT_OPTS" \
    "$root$MC_UNITDIR/mc-agent.service"
check "no unsubstituted @var@ in the units" \
    test -z "$(grep -l '@[a-z]*@' "$root$MC_UNITDIR"/mc-*.service)"
cfg=$root$MC_SYSCONFDIR/mcstore
check "example configs in sysconfdir/mcstore" test -f "$cfg/master.json" -a -f "$cfg/agent.json"
check "the token file is 0600" test "$(stat -c %a "$cfg/mcstore.env" 2>/dev/null)" = 600

# the soname, and nothing exported beyond the public API
soname=$(readelf -d "$libdir/libmc.so.$MC_VERSION" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
check "soname libmc.so.0" test "$soname" = libmc.so.0
leaked=$(nm -D --defined-only "$libdir/libmc.so.$MC_VERSION" 2>/dev/null |
    awk '$2 ~ /^[TDBR]$/ && $3 !~ /^mc_/ {print $3}')
check "only mc_* symbols exported" test -z "$leaked"
[ -z "$leaked" ] || echo "  exported: $leaked" >&2

# --- a client built against the installed tree through pkg-config only (the .pc names
# the real prefix; the sysroot puts the DESTDIR in front of its -I and -L)
pc() {
    PKG_CONFIG_PATH=$libdir/pkgconfig PKG_CONFIG_LIBDIR=$libdir/pkgconfig \
        PKG_CONFIG_SYSROOT_DIR=$root pkg-config "$@"
}
flags=$(pc --cflags --libs libmc)
check "pkg-config --cflags --libs libmc" test $? -eq 0
check "pkg-config --modversion libmc is the project's version" \
    test "$(pc --modversion libmc)" = "$MC_VERSION"
cat >"$tmp/client.c" <<'C'
#include <stdio.h>
#include <string.h>

#include <mc/mc.h>
#include <mc/mc_status.h>

int main(int argc, char **argv)
{
    static const char msg[] = "installed and linked through pkg-config";
    mc_client_t *c = NULL;
    char buf[128];
    size_t len = 0;
    int rc;

    if (argc != 2)
        return 2;
    if ((rc = mc_connect(argv[1], &c)) != 0) {
        fprintf(stderr, "mc_connect: %s\n", mc_strerror(rc));
        return 1;
    }
    rc = mc_put(c, "install-key", msg, sizeof(msg), NULL);
    if (rc == 0)
        rc = mc_get(c, "install-key", buf, sizeof(buf), &len);
    mc_close(c);
    if (rc != 0) {
        fprintf(stderr, "put/get: %s\n", mc_strerror(rc));
        return 1;
    }
    if (len != sizeof(msg) || memcmp(buf, msg, len) != 0) {
        fprintf(stderr, "read back %zu bytes, not what was put\n", len);
        return 1;
    }
    printf("libmc %s: put and got %zu bytes\n", mc_version(), len);
    return 0;
}
C
# A sanitized build (the ASan run of the suites) installs a sanitized libmc: its runtime
# must come first in the program that loads it, so the client is built the same way. The
# client's own flags stay pkg-config's alone otherwise.
san=
if readelf -d "$libdir/libmc.so.0" 2>/dev/null | grep -q 'NEEDED.*libasan'; then
    san="-fsanitize=address,undefined"
fi
# shellcheck disable=SC2086 # pkg-config's words
"${CC:-cc}" -std=c11 -Wall -Wextra -Werror $san -o "$tmp/client" "$tmp/client.c" $flags
check "client compiles against the installed headers and library" test $? -eq 0
check "client needs libmc.so.0" \
    grep -qF '[libmc.so.0]' <(readelf -d "$tmp/client" 2>/dev/null | grep NEEDED)

"$root$MC_SBINDIR/mc-agent" --standalone --socket "$tmp/a.sock" --dram 64M \
    --ready-file "$tmp/ready" >"$tmp/agent.log" 2>&1 &
agent_pid=$!
i=0
while [ ! -e "$tmp/ready" ] && kill -0 "$agent_pid" 2>/dev/null && [ $i -lt 1000 ]; do
    sleep 0.01
    i=$((i + 1))
done
check "the installed mc-agent is ready" test -e "$tmp/ready"
LD_LIBRARY_PATH=$libdir "$tmp/client" "$tmp/a.sock"
check "put/get through the installed agent" test $? -eq 0
LD_LIBRARY_PATH=$libdir "$root$MC_BINDIR/mcctl" --socket "$tmp/a.sock" get install-key \
    "$tmp/got" >/dev/null 2>&1
check "the installed mcctl reads it back" grep -qF "installed and linked" "$tmp/got"

# --- the Python package, from where it was installed, over the installed libmc (not with a
# sanitized libmc: its runtime would have to be preloaded into the interpreter)
if command -v python3 >/dev/null 2>&1 && [ -z "$san" ]; then
    pkg=$(find "$root" -path '*/mcstore/__init__.py' 2>/dev/null | head -n 1)
    check "the Python package is installed" test -n "$pkg"
    PYTHONPATH=$(dirname "$(dirname "$pkg")") MCSTORE_LIBMC=$libdir/libmc.so.0 \
        PYTHONDONTWRITEBYTECODE=1 python3 -c '
import sys, mcstore
with mcstore.Store(sys.argv[1]) as s:
    assert b"installed and linked" in s.get("install-key")
' "$tmp/a.sock"
    check "the installed Python package reads it back" test $? -eq 0
fi

# --- a reinstall keeps an operator's configs
echo '{"dram": "2G"}' >"$cfg/agent.json"
echo 'MC_CLUSTER_TOKEN=kept' >>"$cfg/mcstore.env"
meson install -C "$MC_BUILD_DIR" --destdir "$root" --no-rebuild >"$tmp/install2.log" 2>&1
check "a second install exits 0" test $? -eq 0
check "the second install kept the edited agent.json" grep -qF '"2G"' "$cfg/agent.json"
check "... and the edited token file, still 0600" \
    test "$(grep -c '^MC_CLUSTER_TOKEN=kept$' "$cfg/mcstore.env")" = 1 -a \
    "$(stat -c %a "$cfg/mcstore.env")" = 600

# --- another --prefix: every installed path under it (a configure, no build)
if meson setup "$tmp/b2" "$MC_SOURCE_DIR" --prefix "$tmp/p" -Dtests=disabled \
    -Dfuzz=disabled -Dcuda=disabled >"$tmp/setup2.log" 2>&1; then
    meson introspect "$tmp/b2" --installed >"$tmp/installed.json"
    outside=$(tr ',' '\n' <"$tmp/installed.json" | sed -n 's/.*": *"\(.*\)".*/\1/p' |
        grep -v "^$tmp/p/")
    check "--prefix: every file installed under it" test -z "$outside"
    [ -z "$outside" ] || echo "  outside: $outside" >&2
    check "--prefix: the units too" grep -qF "\"$tmp/p/lib/systemd/system/mc-agent.service\"" \
        "$tmp/installed.json"
    check "--prefix: the units name its sbindir" \
        grep -qF "ExecStart=$tmp/p/sbin/mc-master" "$tmp/b2/dist/mc-master.service"
else
    check "meson setup --prefix" false
    tail -n 30 "$tmp/setup2.log" >&2
fi

if [ $failures -ne 0 ]; then
    echo "$failures check(s) failed; the agent's log:" >&2
    cat "$tmp/agent.log" >&2
    exit 1
fi
exit 0
