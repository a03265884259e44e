#!/usr/bin/env bash
# The installed systemd units pass `systemd-analyze verify`, silently: the build is
# installed into a temporary DESTDIR and verified with --root there, so the ExecStart
# programs the units name (this install's sbindir) exist; the host's targets and slices
# are copied in for the units' default dependencies. A warning (an unknown key, a bad
# value) fails the test like an error does.
#
# Needs MC_BUILD_DIR and MC_UNITDIR (meson sets them); exits 77 (SKIP) without them or
# without systemd-analyze (or the host's unit directory it needs).
set -u

if [ -z "${MC_BUILD_DIR:-}" ] || [ -z "${MC_UNITDIR:-}" ]; then
    echo "MC_BUILD_DIR or MC_UNITDIR not set: skipping" >&2
    exit 77
fi
if ! command -v systemd-analyze >/dev/null; then
    echo "no systemd-analyze: skipping" >&2
    exit 77
fi
hostunits=
for d in /usr/lib/systemd/system /lib/systemd/system; do
    [ -f "$d/sysinit.target" ] && { hostunits=$d; break; }
done
if [ -z "$hostunits" ]; then
    echo "no systemd unit directory with sysinit.target here: skipping" >&2
    exit 77
fi

tmp=$(mktemp -d /tmp/mc-units-XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
root=$tmp/root

if ! meson install -C "$MC_BUILD_DIR" --destdir "$root" --no-rebuild >"$tmp/install.log" 2>&1; then
    echo "FAIL: meson install" >&2
    cat "$tmp/install.log" >&2
    exit 1
fi
mkdir -p "$root/usr/lib/systemd/system"
cp -P "$hostunits"/*.target "$hostunits"/*.slice "$root/usr/lib/systemd/system/" 2>/dev/null

failures=0
for u in mc-master.service mc-agent.service; do
    f=$root$MC_UNITDIR/$u
    if [ ! -f "$f" ]; then
        echo "FAIL: $u not installed in $MC_UNITDIR" >&2
        failures=$((failures + 1))
        continue
    fi
    systemd-analyze verify --root="$root" "$f" >"$tmp/verify.out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && [ ! -s "$tmp/verify.out" ]; then
        echo "ok: systemd-analyze verify $u"
    else
        echo "FAIL: systemd-analyze verify $u (exit $rc):" >&2
        cat "$tmp/verify.out" >&2
        failures=$((failures + 1))
    fi
done
[ $failures -eq 0 ]
