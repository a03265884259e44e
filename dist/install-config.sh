#!/bin/sh
# meson install script: copy the example configuration into DIR, each file only when DIR
# has none of that name yet, so an operator's edits survive a reinstall. DIR is absolute;
# the DESTDIR of `meson install --destdir` (meson exports it) is put in front.
#
# usage: install-config.sh DIR MODE FILE...
set -eu
dir=${DESTDIR:-}$1
mode=$2
shift 2
mkdir -p "$dir"
for f in "$@"; do
    t=$dir/$(basename "$f")
    if [ -e "$t" ]; then
        echo "Keeping $t (already there)"
        continue
    fi
    cp "$f" "$t.tmp$$"
    chmod "$mode" "$t.tmp$$"
    mv "$t.tmp$$" "$t"
    echo "Installing $f to $t"
done
