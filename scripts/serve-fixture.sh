# Sourced by scripts/serve-load-test.sh and scripts/haproxy-test.sh: the
# shared setup of a concurrent-serve test. Needs $TENSAFE, $tmp, $DIM and a
# fail() function.
#
# serve_fixture_adapters PREFIX: a signing key ($tmp/sign.key, .pub) and two
# random PEFT adapters a1 and a2 (d_in $DIM, rank 8, q_proj and v_proj) in
# $tmp/a1, $tmp/a2, packed and signed as $tmp/a1.pkg, $tmp/a2.pkg (package
# ids PREFIX-a1, PREFIX-a2); the log in $tmp/setup.log.
serve_fixture_adapters() {
    "$TENSAFE" adapter keygen --out "$tmp/sign" >"$tmp/setup.log" 2>&1 || fail "keygen"
    for a in a1 a2; do
        "$TENSAFE" adapter make-random --out "$tmp/$a" --dim "$DIM" --rank 8 \
            --modules q_proj,v_proj >>"$tmp/setup.log" 2>&1 &&
            "$TENSAFE" adapter pack "$tmp/$a" --key "$tmp/sign.key" --id "$1-$a" \
                --out "$tmp/$a.pkg" >>"$tmp/setup.log" 2>&1 ||
            fail "adapter $a: $(tail -n1 "$tmp/setup.log")"
    done
}

# adapter_of K: the adapter of client K (odd: a1, even: a2); other_of K: the other
adapter_of() { [ $(($1 % 2)) -eq 1 ] && echo a1 || echo a2; }
other_of() { [ $(($1 % 2)) -eq 1 ] && echo a2 || echo a1; }
