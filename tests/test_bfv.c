/* Exact BFV coefficient encryption (include/tensafe/bfv.h) against an
 * independent reference: the negacyclic product m*P mod t computed with
 * plain 128-bit integer loops. Also: noise after sealing within the bound
 * the sealed planner assumes, serialization round trips and every reader's
 * refusal of bad bytes, the security bound. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/backend_impl.h"
#include "tensafe/bfv.h"
#include "tensafe/bfv_backend.h"
#include "support/tsafe_test_rng.h"

static const tsafe_bfv_params k_params = {12, 49, 60, 37, 0};

typedef struct {
    tsafe_bfv_context *c;
    tsafe_bfv_secret_key *sk;
    tsafe_bfv_public_key *pk;
    size_t n;
    uint64_t t;
} fixture;

static void fx_open(fixture *f, const tsafe_bfv_params *p)
{
    memset(f, 0, sizeof *f);
    assert_int_equal(tsafe_bfv_context_create(p, &f->c), TSAFE_OK);
    assert_int_equal(tsafe_bfv_secret_key_generate(f->c, NULL, &f->sk), TSAFE_OK);
    assert_int_equal(tsafe_bfv_public_key_generate(f->c, f->sk, NULL, &f->pk), TSAFE_OK);
    f->n = tsafe_bfv_context_n(f->c);
    f->t = 1ull << p->t_bits;
}

static void fx_close(fixture *f)
{
    tsafe_bfv_public_key_free(f->pk);
    tsafe_bfv_secret_key_free(f->sk);
    tsafe_bfv_context_free(f->c);
}

/* sum over chunks of x_c * P_c in Z[X]/(X^N+1), coefficient k, mod t */
static uint64_t ref_coeff(size_t n, uint64_t t, int64_t *const *x,
                          int64_t *const *p, size_t chunks, size_t k)
{
    __int128 acc = 0;
    for (size_t c = 0; c < chunks; c++)
        for (size_t j = 0; j < n; j++) {
            if (!x[c][j])
                continue;
            size_t i = (k + n - j) % n; /* x_j * p_i lands at j + i */
            __int128 term = (__int128)x[c][j] * p[c][i];
            acc += j <= k ? term : -term;
        }
    __int128 r = acc % (__int128)t;
    if (r < 0)
        r += t;
    return (uint64_t)r;
}

static void products_match_reference(void **state)
{
    (void)state;
    fixture f;
    fx_open(&f, &k_params);
    enum { CHUNKS = 3, READS = 24 };
    int64_t *x[CHUNKS], *p[CHUNKS];
    tsafe_bfv_ct *ct;
    tsafe_bfv_plain *pt[CHUNKS];
    tsafe_bfv_acc *acc;
    tsafe_bfv_sealed *res;
    assert_int_equal(tsafe_bfv_ct_create(f.c, &ct), TSAFE_OK);
    assert_int_equal(tsafe_bfv_acc_create(f.c, &acc), TSAFE_OK);
    assert_int_equal(tsafe_bfv_sealed_create(f.c, READS, &res), TSAFE_OK);
    size_t ct_len = tsafe_bfv_ct_bytes(f.c);
    uint8_t *wire = malloc(ct_len);
    for (size_t c = 0; c < CHUNKS; c++) {
        x[c] = calloc(f.n, sizeof **x);
        p[c] = calloc(f.n, sizeof **p);
        for (size_t k = 0; k < f.n; k++) {
            x[c][k] = (int64_t)tsafe_test_below(4096) - 2048;   /* 12-bit */
            p[c][k] = (int64_t)tsafe_test_below(4096) - 2048;
        }
        assert_int_equal(tsafe_bfv_plain_create(f.c, p[c], f.n, &pt[c]), TSAFE_OK);
        /* through the wire, as the server sees it */
        assert_int_equal(tsafe_bfv_encrypt(f.c, f.sk, x[c], f.n, NULL, ct), TSAFE_OK);
        assert_int_equal(tsafe_bfv_ct_write(f.c, ct, wire, ct_len), TSAFE_OK);
        assert_int_equal(tsafe_bfv_ct_read(f.c, wire, ct_len, ct), TSAFE_OK);
        assert_int_equal(tsafe_bfv_acc_mul_add(acc, ct, pt[c]), TSAFE_OK);
    }
    uint32_t pos[READS];
    uint64_t mask[READS], m[READS];
    double noise[READS];
    for (size_t k = 0; k < READS; k++) { /* distinct positions */
        pos[k] = (uint32_t)(k * (f.n / READS) + tsafe_test_below(f.n / READS));
        mask[k] = tsafe_test_below(f.t);
    }
    /* a repeated position is refused (it would be masked twice) */
    uint32_t twice[2] = {pos[0], pos[0]};
    assert_int_equal(tsafe_bfv_seal(f.c, acc, f.pk, twice, mask, 2, 20, NULL, res), TSAFE_E_ARG);
    /* flood 2^20: far below q0/(2t) ~ 2^11 after the 2^60 switch */
    assert_int_equal(tsafe_bfv_seal(f.c, acc, f.pk, pos, mask, READS, 20, NULL, res),
                     TSAFE_OK);
    size_t rlen = tsafe_bfv_sealed_bytes(f.c, READS);
    uint8_t *rw = malloc(rlen);
    assert_int_equal(tsafe_bfv_sealed_write(f.c, res, rw, rlen), TSAFE_OK);
    assert_int_equal(tsafe_bfv_sealed_read(f.c, rw, rlen, READS, res), TSAFE_OK);
    assert_int_equal(tsafe_bfv_decrypt_reads(f.c, f.sk, res, pos, READS, m), TSAFE_OK);
    assert_int_equal(tsafe_bfv_decrypt_noise(f.c, f.sk, res, pos, READS, noise), TSAFE_OK);
    double bound = (double)tsafe_bfv_context_prime(f.c, 0) / (2.0 * (double)f.t);
    for (size_t k = 0; k < READS; k++) {
        uint64_t want = (ref_coeff(f.n, f.t, x, p, CHUNKS, pos[k]) + mask[k]) % f.t;
        assert_true(m[k] == want);
        assert_true(fabs(noise[k]) < bound / 4);
    }
    for (size_t c = 0; c < CHUNKS; c++) {
        tsafe_bfv_plain_free(pt[c]);
        free(x[c]);
        free(p[c]);
    }
    free(wire);
    free(rw);
    tsafe_bfv_sealed_free(res);
    tsafe_bfv_acc_free(acc);
    tsafe_bfv_ct_free(ct);
    fx_close(&f);
}

