#!/usr/bin/env bash
# Installs the Debian packages mcstore needs (only the missing ones, non-interactive,
# idempotent) and configures the build directory.
#
# usage: scripts/setup.sh [BUILD_DIR [meson options...]]     (default BUILD_DIR: build)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
builddir=${1:-build}
shift || true

pkgs=(gcc pkg-config meson ninja-build libucx-dev ucx-utils liburing-dev libjansson-dev
      check libsubunit-dev libxxhash-dev redis-server redis-tools gnuplot-nox
      clang libclang-rt-dev libsystemd-dev libmicrohttpd-dev libseccomp-dev stress-ng python3 fio
      etcd-server etcd-client libcurl4-openssl-dev)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq || true
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cd "$top"
if [ -f "$builddir/build.ninja" ]; then
    meson setup --reconfigure "$builddir" "$@" >/dev/null
else
    meson setup "$builddir" "$@" >/dev/null
fi
echo "setup: configured $top/$builddir"
