#!/bin/sh
# stories260K end to end with the installed tool: the base model's text, then
# the lora-max adapter's through `tensafe serve --module all` in sealed-private
# over 127.0.0.1, both streamed, 32 tokens from "Once upon a time". Checks
# SHA256SUMS first and says "skipped" when ../shared/models/stories260K (from
# the project root) is absent. test_generate compares every mode's ids with
# reference.json; this shows the two texts side by side in the CI log.
set -u
TENSAFE=${TENSAFE:-tensafe}
M=${MODEL_DIR:-../shared/models/stories260K}
[ -f "$M/SHA256SUMS" ] || { echo "generate-smoke: $M absent: skipped"; exit 0; }
(cd "$M" && sha256sum --quiet -c SHA256SUMS) || { echo "generate-smoke: FAIL: $M does not match SHA256SUMS"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tensafe-gen.XXXXXX") || exit 1
srv=""
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
gen() { "$TENSAFE" generate --model "$M/stories260K.bin" --tokenizer "$M/tok512.model" \
          --prompt "Once upon a time" --tokens 32 "$@"; }
echo "== base"
gen || { echo "generate-smoke: FAIL: base"; exit 1; }
"$TENSAFE" serve --adapter "$M/lora-max" --allow-unsigned --module all --port 0 \
    --port-file "$tmp/port" --once --accept-timeout 60 >"$tmp/serve.log" 2>&1 &
srv=$!
i=0; while [ ! -s "$tmp/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
[ -s "$tmp/port" ] || { echo "generate-smoke: FAIL: serve did not start: $(tail -n2 "$tmp/serve.log")"; exit 1; }
echo "== lora-max, sealed-private over 127.0.0.1"
gen --server "127.0.0.1:$(cat "$tmp/port")" > "$tmp/out.txt" || { cat "$tmp/out.txt"; echo "generate-smoke: FAIL: adapted"; exit 1; }
cat "$tmp/out.txt"
wait "$srv"; rc=$?; srv=""
[ $rc -eq 0 ] || { echo "generate-smoke: FAIL: serve exit $rc: $(tail -n2 "$tmp/serve.log")"; exit 1; }
grep -q "Max" "$tmp/out.txt" || { echo "generate-smoke: FAIL: the adapted text does not name Max"; exit 1; }
echo "generate-smoke: PASS"