/* The objects of one product: a ciphertext, the plaintext of p (n
 * coefficients), an accumulator and room for `reads` sealed reads. */
typedef struct {
    tsafe_bfv_ct *ct;
    tsafe_bfv_plain *pt;
    tsafe_bfv_acc *acc;
    tsafe_bfv_sealed *res;
} product;

static void product_open(const fixture *f, const int64_t *p, size_t reads, product *o)
{
    assert_int_equal(tsafe_bfv_ct_create(f->c, &o->ct), TSAFE_OK);
    assert_int_equal(tsafe_bfv_plain_create(f->c, p, f->n, &o->pt), TSAFE_OK);
    assert_int_equal(tsafe_bfv_acc_create(f->c, &o->acc), TSAFE_OK);
    assert_int_equal(tsafe_bfv_sealed_create(f->c, reads, &o->res), TSAFE_OK);
}

static void product_close(product *o)
{
    tsafe_bfv_sealed_free(o->res);
    tsafe_bfv_acc_free(o->acc);
    tsafe_bfv_plain_free(o->pt);
    tsafe_bfv_ct_free(o->ct);
}

/* tsafe_bfv_encrypt_frac: x at the scale Q / (t 2^f) times an integer
 * plaintext p decrypts to round(x p / 2^f) mod t (the reference: the same
 * negacyclic sums in 128-bit integers, then the rounding), within one
 * unit only where x p / 2^f lies within a quarter of a half-integer (the
 * noise decides there; it is far below a quarter step). Plain encryption
 * is f = 0, and a fraction too wide is refused. */
