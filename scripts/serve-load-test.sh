#!/usr/bin/env bash
# Load test of the concurrent `tensafe serve` (docs/SERVING.md), small
# shapes, over 127.0.0.1. One server with two signed adapters (a1, a2)
# chosen by SELECT:
#   unloaded: 16 concurrent `tensafe client` runs (8 per adapter), 20 rows each;
#   loaded:   the same 16 clients while 50 idle sessions are open, one peer
#             sends its SELECT one byte per second, one client is killed
#             (SIGKILL) in the middle of its tokens and one sends garbage.
# Checks: every honest client's deltas against the plaintext reference of
# its own adapter (relative L2 <= 1e-3) and NOT against the other adapter's
# (none mixed); honest p99 per-token latency (loaded) <= 2x the unloaded p99
# (+1 ms for the timer's grain), over rows 2..20 (row 1 also makes the
# client's keys: its p99 is printed, not gated); the drip, the killed client and the garbage
# each end their own session with the expected error; the server's open fds
# back to their value after the unloaded run and its RSS within 10% (+12 MiB)
# of it; SIGTERM while 4 clients are mid-run closes each between two
# tokens (the client reads "server is shutting down") and the server exits 0. Prints the p50/p99 and one
# PASS/FAIL line. Uses $TENSAFE if set, else `tensafe` from PATH; LOAD_KEEP=1
# keeps the scratch directory; LOAD_TIMING=0 skips the p99 and RSS gates
# (sanitizer builds: CI runs a smaller load under ThreadSanitizer with it);
# LOAD_CLIENTS, LOAD_IDLE, LOAD_ROWS, LOAD_DIM, LOAD_WORKERS set the load.
set -u
TENSAFE=${TENSAFE:-tensafe}
CLIENTS=${LOAD_CLIENTS:-16}
ROWS=${LOAD_ROWS:-20}
IDLE=${LOAD_IDLE:-50}
DIM=${LOAD_DIM:-128}
WORKERS=${LOAD_WORKERS:-2}
TOL=1e-3
fail() { echo "serve-load-test: FAIL: $*"; exit 1; }

command -v "$TENSAFE" >/dev/null 2>&1 || fail "'$TENSAFE' not found (set TENSAFE or PATH)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tensafe-load.XXXXXX") || fail "mktemp"
srv_pid=""
bg_pids=""
cleanup() {
    for p in $bg_pids; do kill "$p" 2>/dev/null; done
    [ -n "$srv_pid" ] && kill -9 "$srv_pid" 2>/dev/null
    wait 2>/dev/null
    [ "${LOAD_KEEP:-0}" = 1 ] && echo "serve-load-test: kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- setup
. "$(dirname "$0")/serve-fixture.sh"
serve_fixture_adapters load
for k in $(seq 1 "$CLIENTS"); do
    "$TENSAFE" lora make-input --dim "$DIM" --rows "$ROWS" --max-abs 4 --out "$tmp/x$k.f32" \
        >>"$tmp/setup.log" 2>&1 || fail "make-input"
    for a in a1 a2; do
        "$TENSAFE" lora apply --adapter "$tmp/$a" --module q_proj,v_proj --input "$tmp/x$k.f32" \
            --output "$tmp/plain$k-$a.f32" --plain >>"$tmp/setup.log" 2>&1 || fail "reference"
    done
done
"$TENSAFE" lora make-input --dim "$DIM" --rows 4000 --max-abs 4 --out "$tmp/xbig.f32" \
    >>"$tmp/setup.log" 2>&1 || fail "make-input (victim)"

"$TENSAFE" serve --adapter "a1=$tmp/a1.pkg" --adapter "a2=$tmp/a2.pkg" \
    --trusted-key "$tmp/sign.pub" --module q_proj,v_proj --port 0 --port-file "$tmp/port" \
    --workers "$WORKERS" --max-sessions $((IDLE + CLIENTS + 16)) --max-message 4194304 \
    --idle-timeout 120 --message-timeout 4 >"$tmp/serve.log" 2>"$tmp/serve.err" &
srv_pid=$!
for _ in $(seq 200); do
    [ -s "$tmp/port" ] && break
    kill -0 "$srv_pid" 2>/dev/null || break
    sleep 0.05
done
[ -s "$tmp/port" ] || fail "server did not start: $(tail -n2 "$tmp/serve.err")"
port=$(cat "$tmp/port")

rss() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$srv_pid/status"; }
fds() { ls "/proc/$srv_pid/fd" | wc -l; }
rss_listen=$(rss)
fds_listen=$(fds)

# run_clients TAG: the 16 honest clients at once; their JSON in c<k>-TAG.json
run_clients() {
    pids=""
    for k in $(seq 1 "$CLIENTS"); do
        "$TENSAFE" client --port "$port" --adapter-id "$(adapter_of "$k")" --input "$tmp/x$k.f32" \
            --output "$tmp/he$k-$1.f32" --json >"$tmp/c$k-$1.json" 2>"$tmp/c$k-$1.err" &
        pids="$pids $!"
    done
    k=0
    for p in $pids; do
        k=$((k + 1))
        wait "$p" || fail "$1 client $k: $(tail -n1 "$tmp/c$k-$1.err")"
    done
}

# check_deltas TAG: own adapter within TOL, the other adapter far off
check_deltas() {
    for k in $(seq 1 "$CLIENTS"); do
        own=$(adapter_of "$k")
        "$TENSAFE" lora compare "$tmp/he$k-$1.f32" "$tmp/plain$k-$own.f32" --tol "$TOL" \
            >"$tmp/cmp.log" 2>&1 || fail "$1 client $k ($own): $(tail -n1 "$tmp/cmp.log")"
        "$TENSAFE" lora compare "$tmp/he$k-$1.f32" "$tmp/plain$k-$(other_of "$k").f32" \
            --tol 0.1 >/dev/null 2>&1 && fail "$1 client $k: deltas match the other adapter (mixed)"
    done
}

# quantile TAG Q [FIRST]: the Q-quantile (nearest rank) of the rows' ms,
# from row FIRST of each client on (default 2: row 1 carries the client's
# key generation and SHELLO, 16 at once, and is reported apart)
quantile() {
    for k in $(seq 1 "$CLIENTS"); do
        sed -n 's/.*"row_ms": *\[\([^]]*\)\].*/\1/p' "$tmp/c$k-$1.json" | tr ',' '\n' |
            tail -n +"${3:-2}"
    done | sort -g | awk -v q="$2" '{ v[NR] = $1 } END {
        r = int(q * NR + 0.999999); if (r < 1) r = 1; printf "%.3f", v[r] }'
}

