#!/bin/sh
# Two-party smoke test over localhost: random PEFT adapters with rank and
# alpha patterns signed into packages (serve refuses unsigned adapters),
# `tensafe serve --once` in the background, `tensafe client` on a few rows,
# and the deltas compared with `tensafe lora apply --plain` (relative L2 <=
# 1e-3), in the default mode (sealed-private) on uniform, Gaussian and
# heavy-tailed-with-outlier weights (make-random --dist), then in `--mode
# sealed --no-dp`. Loopback only; every step is bounded by the tools'
# timeouts.
# Uses $TENSAFE if set, else `tensafe` from PATH. Prints one PASS/FAIL line
# per mode.
set -u
TENSAFE=${TENSAFE:-tensafe}
DIM=${SMOKE_DIM:-256}
ROWS=${SMOKE_ROWS:-4}
TOL=1e-3

fail() { echo "two-party-smoke: FAIL: $*"; exit 1; }

command -v "$TENSAFE" >/dev/null 2>&1 || fail "'$TENSAFE' not found (set TENSAFE or PATH)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tensafe-smoke.XXXXXX") || fail "mktemp"
srv_pid=""
cleanup() {
    if [ -n "$srv_pid" ]; then
        kill "$srv_pid" 2>/dev/null
        wait "$srv_pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$TENSAFE" adapter keygen --out "$tmp/sign" >"$tmp/key.log" 2>&1 ||
    fail "adapter keygen: $(tail -n1 "$tmp/key.log")"
"$TENSAFE" lora make-input --dim "$DIM" --rows "$ROWS" --max-abs 4 --out "$tmp/x.f32" \
    >"$tmp/input.log" 2>&1 || fail "lora make-input: $(tail -n1 "$tmp/input.log")"

# One signed adapter per weight distribution, and its plaintext deltas. v_proj
# gets rank 4 and alpha 12 through PEFT's rank_pattern / alpha_pattern,
# which the signed package carries.
for dist in uniform gaussian heavy; do
    "$TENSAFE" adapter make-random --out "$tmp/adapter-$dist" --dim "$DIM" --rank 8 \
        --modules q_proj,v_proj --rank-pattern v_proj=4 --alpha-pattern v_proj=12 \
        --dist "$dist" >"$tmp/make.log" 2>&1 ||
        fail "adapter make-random --dist $dist: $(tail -n1 "$tmp/make.log")"
    "$TENSAFE" adapter pack "$tmp/adapter-$dist" --key "$tmp/sign.key" --id "smoke-$dist" \
        --out "$tmp/adapter-$dist.pkg" >"$tmp/pack.log" 2>&1 ||
        fail "adapter pack: $(tail -n1 "$tmp/pack.log")"
    grep -q ", 1 rank / 1 alpha patterns," "$tmp/pack.log" ||
        fail "adapter pack: $(cat "$tmp/pack.log")"
    "$TENSAFE" lora apply --adapter "$tmp/adapter-$dist" --module q_proj,v_proj \
        --input "$tmp/x.f32" --output "$tmp/d_plain-$dist.f32" --plain >"$tmp/plain.log" 2>&1 ||
        fail "lora apply --plain: $(tail -n1 "$tmp/plain.log")"
done

# run_mode LABEL DIST SERVE_ARGS CLIENT_ARGS: serve --once the DIST adapter
# on a random high port (retried on another port if it cannot bind; it
# writes --port-file once it listens), one client run, deltas against --plain.
run_mode() {
    label=$1
    dist=$2
    shift
    port=""
    for attempt in 1 2 3 4 5 6 7 8; do
        try=$(( $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 20000 + 40000 ))
        rm -f "$tmp/port"
        # shellcheck disable=SC2086 # word splitting of the mode arguments
        "$TENSAFE" serve --adapter "$tmp/adapter-$dist.pkg" --trusted-key "$tmp/sign.pub" \
            --module q_proj,v_proj --port "$try" $2 \
            --port-file "$tmp/port" --once --timeout 30 --accept-timeout 60 \
            >"$tmp/serve.log" 2>&1 &
        srv_pid=$!
        i=0
        while [ $i -lt 200 ] && [ ! -s "$tmp/port" ] && kill -0 "$srv_pid" 2>/dev/null; do
            sleep 0.05
            i=$((i + 1))
        done
        if [ -s "$tmp/port" ]; then
            port=$(cat "$tmp/port")
            break
        fi
        kill "$srv_pid" 2>/dev/null
        wait "$srv_pid" 2>/dev/null
        srv_pid=""
    done
    [ -n "$port" ] || fail "$label: server did not start: $(tail -n1 "$tmp/serve.log")"

    # shellcheck disable=SC2086
    "$TENSAFE" client --port "$port" --input "$tmp/x.f32" --output "$tmp/d_he.f32" $3 \
        >"$tmp/client.log" 2>&1 || fail "$label: client: $(tail -n1 "$tmp/client.log")"
    wait "$srv_pid"
    src=$?
    srv_pid=""
    [ "$src" -eq 0 ] || fail "$label: server exited with $src: $(tail -n1 "$tmp/serve.log")"
    grep -q "^mode $label " "$tmp/client.log" || fail "$label: the client ran another mode"

    "$TENSAFE" lora compare "$tmp/d_he.f32" "$tmp/d_plain-$dist.f32" --tol "$TOL" >"$tmp/cmp.log" 2>&1 \
        || fail "$label: $(tail -n1 "$tmp/cmp.log")"
    rel=$(sed -n 's/^rel_l2 \([^ ]*\).*/\1/p' "$tmp/cmp.log")
    timing=$(sed -n 's/^\([0-9]* rows*, [0-9.]* ms\/row, [0-9.]* KiB sent, [0-9.]* KiB received\).*/\1/p' \
        "$tmp/client.log")
    echo "two-party-smoke: PASS $label, $dist weights ($timing over 127.0.0.1:$port, 2 modules d_in=$DIM rank 8 and 4 (patterns), rel_l2 $rel <= $TOL)"
}

run_mode sealed-private uniform "" ""
run_mode sealed-private gaussian "" ""
run_mode sealed-private heavy "" ""
# the opt-out of checked shares (docs/MALICIOUS_CLIENT.md): both sides
run_mode sealed-private gaussian "--unchecked-shares" "--unchecked-shares"
# sealed protects only against peers that follow the protocol: both sides
# opt in (docs/THREAT_MODEL.md)
run_mode sealed uniform "--mode sealed --semi-honest" "--mode sealed --semi-honest --no-dp"