static void fractional_scale_reads_top_bits(void **state)
{
    (void)state;
    fixture f;
    fx_open(&f, &k_params);
    enum { READS = 32, F = 11 };
    int64_t *x = calloc(f.n, sizeof *x), *p = calloc(f.n, sizeof *p);
    for (size_t k = 0; k < 64; k++) /* short vectors: a sealed round-1 chunk */
        x[k] = (int64_t)tsafe_test_below(1u << 14) - (1 << 13);
    for (size_t k = 0; k < 64; k++)
        p[k] = (int64_t)tsafe_test_below(1u << 16) - (1 << 15);
    product o;
    product_open(&f, p, READS, &o);
    assert_int_equal(tsafe_bfv_encrypt_frac(f.c, f.sk, x, 64, F, NULL, o.ct), TSAFE_OK);
    assert_int_equal(tsafe_bfv_acc_mul_add(o.acc, o.ct, o.pt), TSAFE_OK);
    uint32_t pos[READS];
    uint64_t m[READS];
    for (size_t k = 0; k < READS; k++)
        pos[k] = (uint32_t)(4 * k + 1);
    assert_int_equal(tsafe_bfv_seal(f.c, o.acc, f.pk, pos, NULL, READS, 20, NULL, o.res),
                     TSAFE_OK);
    assert_int_equal(tsafe_bfv_decrypt_reads(f.c, f.sk, o.res, pos, READS, m), TSAFE_OK);
    int64_t *xs[1] = {x}, *ps[1] = {p};
    size_t exact = 0;
    for (size_t k = 0; k < READS; k++) {
        /* the full product (below 2^37 < t: no wrap), then its rounding */
        uint64_t full = ref_coeff(f.n, 1ull << 62, xs, ps, 1, pos[k]);
        int64_t v = full >= 1ull << 61 ? (int64_t)full - (int64_t)(1ull << 62) : (int64_t)full;
        double r = ldexp((double)v, -F), frac = r - floor(r);
        int64_t want = (int64_t)floor(r + 0.5);
        int64_t got = m[k] >= f.t / 2 ? (int64_t)m[k] - (int64_t)f.t : (int64_t)m[k];
        if (fabs(frac - 0.5) > 0.25) {
            assert_int_equal(got, want);
            exact++;
        } else
            assert_true(llabs(got - want) <= 1);
    }
    assert_true(exact >= READS / 4);
    /* f = 0 is the plain encoding (the same bytes for one seed); a
     * fraction past the limit is refused */
    uint8_t seed[32] = {7};
    size_t ctl = tsafe_bfv_ct_bytes(f.c);
    uint8_t *b0 = malloc(ctl), *b1 = malloc(ctl);
    tsafe_bfv_ct *plain;
    assert_int_equal(tsafe_bfv_ct_create(f.c, &plain), TSAFE_OK);
    assert_int_equal(tsafe_bfv_encrypt(f.c, f.sk, x, 64, seed, plain), TSAFE_OK);
    assert_int_equal(tsafe_bfv_encrypt_frac(f.c, f.sk, x, 64, 0, seed, o.ct), TSAFE_OK);
    assert_int_equal(tsafe_bfv_ct_write(f.c, plain, b0, ctl), TSAFE_OK);
    assert_int_equal(tsafe_bfv_ct_write(f.c, o.ct, b1, ctl), TSAFE_OK);
    assert_memory_equal(b0, b1, ctl);
    tsafe_bfv_ct_free(plain);
    free(b0);
    free(b1);
    assert_int_equal(tsafe_bfv_encrypt_frac(f.c, f.sk, x, 64, TSAFE_BFV_MAX_FRAC_BITS + 1, NULL,
                                            o.ct), TSAFE_E_RANGE);
    product_close(&o);
    free(x);
    free(p);
    fx_close(&f);
}

/* TSAFE_BFV_FLOOD_STEP: a flood of one whole plaintext step. Every read
 * decrypts to the product within +-1 (mod t), and what lies below a step
 * (tsafe_bfv_decrypt_noise) spreads over the whole step: over 8 sealings
 * of 32 reads, |noise| reaches above 0.45 of a step and averages about a
 * quarter (uniform). A flood of 70 bits (a quarter step on each side, the
 * sealed plans' flood1 until 2026-11-27) stays below 0.26 and fails it. */