# ------------------------------------------------------------- unloaded
t0=$SECONDS
run_clients unloaded
check_deltas unloaded
p50_u=$(quantile unloaded 0.50)
p99_u=$(quantile unloaded 0.99)
p99_u1=$(quantile unloaded 0.99 1)
t_unloaded=$((SECONDS - t0))
sleep 0.5 # the last sessions close
rss_start=$(rss)
fds_start=$(fds)

# --------------------------------------------------------------- loaded
# 50 idle sessions: each sends its SELECT (a1) and then nothing
select_frame='TSNP\001\015\000\000\002\000\000\000a1'
(
    for _ in $(seq 1 "$IDLE"); do
        exec {fd}<>"/dev/tcp/127.0.0.1/$port" || exit 1
        printf "$select_frame" >&"$fd"
    done
    sleep 600
) 2>"$tmp/idle.err" &
idle_pid=$!
bg_pids="$bg_pids $idle_pid"
# the drip: one byte of a SELECT per second, never done before --message-timeout
(
    exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
    for b in T S N P '\001' '\015' '\000' '\000' '\002' '\000' '\000' '\000' a 1; do
        printf "$b" >&3 2>/dev/null || exit 0
        sleep 1
    done
) 2>/dev/null &
drip_pid=$!
bg_pids="$bg_pids $drip_pid"
# garbage
(
    exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
    head -c 4096 /dev/urandom >&3 2>/dev/null
    cat <&3 >"$tmp/garbage.reply" 2>/dev/null
) &
bg_pids="$bg_pids $!"
# the victim: a long run killed in the middle of its tokens
"$TENSAFE" client --port "$port" --adapter-id a2 --input "$tmp/xbig.f32" \
    >"$tmp/victim.log" 2>&1 &
victim_pid=$!
bg_pids="$bg_pids $victim_pid"
for _ in $(seq 100); do # connected, then some tokens in: kill it mid-run
    ls -l "/proc/$victim_pid/fd" 2>/dev/null | grep -q socket && break
    sleep 0.05
done
sleep 0.3
kill -9 "$victim_pid" 2>/dev/null
wait "$victim_pid" 2>/dev/null
t0=$SECONDS
run_clients loaded
check_deltas loaded
p50_l=$(quantile loaded 0.50)
p99_l=$(quantile loaded 0.99)
p99_l1=$(quantile loaded 0.99 1)
t_loaded=$((SECONDS - t0))
open_idle=$(( $(fds) - fds_start ))
wait "$drip_pid" 2>/dev/null
kill "$idle_pid" 2>/dev/null
wait "$idle_pid" 2>/dev/null

