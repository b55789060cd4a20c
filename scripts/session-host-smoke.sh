#!/bin/sh
# The C++ session host (examples/session_host.cpp) serving two concurrent
# `tensafe client` runs over 127.0.0.1: the example is built with its own
# "// Build: " line (pkg-config against the installed SDK, as CI's example
# stage does), serves a random PEFT adapter in its poll() loop, and each
# client's deltas are compared with `tensafe lora apply --plain` on that
# client's own input (relative L2 <= 1e-3). Prints one PASS/FAIL line.
# Uses $TENSAFE if set, else `tensafe` from PATH; PKG_CONFIG_PATH must find
# tensafe-lora.
set -u
TENSAFE=${TENSAFE:-tensafe}
here=$(cd "$(dirname "$0")/.." && pwd)
TOL=1e-3
fail() { echo "session-host-smoke: FAIL: $*"; exit 1; }

command -v "$TENSAFE" >/dev/null 2>&1 || fail "'$TENSAFE' not found (set TENSAFE or PATH)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tensafe-host.XXXXXX") || fail "mktemp"
host_pid=""
cleanup() {
    [ -n "$host_pid" ] && kill "$host_pid" 2>/dev/null && wait "$host_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cp "$here/examples/session_host.cpp" "$tmp/"
line=$(sed -n 's|^// Build: ||p' "$tmp/session_host.cpp")
(cd "$tmp" && bash -c "$line") >"$tmp/build.log" 2>&1 || fail "build: $(tail -n3 "$tmp/build.log")"

"$TENSAFE" adapter make-random --out "$tmp/adapter" --dim 256 --rank 8 --modules q_proj,v_proj \
    >"$tmp/make.log" 2>&1 || fail "adapter make-random: $(tail -n1 "$tmp/make.log")"
for k in 1 2; do
    "$TENSAFE" lora make-input --dim 256 --rows 3 --out "$tmp/x$k.f32" >/dev/null 2>&1 &&
        "$TENSAFE" lora apply --adapter "$tmp/adapter" --module all --input "$tmp/x$k.f32" \
            --output "$tmp/plain$k.f32" --plain >"$tmp/plain$k.log" 2>&1 ||
        fail "reference $k: $(tail -n1 "$tmp/plain$k.log")"
done

"$tmp/session_host" --adapter "$tmp/adapter" --port-file "$tmp/port" --sessions 2 \
    >"$tmp/host.log" 2>&1 &
host_pid=$!
i=0
while [ $i -lt 200 ] && [ ! -s "$tmp/port" ] && kill -0 "$host_pid" 2>/dev/null; do
    sleep 0.05
    i=$((i + 1))
done
[ -s "$tmp/port" ] || fail "host did not start: $(tail -n1 "$tmp/host.log")"
port=$(cat "$tmp/port")

"$TENSAFE" client --port "$port" --input "$tmp/x1.f32" --output "$tmp/he1.f32" \
    >"$tmp/c1.log" 2>&1 &
c1=$!
"$TENSAFE" client --port "$port" --input "$tmp/x2.f32" --output "$tmp/he2.f32" \
    >"$tmp/c2.log" 2>&1 &
c2=$!
wait "$c1" || fail "client 1: $(tail -n1 "$tmp/c1.log")"
wait "$c2" || fail "client 2: $(tail -n1 "$tmp/c2.log")"
wait "$host_pid"
hrc=$?
host_pid=""
[ "$hrc" -eq 0 ] || fail "host exited with $hrc: $(cat "$tmp/host.log")"
[ "$(grep -c ': done, 3 tokens' "$tmp/host.log")" -eq 2 ] || fail "host log: $(cat "$tmp/host.log")"
for k in 1 2; do
    "$TENSAFE" lora compare "$tmp/he$k.f32" "$tmp/plain$k.f32" --tol "$TOL" >"$tmp/cmp$k.log" 2>&1 ||
        fail "client $k deltas: $(tail -n1 "$tmp/cmp$k.log")"
done
r1=$(sed -n 's/^rel_l2 \([^ ]*\).*/\1/p' "$tmp/cmp1.log")
r2=$(sed -n 's/^rel_l2 \([^ ]*\).*/\1/p' "$tmp/cmp2.log")
echo "session-host-smoke: PASS (C++ poll() host, 2 concurrent tensafe clients over 127.0.0.1:$port, rel_l2 $r1 and $r2 <= $TOL)"