static void step_flood_spans_a_step(void **state)
{
    (void)state;
    fixture f;
    fx_open(&f, &k_params);
    enum { READS = 32, SEALS = 8 };
    int64_t *x = calloc(f.n, sizeof *x), *p = calloc(f.n, sizeof *p);
    for (size_t k = 0; k < f.n; k++) {
        x[k] = (int64_t)tsafe_test_below(4096) - 2048;
        p[k] = (int64_t)tsafe_test_below(4096) - 2048;
    }
    product o;
    product_open(&f, p, READS, &o);
    assert_int_equal(tsafe_bfv_encrypt(f.c, f.sk, x, f.n, NULL, o.ct), TSAFE_OK);
    int64_t *xs[1] = {x}, *ps[1] = {p};
    double step = (double)tsafe_bfv_context_prime(f.c, 0) / (double)f.t, top = 0, sum = 0;
    uint32_t pos[READS];
    uint64_t mask[READS], m[READS];
    double noise[READS];
    for (int sl = 0; sl < SEALS; sl++) {
        tsafe_bfv_acc_zero(o.acc);
        assert_int_equal(tsafe_bfv_acc_mul_add(o.acc, o.ct, o.pt), TSAFE_OK);
        for (size_t k = 0; k < READS; k++) {
            pos[k] = (uint32_t)(k * (f.n / READS) + tsafe_test_below(f.n / READS));
            mask[k] = tsafe_test_below(f.t);
        }
        assert_int_equal(tsafe_bfv_seal(f.c, o.acc, f.pk, pos, mask, READS, TSAFE_BFV_FLOOD_STEP,
                                        NULL, o.res), TSAFE_OK);
        assert_int_equal(tsafe_bfv_decrypt_reads(f.c, f.sk, o.res, pos, READS, m), TSAFE_OK);
        assert_int_equal(tsafe_bfv_decrypt_noise(f.c, f.sk, o.res, pos, READS, noise), TSAFE_OK);
        for (size_t k = 0; k < READS; k++) {
            uint64_t want = (ref_coeff(f.n, f.t, xs, ps, 1, pos[k]) + mask[k]) % f.t;
            uint64_t d = (m[k] - want) & (f.t - 1);
            assert_true(d == 0 || d == 1 || d == f.t - 1); /* within +-1 */
            top = fmax(top, fabs(noise[k]) / step);
            sum += fabs(noise[k]) / step;
        }
    }
    double mean = sum / (READS * SEALS);
    printf("# step flood: |noise| up to %.3f of a step, mean %.3f (uniform: 0.5, 0.25)\n", top,
           mean);
    assert_true(top > 0.45 && top <= 0.5 + 1e-3);
    assert_true(mean > 0.2 && mean < 0.3);
    product_close(&o);
    free(x);
    free(p);
    fx_close(&f);
}

/* Many reads take the NTT path of the decryption; it must agree. */
static void many_reads_match_reference(void **state)
{
    (void)state;
    fixture f;
    fx_open(&f, &k_params);
    size_t reads = 300;
    int64_t *x = calloc(f.n, sizeof *x), *p = calloc(f.n, sizeof *p);
    for (size_t k = 0; k < 64; k++)
        x[k] = (int64_t)tsafe_test_below(1u << 20) - (1 << 19);
    for (size_t k = 0; k < f.n; k++)
        p[k] = (int64_t)tsafe_test_below(512) - 256;
    product o;
    product_open(&f, p, reads, &o);
    tsafe_bfv_ct *ct = o.ct;
    tsafe_bfv_plain *pt = o.pt;
    tsafe_bfv_acc *acc = o.acc;
    tsafe_bfv_sealed *res = o.res;
    uint8_t seed[32];
    tsafe_test_seed32(seed);
    assert_int_equal(tsafe_bfv_encrypt(f.c, f.sk, x, 64, seed, ct), TSAFE_OK);
    assert_int_equal(tsafe_bfv_acc_mul_add(acc, ct, pt), TSAFE_OK);
    uint32_t *pos = malloc(reads * sizeof *pos);
    uint64_t *m = malloc(reads * sizeof *m);
    for (size_t k = 0; k < reads; k++)
        pos[k] = (uint32_t)(k * 13 % f.n);
    assert_int_equal(tsafe_bfv_seal(f.c, acc, f.pk, pos, NULL, reads, 30, seed, res), TSAFE_OK);
    assert_int_equal(tsafe_bfv_decrypt_reads(f.c, f.sk, res, pos, reads, m), TSAFE_OK);
    int64_t *xs[1] = {x}, *ps[1] = {p};
    for (size_t k = 0; k < reads; k++)
        assert_true(m[k] == ref_coeff(f.n, f.t, xs, ps, 1, pos[k]));
    free(pos);
    free(m);
    free(x);
    free(p);
    product_close(&o);
    fx_close(&f);
}