# --------------------------------------------------- resources, drain
for _ in $(seq 100); do
    [ "$(fds)" -le "$fds_start" ] && break
    sleep 0.05
done
sleep 0.3
rss_end=$(rss)
fds_end=$(fds)
# the drain: SIGTERM while 4 clients are in the middle of long runs; each
# must be told "server is shutting down" between two tokens (not cut off)
dpids=""
for k in 1 2 3 4; do
    "$TENSAFE" client --port "$port" --adapter-id "$(adapter_of "$k")" --input "$tmp/xbig.f32" \
        >"$tmp/drain$k.log" 2>&1 &
    dpids="$dpids $!"
done
sleep 1
t_term=$(date +%s.%N)
kill -TERM "$srv_pid"
wait "$srv_pid"
src=$?
t_drain=$(awk -v a="$t_term" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", (b - a) * 1000 }')
srv_pid=""
k=0
for p in $dpids; do
    k=$((k + 1))
    wait "$p" && fail "drain: client $k finished 4000 rows before the drain"
    grep -q "server is shutting down" "$tmp/drain$k.log" ||
        fail "drain: client $k was not closed between tokens: $(tail -n1 "$tmp/drain$k.log")"
done

echo "serve-load-test: $CLIENTS clients x $ROWS rows, 2 adapters, d_in $DIM, $WORKERS workers:" \
    "per token (rows 2..$ROWS) unloaded p50 ${p50_u} ms p99 ${p99_u} ms (${t_unloaded} s);" \
    "loaded (+$IDLE idle, drip, killed, garbage) p50 ${p50_l} ms p99 ${p99_l} ms (${t_loaded} s);" \
    "p99 with row 1 (keys + SHELLO): ${p99_u1} / ${p99_l1} ms"
echo "serve-load-test: server fds $fds_listen listening, $fds_start after the unloaded run," \
    "$((fds_start + open_idle)) under load, $fds_end after; RSS $rss_listen kB listening," \
    "$rss_start kB after the unloaded run, $rss_end kB after; SIGTERM with 4 clients mid-run:" \
    "drained in $t_drain ms"
[ "$src" -eq 0 ] || fail "server exited with $src after SIGTERM: $(tail -n3 "$tmp/serve.err")"
grep -q "SIGTERM: draining (4 sessions open)" "$tmp/serve.err" ||
    fail "no drain line: $(tail -n3 "$tmp/serve.err")"
[ "$open_idle" -ge "$IDLE" ] || fail "only $open_idle idle sessions were open under load"
grep -q "message not received within 4 s" "$tmp/serve.err" || fail "the drip was not cut"
grep -q "TSAFE_E_FORMAT" "$tmp/serve.err" || fail "the garbage session did not fail on its format"
grep -Eq "connection closed by peer|send failed|receive failed" "$tmp/serve.err" ||
    fail "the killed client's session did not end on its socket"
[ -s "$tmp/garbage.reply" ] || fail "the garbage sender got no ERROR frame"
[ "$fds_end" -eq "$fds_start" ] || fail "server fds $fds_end after the run, $fds_start before"
if [ "${LOAD_TIMING:-1}" != 0 ]; then
    # +12 MiB: what glibc keeps of the loaded run's heap (66 sessions'
    # buffers freed between live ones; malloc_trim returns whole free pages
    # only) measured 2.2-10.8 MB on 2026-11-27, at 7cb3b38 as at HEAD; a
    # leak of 200 KB a session still fails it, and the SAN suites' leak
    # checks see smaller ones
    awk -v s="$rss_start" -v e="$rss_end" 'BEGIN { exit !(e <= s * 1.10 + 12288) }' ||
        fail "server RSS $rss_end kB after the run, $rss_start kB before"
    awk -v u="$p99_u" -v l="$p99_l" 'BEGIN { exit !(l <= 2 * u + 1) }' ||
        fail "loaded p99 $p99_l ms above 2x the unloaded $p99_u ms"
fi
gates="fds and RSS back"
[ "${LOAD_TIMING:-1}" = 0 ] && gates="fds back; p99 and RSS not gated (LOAD_TIMING=0)"
echo "serve-load-test: PASS (every delta of its own adapter, rel_l2 <= $TOL; p99 loaded/unloaded" \
    "$(awk -v u="$p99_u" -v l="$p99_l" 'BEGIN { printf "%.2f", l / u }'); $gates; drained, exit 0)"
