/* The residue bit packer of every serializer (libtensafe-he-core/src/
 * common/bitpack.c: word-wise for widths up to 57 bits, a bit stream above)
 * against a bit-by-bit reference: the same bytes for every width 1..64 and
 * lengths around the word-wise path's tail, round trips, and the reader's
 * refusals (a value >= q, nonzero padding bits, short input). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../libtensafe-he-core/src/common/bitpack.h"
#include "support/tsafe_test_rng.h"

/* bit j of value k at bit k*bits + j of the stream, LSB first */
static void reference_pack(uint8_t *out, size_t len, const uint64_t *v, size_t n,
                           uint32_t bits)
{
    memset(out, 0, len);
    for (size_t k = 0; k < n; k++)
        for (uint32_t j = 0; j < bits; j++)
            if ((v[k] >> j) & 1) {
                size_t at = k * bits + j;
                out[at / 8] |= (uint8_t)(1u << (at % 8));
            }
}

static void check_width(uint32_t bits, size_t n)
{
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    size_t len = (n * bits + 7) / 8;
    uint64_t *v = malloc((n ? n : 1) * sizeof *v), *back = malloc((n ? n : 1) * sizeof *back);
    uint8_t *want = malloc(len + 1), *got = malloc(len + 1);
    assert_true(v && back && want && got);
    for (size_t k = 0; k < n; k++)
        v[k] = tsafe_test_u64() & mask;
    if (n) /* all ones at the very end (64 bits: one below, q = 2^64 - 1) */
        v[n - 1] = bits == 64 ? mask - 1 : mask;
    for (size_t k = 0; bits == 64 && k + 1 < n; k++)
        if (v[k] == mask)
            v[k]--;
    reference_pack(want, len, v, n, bits);
    tsafe_writer w = {got, len, 0};
    tsafe_pack_bits(&w, v, n, bits);
    assert_int_equal(w.pos, len);
    assert_memory_equal(got, want, len);
    /* round trip, with q above every value */
    tsafe_reader r = {got, len, 0};
    assert_int_equal(tsafe_unpack_bits(&r, back, n, bits, mask == ~0ull ? ~0ull : mask + 1),
                     TSAFE_OK);
    assert_int_equal(r.pos, len);
    assert_memory_equal(back, v, n * sizeof *v);
    if (n && bits > 1 && bits < 64) {
        /* the last value equals q: refused, nothing consumed */
        tsafe_reader r2 = {got, len, 0};
        assert_int_equal(tsafe_unpack_bits(&r2, back, n, bits, mask), TSAFE_E_FORMAT);
        assert_int_equal(r2.pos, 0);
        /* short input */
        tsafe_reader r3 = {got, len - 1, 0};
        assert_int_equal(tsafe_unpack_bits(&r3, back, n, bits, ~0ull), TSAFE_E_TRUNCATED);
    }
    unsigned used = (unsigned)((n * bits) % 8);
    if (used) { /* a padding bit set */
        got[len - 1] |= (uint8_t)(1u << used);
        tsafe_reader r4 = {got, len, 0};
        assert_int_equal(tsafe_unpack_bits(&r4, back, n, bits, ~0ull), TSAFE_E_FORMAT);
    }
    /* a writer too small is poisoned, nothing written past it */
    if (len) {
        uint8_t small[8];
        tsafe_writer ws = {small, len - 1 < sizeof small ? len - 1 : sizeof small, 0};
        if (ws.cap < len) {
            tsafe_pack_bits(&ws, v, n, bits);
            assert_true(ws.pos > ws.cap);
        }
    }
    free(v), free(back), free(want), free(got);
}

static void every_width_matches_reference(void **state)
{
    (void)state;
    for (uint32_t bits = 1; bits <= 64; bits++) {
        const size_t ns[] = {0, 1, 2, 7, 8, 9, 63, 64, 65, 4096, 4096 + (size_t)tsafe_test_below(97)};
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            check_width(bits, ns[i]);
    }
}

int main(void)
{
    tsafe_test_rng_init("bitpack");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_width_matches_reference),
    };
    return cmocka_run_group_tests_name("bitpack", tests, NULL, NULL);
}