static void refuses_bad_params_and_values(void **state)
{
    (void)state;
    tsafe_bfv_context *c = NULL;
    tsafe_bfv_params p = k_params;
    p.gap_bits = 61; /* 49 + 61 > 109 */
    assert_int_equal(tsafe_bfv_context_create(&p, &c), TSAFE_E_INSECURE);
    assert_null(c);
    p.flags = TSAFE_BFV_INSECURE_FOR_TESTS;
    assert_int_equal(tsafe_bfv_context_create(&p, &c), TSAFE_OK);
    tsafe_bfv_context_free(c);
    p = k_params;
    p.t_bits = 45; /* leaves no room for noise under q0 */
    assert_int_equal(tsafe_bfv_context_create(&p, &c), TSAFE_E_PARAMS);
    p = k_params;
    p.log_n = 9;
    assert_int_equal(tsafe_bfv_context_create(&p, &c), TSAFE_E_PARAMS);
    assert_int_equal(tsafe_bfv_context_create(NULL, &c), TSAFE_E_NULL);

    fixture f;
    fx_open(&f, &k_params);
    tsafe_bfv_ct *ct;
    assert_int_equal(tsafe_bfv_ct_create(f.c, &ct), TSAFE_OK);
    int64_t big = (int64_t)(f.t / 2);
    assert_int_equal(tsafe_bfv_encrypt(f.c, f.sk, &big, 1, NULL, ct), TSAFE_E_VALUE_RANGE);
    big = -big; /* -t/2 is the lowest allowed */
    assert_int_equal(tsafe_bfv_encrypt(f.c, f.sk, &big, 1, NULL, ct), TSAFE_OK);
    tsafe_bfv_ct_free(ct);
    fx_close(&f);
}

static void readers_refuse_bad_bytes(void **state)
{
    (void)state;
    fixture f;
    fx_open(&f, &k_params);
    size_t len = tsafe_bfv_public_key_bytes(f.c);
    uint8_t *buf = malloc(len + 1);
    assert_int_equal(tsafe_bfv_public_key_write(f.c, f.pk, buf, len), TSAFE_OK);
    tsafe_bfv_public_key *pk2 = NULL;
    assert_int_equal(tsafe_bfv_public_key_read(f.c, buf, len - 1, &pk2), TSAFE_E_TRUNCATED);
    assert_int_equal(tsafe_bfv_public_key_read(f.c, buf, len + 1, &pk2), TSAFE_E_FORMAT);
    assert_null(pk2);
    /* a coefficient >= q0: all ones in the first packed limb */
    memset(buf + TSAFE_BFV_SEED_BYTES, 0xff, 16);
    assert_int_equal(tsafe_bfv_public_key_read(f.c, buf, len, &pk2), TSAFE_E_FORMAT);
    assert_int_equal(tsafe_bfv_public_key_write(f.c, f.pk, buf, len), TSAFE_OK);
    assert_int_equal(tsafe_bfv_public_key_read(f.c, buf, len, &pk2), TSAFE_OK);
    /* the round trip encrypts zero the same way: compare written bytes */
    uint8_t *again = malloc(len);
    assert_int_equal(tsafe_bfv_public_key_write(f.c, pk2, again, len), TSAFE_OK);
    assert_memory_equal(buf, again, len);
    tsafe_bfv_public_key_free(pk2);
    free(again);

    tsafe_bfv_sealed *res;
    assert_int_equal(tsafe_bfv_sealed_create(f.c, 4, &res), TSAFE_OK);
    size_t rl = tsafe_bfv_sealed_bytes(f.c, 4);
    uint8_t *rb = calloc(1, rl);
    assert_int_equal(tsafe_bfv_sealed_read(f.c, rb, rl, 5, res), TSAFE_E_RANGE);
    assert_int_equal(tsafe_bfv_sealed_read(f.c, rb, rl - 1, 4, res), TSAFE_E_TRUNCATED);
    rb[rl - 1] = 0xff; /* padding or value bits past q0 */
    assert_int_not_equal(tsafe_bfv_sealed_read(f.c, rb, rl, 4, res), TSAFE_OK);
    free(rb);
    tsafe_bfv_sealed_free(res);
    free(buf);
    fx_close(&f);
}

/* A backend that forwards to the CPU backend but hides its host memory, so
 * the staging paths (upload / download / added error polynomial) of the
 * backend functions run too. */
static struct tsafe_backend_i g_hidden_iface[2];
static void hidden_destroy(tsafe_backend *b) { (void)b; } /* the CPU backend owns the state */

/* without_read: no ntt_read either (a backend of API 2's operations: the
 * sealer takes the inverse NTT of c0 and switches it whole) */
static tsafe_backend *hidden_backend(tsafe_backend *cpu, const tsafe_bfv_context *c,
                                     int without_read)
{
    struct tsafe_backend_i *f = &g_hidden_iface[without_read];
    *f = *cpu->iface;
    f->host_words = NULL;
    f->destroy = hidden_destroy;
    if (without_read)
        f->ntt_read = NULL;
    tsafe_backend *b = NULL;
    assert_int_equal(tsafe_backend_init_bfv(&b, TSAFE_BACKEND_API_VERSION, f, cpu->ctx, c),
                     TSAFE_OK);
    return b;
}

