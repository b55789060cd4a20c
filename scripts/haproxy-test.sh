#!/usr/bin/env bash
# Scale-out of `tensafe serve` behind HAProxy (docs/SERVING.md): two
# servers with the same two signed adapters on 127.0.0.1, HAProxy in TCP
# mode in front of them (roundrobin), and 8 concurrent `tensafe client`
# runs through HAProxy's port, 4 per adapter. A session is pinned to the
# server its connection reached (its keys never leave that process), so
# plain TCP balancing is all it needs. Checks: every client's deltas
# against the plaintext reference of its own adapter (relative L2 <= 1e-3),
# both servers served sessions, both drain on SIGTERM and exit 0. Skips
# (exit 0, with a line saying so) when haproxy is not installed (Debian
# package haproxy, scripts/deps.sh). Uses $TENSAFE if set, else `tensafe`.
set -u
TENSAFE=${TENSAFE:-tensafe}
HAPROXY=${HAPROXY:-haproxy}
CLIENTS=8
ROWS=6
DIM=128
TOL=1e-3
fail() { echo "haproxy-test: FAIL: $*"; exit 1; }

if ! command -v "$HAPROXY" >/dev/null 2>&1; then
    echo "haproxy-test: SKIP: haproxy not found (apt-get install haproxy; scripts/deps.sh)"
    exit 0
fi
command -v "$TENSAFE" >/dev/null 2>&1 || fail "'$TENSAFE' not found (set TENSAFE or PATH)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tensafe-haproxy.XXXXXX") || fail "mktemp"
pids=""
cleanup() {
    for p in $pids; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. "$(dirname "$0")/serve-fixture.sh"
serve_fixture_adapters ha
for k in $(seq 1 "$CLIENTS"); do
    "$TENSAFE" lora make-input --dim "$DIM" --rows "$ROWS" --max-abs 4 --out "$tmp/x$k.f32" \
        >>"$tmp/setup.log" 2>&1 &&
        "$TENSAFE" lora apply --adapter "$tmp/$(adapter_of "$k")" --module q_proj,v_proj \
            --input "$tmp/x$k.f32" --output "$tmp/plain$k.f32" --plain >>"$tmp/setup.log" 2>&1 ||
        fail "reference $k"
done

# two servers, each on a free port of its own
declare -a srv port
for s in 1 2; do
    "$TENSAFE" serve --adapter "a1=$tmp/a1.pkg" --adapter "a2=$tmp/a2.pkg" \
        --trusted-key "$tmp/sign.pub" --module q_proj,v_proj --port 0 \
        --port-file "$tmp/port$s" --workers 1 >"$tmp/serve$s.log" 2>"$tmp/serve$s.err" &
    srv[$s]=$!
    pids="$pids ${srv[$s]}"
done
for s in 1 2; do
    for _ in $(seq 200); do
        [ -s "$tmp/port$s" ] && break
        sleep 0.05
    done
    [ -s "$tmp/port$s" ] || fail "server $s did not start: $(tail -n1 "$tmp/serve$s.err")"
    port[$s]=$(cat "$tmp/port$s")
done

# HAProxy on a random free port, TCP mode, roundrobin over both
front=""
for _ in 1 2 3 4 5 6 7 8; do
    try=$(($(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 20000 + 40000))
    cat >"$tmp/haproxy.cfg" <<EOF
global
    maxconn 512
defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend tensafe
    bind 127.0.0.1:$try
    default_backend servers
backend servers
    balance roundrobin
    server s1 127.0.0.1:${port[1]} check
    server s2 127.0.0.1:${port[2]} check
EOF
    "$HAPROXY" -c -f "$tmp/haproxy.cfg" >"$tmp/haproxy-check.log" 2>&1 ||
        fail "haproxy -c: $(tail -n2 "$tmp/haproxy-check.log")"
    "$HAPROXY" -db -f "$tmp/haproxy.cfg" >"$tmp/haproxy.log" 2>&1 &
    hp=$!
    sleep 0.5
    if kill -0 "$hp" 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$try") 2>/dev/null; then
        front=$try
        pids="$pids $hp"
        break
    fi
    kill -9 "$hp" 2>/dev/null
    wait "$hp" 2>/dev/null
done
[ -n "$front" ] || fail "haproxy did not start: $(tail -n2 "$tmp/haproxy.log")"

cpids=""
for k in $(seq 1 "$CLIENTS"); do
    "$TENSAFE" client --port "$front" --adapter-id "$(adapter_of "$k")" --input "$tmp/x$k.f32" \
        --output "$tmp/he$k.f32" >"$tmp/c$k.log" 2>&1 &
    cpids="$cpids $!"
done
k=0
for p in $cpids; do
    k=$((k + 1))
    wait "$p" || fail "client $k: $(tail -n1 "$tmp/c$k.log")"
done
for k in $(seq 1 "$CLIENTS"); do
    "$TENSAFE" lora compare "$tmp/he$k.f32" "$tmp/plain$k.f32" --tol "$TOL" >"$tmp/cmp.log" 2>&1 ||
        fail "client $k ($(adapter_of "$k")): $(tail -n1 "$tmp/cmp.log")"
done

for s in 1 2; do
    kill -TERM "${srv[$s]}"
    wait "${srv[$s]}"
    rc=$?
    [ "$rc" -eq 0 ] || fail "server $s exited with $rc: $(tail -n2 "$tmp/serve$s.err")"
done
n1=$(grep -c "^session .*: $ROWS tokens" "$tmp/serve1.log")
n2=$(grep -c "^session .*: $ROWS tokens" "$tmp/serve2.log")
[ "$n1" -ge 1 ] && [ "$n2" -ge 1 ] && [ $((n1 + n2)) -eq "$CLIENTS" ] ||
    fail "sessions with $ROWS tokens: $n1 on server 1, $n2 on server 2 (want both, $CLIENTS in all)"
echo "haproxy-test: PASS ($CLIENTS clients over 2 adapters through HAProxy TCP 127.0.0.1:$front:" \
    "$n1 sessions on server 1 (port ${port[1]}), $n2 on server 2 (port ${port[2]});" \
    "every delta of its own adapter within rel_l2 $TOL; both drained, exit 0)"
