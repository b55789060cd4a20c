#!/bin/sh
# Installs the Debian packages TenSafe-HE needs when they are missing (as root),
# otherwise prints the exact apt-get line and fails. clang (libFuzzer) is for
# `make fuzz`, valgrind for `make demo-valgrind`, universal-ctags for the
# function-length check of `make check-tree` (scripts/check-functions.sh),
# libevent for `tensafe serve`'s event loop, haproxy for scripts/haproxy-test.sh.
PKGS="build-essential pkg-config libgmp-dev libfftw3-dev libsodium-dev libssl-dev zlib1g-dev \
libopenblas-dev liblapacke-dev libjansson-dev libcmocka-dev gnuplot-nox \
libsentencepiece-dev libfplll-dev libmpfr-dev libevent-dev"
missing=""
PKGS="$PKGS clang valgrind universal-ctags" # make fuzz (libFuzzer), make demo-valgrind, make check-tree
PKGS="$PKGS haproxy" # scripts/haproxy-test.sh (serve scale-out behind HAProxy)
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
cmd="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "deps: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  (apt-get update -qq && $cmd -qq) >/tmp/tensafe-deps.log 2>&1 || {
    echo "deps: apt-get failed (log: /tmp/tensafe-deps.log). Run: sudo apt-get update && sudo $cmd" >&2
    exit 1; }
  exit 0
fi
echo "deps: missing packages. Run: sudo apt-get update && sudo $cmd" >&2
exit 1