/* The sealed server's ring work on a backend (bfv_backend.h) gives the
 * bytes of the direct functions for the same ciphertexts and seeds: on the
 * CPU backend (host memory, borrowed plaintexts), on one without host
 * access (copies, uploads, an added error polynomial) and on one without
 * reads from NTT form. rows: the reads are a block's rows (c0 read from
 * NTT form by coset sums), else scattered (the backend's inverse NTT). */
static void backend_path_at(const tsafe_bfv_params *params, int rows)
{
    fixture f;
    fx_open(&f, params);
    uint32_t L = tsafe_bfv_context_limbs(f.c);
    size_t words = 2 * (size_t)L * f.n; /* a ciphertext */
    enum { CHUNKS = 3, READS = 9 };
    size_t ct_len = tsafe_bfv_ct_bytes(f.c);
    uint8_t *wire[CHUNKS];
    tsafe_bfv_ct *ct[CHUNKS];
    tsafe_bfv_plain *pt[CHUNKS];
    int64_t *coeff = calloc(f.n, sizeof *coeff), *xv = calloc(f.n, sizeof *xv);
    for (size_t c = 0; c < CHUNKS; c++) {
        for (size_t k = 0; k < f.n; k++) {
            xv[k] = (int64_t)tsafe_test_below(4096) - 2048;
            coeff[k] = (int64_t)tsafe_test_below(1u << 20) - (1 << 19);
        }
        assert_int_equal(tsafe_bfv_plain_create(f.c, coeff, f.n, &pt[c]), TSAFE_OK);
        assert_int_equal(tsafe_bfv_ct_create(f.c, &ct[c]), TSAFE_OK);
        assert_int_equal(tsafe_bfv_encrypt(f.c, f.sk, xv, f.n, NULL, ct[c]), TSAFE_OK);
        wire[c] = malloc(ct_len);
        assert_int_equal(tsafe_bfv_ct_write(f.c, ct[c], wire[c], ct_len), TSAFE_OK);
        assert_int_equal(tsafe_bfv_ct_read(f.c, wire[c], ct_len, ct[c]), TSAFE_OK);
    }
    uint32_t pos[READS];
    uint64_t mask[READS];
    const size_t nr = rows ? 8 : READS; /* rows: 8 rows of f.n / 8 */
    for (size_t k = 0; k < READS; k++) {
        pos[k] = rows ? (uint32_t)((k + 1) * (f.n / 8) - 1)
                      : (uint32_t)(k * 400 + tsafe_test_below(400));
        mask[k] = tsafe_test_below(f.t);
    }
    uint8_t seed[32];
    for (size_t i = 0; i < 32; i++)
        seed[i] = (uint8_t)tsafe_test_below(256);
    /* direct */
    tsafe_bfv_acc *acc;
    tsafe_bfv_sealed *want, *got;
    assert_int_equal(tsafe_bfv_acc_create(f.c, &acc), TSAFE_OK);
    assert_int_equal(tsafe_bfv_sealed_create(f.c, READS, &want), TSAFE_OK);
    assert_int_equal(tsafe_bfv_sealed_create(f.c, READS, &got), TSAFE_OK);
    for (size_t c = 0; c < CHUNKS; c++)
        assert_int_equal(tsafe_bfv_acc_mul_add(acc, ct[c], pt[c]), TSAFE_OK);
    assert_int_equal(tsafe_bfv_seal(f.c, acc, f.pk, pos, mask, nr, 70, seed, want), TSAFE_OK);
    size_t rlen = tsafe_bfv_sealed_bytes(f.c, nr);
    uint8_t *wbytes = malloc(rlen), *gbytes = malloc(rlen);
    assert_int_equal(tsafe_bfv_sealed_write(f.c, want, wbytes, rlen), TSAFE_OK);

    tsafe_backend *cpu;
    assert_int_equal(tsafe_backend_cpu_create_bfv(f.c, &cpu), TSAFE_OK);
    tsafe_backend *hidden = hidden_backend(cpu, f.c, 0), *noread = hidden_backend(cpu, f.c, 1);
    tsafe_backend *bes[3] = {cpu, hidden, noread};
    for (int which = 0; which < 3; which++) {
        tsafe_backend *b = bes[which];
        tsafe_buffer *x[CHUNKS], *w[CHUNKS], *accb, *pk;
        for (size_t c = 0; c < CHUNKS; c++) {
            assert_int_equal(tsafe_buffer_alloc(b, 2, L, &x[c]), TSAFE_OK);
            assert_int_equal(tsafe_bfv_ct_read_buffer(f.c, wire[c], ct_len, x[c]), TSAFE_OK);
            assert_int_equal(tsafe_bfv_plain_operand(pt[c], b, &w[c]), TSAFE_OK);
        }
        /* a bad coefficient is refused on either path */
        uint8_t *bad = malloc(ct_len);
        memcpy(bad, wire[0], ct_len);
        memset(bad + 32, 0xff, 8);
        assert_int_equal(tsafe_bfv_ct_read_buffer(f.c, bad, ct_len, x[0]), TSAFE_E_FORMAT);
        assert_int_equal(tsafe_bfv_ct_read_buffer(f.c, bad, ct_len - 1, x[0]), TSAFE_E_TRUNCATED);
        free(bad);
        assert_int_equal(tsafe_bfv_ct_read_buffer(f.c, wire[0], ct_len, x[0]), TSAFE_OK);
        assert_int_equal(tsafe_buffer_alloc(b, 2, L, &accb), TSAFE_OK);
        assert_int_equal(tsafe_bfv_public_key_operand(f.pk, b, &pk), TSAFE_OK);
        const tsafe_buffer *as[CHUNKS] = {x[0], x[1], x[2]}, *ws[CHUNKS] = {w[0], w[1], w[2]};
        tsafe_backend_mac job = {accb, CHUNKS, as, ws, 0};
        assert_int_equal(tsafe_backend_mul_acc(b, &job, 1), TSAFE_OK);
        tsafe_bfv_sealer *sl;
        assert_int_equal(tsafe_bfv_sealer_create(f.c, b, &sl), TSAFE_OK);
        uint32_t twice[2] = {pos[0], pos[0]};
        assert_int_equal(tsafe_bfv_seal_buffer(sl, accb, pk, twice, mask, 2, 70, seed, got),
                         TSAFE_E_ARG);
        assert_int_equal(tsafe_bfv_seal_buffer(sl, accb, pk, pos, mask, nr, 70, seed, got),
                         TSAFE_OK);
        assert_int_equal(tsafe_bfv_sealed_write(f.c, got, gbytes, rlen), TSAFE_OK);
        assert_memory_equal(wbytes, gbytes, rlen);
        /* with a prepared encryption of zero (the offline half): other
         * bytes, the same decryption, one fewer ready */
        uint64_t mw[READS], mg[READS];
        assert_int_equal(tsafe_backend_mul_acc(b, &(tsafe_backend_mac){accb, CHUNKS, as, ws, 1}, 1),
                         TSAFE_OK);
        assert_int_equal(tsafe_bfv_seal_buffer(sl, accb, pk, pos, mask, nr, 20, seed, got),
                         TSAFE_OK); /* flood 2^20: decryptable at either gap */
        assert_int_equal(tsafe_bfv_decrypt_reads(f.c, f.sk, got, pos, nr, mw), TSAFE_OK);
        uint8_t *inline20 = malloc(rlen);
        assert_int_equal(tsafe_bfv_sealed_write(f.c, got, inline20, rlen), TSAFE_OK);
        assert_int_equal(tsafe_bfv_sealer_prepare(sl, pk, 2, NULL), TSAFE_OK);
        assert_int_equal(tsafe_bfv_sealer_ready(sl), 2);
        assert_int_equal(tsafe_backend_mul_acc(b, &(tsafe_backend_mac){accb, CHUNKS, as, ws, 1}, 1),
                         TSAFE_OK);
        assert_int_equal(tsafe_bfv_seal_buffer(sl, accb, pk, pos, mask, nr, 20, seed, got),
                         TSAFE_OK);
        assert_int_equal(tsafe_bfv_sealer_ready(sl), 1);
        assert_int_equal(tsafe_bfv_decrypt_reads(f.c, f.sk, got, pos, nr, mg), TSAFE_OK);
        assert_memory_equal(mw, mg, nr * sizeof *mw);
        assert_int_equal(tsafe_bfv_sealed_write(f.c, got, gbytes, rlen), TSAFE_OK);
        assert_memory_not_equal(inline20, gbytes, rlen);
        free(inline20);
        tsafe_bfv_sealer_drop(sl);
        assert_int_equal(tsafe_bfv_sealer_ready(sl), 0);
        /* a per-token plaintext encoded straight into an operand equals the
         * plaintext object's operand in its products */
        tsafe_buffer *enc, *once, *acc2, *acc3, *acc4;
        assert_int_equal(tsafe_buffer_alloc_operand(b, 1, L, &enc), TSAFE_OK);
        assert_int_equal(tsafe_bfv_plain_encode_buffer(f.c, coeff, f.n, enc), TSAFE_OK);
        assert_int_equal(tsafe_buffer_alloc(b, 1, L, &once), TSAFE_OK); /* Barrett path */
        assert_int_equal(tsafe_bfv_plain_encode_buffer(f.c, coeff, f.n, once), TSAFE_OK);
        assert_int_equal(tsafe_buffer_alloc(b, 2, L, &acc2), TSAFE_OK);
        assert_int_equal(tsafe_buffer_alloc(b, 2, L, &acc3), TSAFE_OK);
        assert_int_equal(tsafe_buffer_alloc(b, 2, L, &acc4), TSAFE_OK);
        const tsafe_buffer *a1[1] = {x[1]}, *w1[1] = {enc}, *w2[1] = {w[CHUNKS - 1]};
        const tsafe_buffer *w3[1] = {once};
        uint64_t *h2 = malloc(words * sizeof *h2), *h3 = malloc(words * sizeof *h3);
        /* acc3 and acc4 hold garbage: their jobs assign (acc = the sum) */
        for (size_t k = 0; k < words; k++)
            h2[k] = tsafe_test_below(tsafe_bfv_context_prime(f.c, (uint32_t)(k / f.n % L)));
        assert_int_equal(tsafe_buffer_upload(acc3, h2, words), TSAFE_OK);
        assert_int_equal(tsafe_buffer_upload(acc4, h2, words), TSAFE_OK);
        tsafe_backend_mac jobs[3] = {{acc2, 1, a1, w1, 0}, {acc3, 1, a1, w2, 1},
                                     {acc4, 1, a1, w3, 1}};
        assert_int_equal(tsafe_backend_mul_acc(b, jobs, 3), TSAFE_OK);
        assert_int_equal(tsafe_buffer_download(acc2, h2, words), TSAFE_OK);
        assert_int_equal(tsafe_buffer_download(acc3, h3, words), TSAFE_OK);
        assert_memory_equal(h2, h3, words * sizeof *h2);
        assert_int_equal(tsafe_buffer_download(acc4, h3, words), TSAFE_OK);
        assert_memory_equal(h2, h3, words * sizeof *h2);
        free(h2);
        free(h3);
        tsafe_buffer_free(enc);
        tsafe_buffer_free(once);
        tsafe_buffer_free(acc4);
        tsafe_buffer_free(acc2);
        tsafe_buffer_free(acc3);
        tsafe_bfv_sealer_free(sl);
        tsafe_buffer_free(pk);
        tsafe_buffer_free(accb);
        for (size_t c = 0; c < CHUNKS; c++) {
            tsafe_buffer_free(x[c]);
            tsafe_buffer_free(w[c]);
        }
    }
    tsafe_backend_free(hidden);
    tsafe_backend_free(noread);
    tsafe_backend_free(cpu);
    for (size_t c = 0; c < CHUNKS; c++) {
        tsafe_bfv_plain_free(pt[c]);
        tsafe_bfv_ct_free(ct[c]);
        free(wire[c]);
    }
    free(wbytes);
    free(gbytes);
    free(coeff);
    free(xv);
    tsafe_bfv_sealed_free(want);
    tsafe_bfv_sealed_free(got);
    tsafe_bfv_acc_free(acc);
    fx_close(&f);
}

static void backend_path_is_byte_identical(void **state)
{
    (void)state;
    /* three limbs (the protocol's: a 60-bit gap as two IFMA primes) and two */
    const tsafe_bfv_params two = {12, 49, 45, 37, 0};
    backend_path_at(&k_params, 1);
    backend_path_at(&k_params, 0);
    backend_path_at(&two, 1);
    backend_path_at(&two, 0);
}

int main(void)
{
    tsafe_test_rng_init("bfv");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(products_match_reference),
        cmocka_unit_test(step_flood_spans_a_step),
        cmocka_unit_test(fractional_scale_reads_top_bits),
        cmocka_unit_test(backend_path_is_byte_identical),
        cmocka_unit_test(many_reads_match_reference),
        cmocka_unit_test(refuses_bad_params_and_values),
        cmocka_unit_test(readers_refuse_bad_bytes),
    };
    return cmocka_run_group_tests_name("bfv", tests, NULL, NULL);
}
