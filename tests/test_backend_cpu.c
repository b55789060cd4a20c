/* The CPU backend through the public backend API (tensafe/backend.h):
 * buffers, batched NTT against a direct O(N^2) evaluation at the documented
 * points and a schoolbook negacyclic product (128-bit integers), element-wise
 * ops against plain modular loops, rescale against a GMP reference
 * (nearest integer of X / q_last, per limb) and against tsafe_ckks_rescale,
 * mul_acc against plain 128-bit multiply-accumulate loops and the
 * coefficient-form mod_switch against the same GMP rounding (CKKS data
 * primes and the sealed BFV ring), and shape / argument errors.
 *
 * Contexts: an insecure N=1024 set with a 60-, a 50- and a 40-bit prime (the
 * scalar and, where the CPU has it, the IFMA path; exhaustive checks), plus
 * the presets "ifma-n4096" and "seed-n16384" (sampled checks). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gmp.h>

#include "tensafe/backend_impl.h"
#include "tensafe/bfv.h"
#include "tensafe/ckks.h"
#include "support/tsafe_test_rng.h"
#include "../libtensafe-he-core/src/ckks/ckks_internal.h"

typedef unsigned __int128 u128;

typedef struct {
    tsafe_context *c;
    tsafe_backend *b;
    size_t n;
    uint32_t limbs; /* data limbs usable by buffers */
    uint64_t q[TSAFE_MAX_PRIMES];
    tsafe_bfv_context *bfv; /* a BFV ring's context (then c is NULL) */
} fixture;

static void fx_open_params(fixture *f, const tsafe_params *p)
{
    memset(f, 0, sizeof *f);
    assert_int_equal(tsafe_context_create(p, &f->c), TSAFE_OK);
    assert_int_equal(tsafe_backend_cpu_create(f->c, &f->b), TSAFE_OK);
    f->n = tsafe_context_n(f->c);
    f->limbs = tsafe_context_max_level(f->c) + 1;
    for (uint32_t i = 0; i < f->limbs; i++)
        f->q[i] = tsafe_context_prime(f->c, i);
}

static void fx_open_small(fixture *f)
{
    tsafe_params p = {.log_n = 10, .n_primes = 3, .prime_bits = {60, 50, 40},
                      .scale = 0x1p30, .flags = TSAFE_PARAMS_INSECURE_FOR_TESTS};
    fx_open_params(f, &p);
}

static void fx_open_preset(fixture *f, const char *name)
{
    tsafe_params p;
    assert_int_equal(tsafe_params_preset(name, &p), TSAFE_OK);
    fx_open_params(f, &p);
}

static void fx_close(fixture *f)
{
    tsafe_backend_free(f->b);
    tsafe_context_free(f->c);
    tsafe_bfv_context_free(f->bfv);
}

static uint64_t mulmod(uint64_t a, uint64_t b, uint64_t q)
{
    return (uint64_t)((u128)a * b % q);
}

static uint64_t powmod(uint64_t a, uint64_t e, uint64_t q)
{
    uint64_t r = 1;
    for (; e; e >>= 1, a = mulmod(a, a, q))
        if (e & 1)
            r = mulmod(r, a, q);
    return r;
}

static uint32_t bitrev(uint32_t x, uint32_t bits)
{
    uint32_t r = 0;
    for (uint32_t i = 0; i < bits; i++)
        r |= ((x >> i) & 1u) << (bits - 1 - i);
    return r;
}

/* Random reduced words for n_polys x n_limbs limbs. */
static uint64_t *rand_words(const fixture *f, size_t n_polys, uint32_t n_limbs)
{
    uint64_t *w = malloc(n_polys * n_limbs * f->n * sizeof *w);
    assert_non_null(w);
    for (size_t p = 0; p < n_polys; p++)
        for (uint32_t i = 0; i < n_limbs; i++)
            for (size_t k = 0; k < f->n; k++)
                w[(p * n_limbs + i) * f->n + k] = tsafe_test_below(f->q[i]);
    return w;
}

static tsafe_buffer *upload(fixture *f, const uint64_t *w, size_t n_polys,
                            uint32_t n_limbs)
{
    tsafe_buffer *buf = NULL;
    assert_int_equal(tsafe_buffer_alloc(f->b, n_polys, n_limbs, &buf), TSAFE_OK);
    assert_int_equal(tsafe_buffer_words(buf), n_polys * n_limbs * f->n);
    assert_int_equal(tsafe_buffer_upload(buf, w, n_polys * n_limbs * f->n), TSAFE_OK);
    return buf;
}

static uint64_t *download(const fixture *f, const tsafe_buffer *buf)
{
    (void)f;
    size_t words = tsafe_buffer_words(buf);
    uint64_t *w = malloc(words * sizeof *w);
    assert_non_null(w);
    assert_int_equal(tsafe_buffer_download(buf, w, words), TSAFE_OK);
    return w;
}

/* Evaluation of coefficient vector a (mod q) at x, Horner. */
static uint64_t eval_at(const uint64_t *a, size_t n, uint64_t x, uint64_t q)
{
    uint64_t r = 0;
    for (size_t j = n; j-- > 0;)
        r = (uint64_t)(((u128)r * x + a[j]) % q);
    return r;
}

/* ---------------------------------------------------------------- tests */

static void test_name_and_buffers(void **state)
{
    (void)state;
    fixture f;
    fx_open_small(&f);
    assert_string_equal(tsafe_backend_name(f.b), "cpu");
    assert_string_equal(tsafe_backend_name(NULL), "none");
    assert_int_equal(tsafe_backend_synchronize(f.b), TSAFE_OK);
    assert_int_equal(tsafe_backend_synchronize(NULL), TSAFE_E_NULL);
    assert_int_equal(f.b->api_version, TSAFE_BACKEND_API_VERSION);

    /* round trip, every shape of limbs */
    for (uint32_t L = 1; L <= f.limbs; L++) {
        uint64_t *w = rand_words(&f, 3, L);
        tsafe_buffer *buf = upload(&f, w, 3, L);
        uint64_t *back = download(&f, buf);
        assert_memory_equal(back, w, 3 * L * f.n * sizeof *w);
        free(back);
        /* unreduced values are refused (q_i itself, and 2^64 - 1) and the
         * buffer keeps its contents */
        uint64_t *bad = malloc(3 * L * f.n * sizeof *bad);
        for (int t = 0; t < 4; t++) {
            memcpy(bad, w, 3 * L * f.n * sizeof *bad);
            uint32_t limb = (uint32_t)tsafe_test_below(L);
            size_t p = tsafe_test_below(3), k = tsafe_test_below(f.n);
            bad[(p * L + limb) * f.n + k] = t & 1 ? UINT64_MAX : f.q[limb];
            assert_int_equal(tsafe_buffer_upload(buf, bad, 3 * L * f.n), TSAFE_E_VALUE_RANGE);
        }
        back = download(&f, buf);
        assert_memory_equal(back, w, 3 * L * f.n * sizeof *w);
        /* word counts must match exactly */
        assert_int_equal(tsafe_buffer_upload(buf, w, 3 * L * f.n - 1), TSAFE_E_RANGE);
        assert_int_equal(tsafe_buffer_upload(buf, w, 3 * L * f.n + 1), TSAFE_E_RANGE);
        assert_int_equal(tsafe_buffer_download(buf, back, 3 * L * f.n - 1), TSAFE_E_RANGE);
        assert_int_equal(tsafe_buffer_upload(buf, NULL, 3 * L * f.n), TSAFE_E_NULL);
        assert_int_equal(tsafe_buffer_upload(NULL, w, 3 * L * f.n), TSAFE_E_NULL);
        assert_int_equal(tsafe_buffer_download(buf, NULL, 3 * L * f.n), TSAFE_E_NULL);
        assert_int_equal(tsafe_buffer_download(NULL, back, 3 * L * f.n), TSAFE_E_NULL);
        free(back);
        free(bad);
        free(w);
        tsafe_buffer_free(buf);
    }
    /* allocation limits */
    tsafe_buffer *buf = (tsafe_buffer *)0x1;
    assert_int_equal(tsafe_buffer_alloc(f.b, 0, 1, &buf), TSAFE_E_RANGE);
    assert_null(buf);
    assert_int_equal(tsafe_buffer_alloc(f.b, 1, 0, &buf), TSAFE_E_RANGE);
    assert_int_equal(tsafe_buffer_alloc(f.b, 1, f.limbs + 1, &buf), TSAFE_E_RANGE);
    assert_int_equal(tsafe_buffer_alloc(f.b, SIZE_MAX / 2, 1, &buf), TSAFE_E_SIZE_OVERFLOW);
    assert_int_equal(tsafe_buffer_alloc(NULL, 1, 1, &buf), TSAFE_E_NULL);
    assert_int_equal(tsafe_buffer_alloc(f.b, 1, 1, NULL), TSAFE_E_NULL);
    assert_int_equal(tsafe_buffer_words(NULL), 0);
    /* fresh buffers are zero */
    assert_int_equal(tsafe_buffer_alloc(f.b, 2, f.limbs, &buf), TSAFE_OK);
    uint64_t *z = download(&f, buf);
    for (size_t k = 0; k < tsafe_buffer_words(buf); k++)
        assert_int_equal(z[k], 0);
    free(z);
    tsafe_buffer_free(buf);
    tsafe_buffer_free(NULL);
    tsafe_backend_free(NULL);
    fx_close(&f);
}

/* psi_i is a primitive 2N-th root of unity mod q_i. */
static void check_psi(const fixture *f)
{
    for (uint32_t i = 0; i < f->limbs; i++) {
        uint64_t psi = tsafe_context_psi(f->c, i);
        assert_true(psi > 1 && psi < f->q[i]);
        assert_int_equal(powmod(psi, f->n, f->q[i]), f->q[i] - 1);
    }
    assert_int_equal(1u << tsafe_context_log_n(f->c), f->n);
}

/* Batched forward NTT: slot k of every limb holds the evaluation at
 * psi^(2*bitrev(k)+1); positions: all (n_check == 0) or n_check random.
 * Then the inverse restores the input. */
static void check_ntt(fixture *f, size_t n_polys, size_t n_check)
{
    check_psi(f);
    uint32_t log_n = tsafe_context_log_n(f->c);
    uint64_t *w = rand_words(f, n_polys, f->limbs);
    tsafe_buffer *buf = upload(f, w, n_polys, f->limbs);
    assert_int_equal(tsafe_backend_ntt_forward(f->b, buf), TSAFE_OK);
    uint64_t *fw = download(f, buf);
    for (size_t p = 0; p < n_polys; p++)
        for (uint32_t i = 0; i < f->limbs; i++) {
            const uint64_t *a = w + (p * f->limbs + i) * f->n;
            const uint64_t *A = fw + (p * f->limbs + i) * f->n;
            uint64_t q = f->q[i], psi = tsafe_context_psi(f->c, i);
            size_t cnt = n_check ? n_check : f->n;
            for (size_t t = 0; t < cnt; t++) {
                size_t k = n_check ? tsafe_test_below(f->n) : t;
                uint64_t x = powmod(psi, 2 * (uint64_t)bitrev((uint32_t)k, log_n) + 1, q);
                uint64_t want = eval_at(a, f->n, x, q);
                if (A[k] != want)
                    fail_msg("NTT poly %zu limb %u slot %zu: %llu != %llu", p, i, k,
                             (unsigned long long)A[k], (unsigned long long)want);
            }
        }
    /* per-polynomial transforms (one-poly buffers) give the same words */
    for (size_t p = 0; p < n_polys; p++) {
        tsafe_buffer *one = upload(f, w + p * f->limbs * f->n, 1, f->limbs);
        assert_int_equal(tsafe_backend_ntt_forward(f->b, one), TSAFE_OK);
        uint64_t *o = download(f, one);
        assert_memory_equal(o, fw + p * f->limbs * f->n, f->limbs * f->n * sizeof *o);
        free(o);
        tsafe_buffer_free(one);
    }
    assert_int_equal(tsafe_backend_ntt_inverse(f->b, buf), TSAFE_OK);
    uint64_t *back = download(f, buf);
    assert_memory_equal(back, w, n_polys * f->limbs * f->n * sizeof *w);
    /* inverse then forward is the identity too */
    assert_int_equal(tsafe_buffer_upload(buf, fw, n_polys * f->limbs * f->n), TSAFE_OK);
    assert_int_equal(tsafe_backend_ntt_inverse(f->b, buf), TSAFE_OK);
    assert_int_equal(tsafe_backend_ntt_forward(f->b, buf), TSAFE_OK);
    free(back);
    back = download(f, buf);
    assert_memory_equal(back, fw, n_polys * f->limbs * f->n * sizeof *w);
    free(back);
    free(fw);
    free(w);
    tsafe_buffer_free(buf);
}

static void test_ntt_small(void **state)
{
    (void)state;
    fixture f;
    fx_open_small(&f);
    for (uint32_t i = 0; i < f.limbs; i++)
        print_message("N=1024 limb %u: %u-bit prime, %s NTT\n", i, f.c->mod[i].bits,
                      f.c->ntt[i].use_ifma ? "ifma" : "scalar");
    check_ntt(&f, 2, 0);
    fx_close(&f);
}

static void test_ntt_presets(void **state)
{
    (void)state;
    const char *names[] = {"ifma-n4096", "seed-n16384"};
    for (int i = 0; i < 2; i++) {
        fixture f;
        fx_open_preset(&f, names[i]);
        check_ntt(&f, 2, 24);
        fx_close(&f);
    }
}

/* NTT(a) (.) NTT(b) -> inverse equals the schoolbook a*b mod (X^N + 1, q_i),
 * batched over polynomials, with b broadcast. */
static void test_negacyclic_product(void **state)
{
    (void)state;
    fixture f;
    fx_open_small(&f);
    const size_t np = 2, n = f.n;
    uint32_t L = f.limbs;
    uint64_t *a = rand_words(&f, np, L), *bw = rand_words(&f, 1, L);
    /* a few sparse / extreme inputs: q-1 everywhere in poly 1 limb 0 */
    for (size_t k = 0; k < n; k++)
        a[(1 * L + 0) * n + k] = f.q[0] - 1;
    tsafe_buffer *A = upload(&f, a, np, L), *B = upload(&f, bw, 1, L);
    assert_int_equal(tsafe_backend_ntt_forward(f.b, A), TSAFE_OK);
    assert_int_equal(tsafe_backend_ntt_forward(f.b, B), TSAFE_OK);
    assert_int_equal(tsafe_backend_elementwise(f.b, TSAFE_OP_MUL, A, A, B), TSAFE_OK);
    assert_int_equal(tsafe_backend_ntt_inverse(f.b, A), TSAFE_OK);
    uint64_t *got = download(&f, A);
    uint64_t *want = calloc(n, sizeof *want);
    for (size_t p = 0; p < np; p++)
        for (uint32_t i = 0; i < L; i++) {
            uint64_t q = f.q[i];
            const uint64_t *x = a + (p * L + i) * n, *y = bw + (size_t)i * n;
            memset(want, 0, n * sizeof *want);
            for (size_t s = 0; s < n; s++)
                for (size_t t = 0; t < n; t++) {
                    uint64_t m = mulmod(x[s], y[t], q);
                    size_t k = s + t;
                    if (k < n) {
                        want[k] = want[k] + m >= q ? want[k] + m - q : want[k] + m;
                    } else { /* X^N = -1 */
                        k -= n;
                        want[k] = want[k] >= m ? want[k] - m : want[k] + q - m;
                    }
                }
            assert_memory_equal(got + (p * L + i) * n, want, n * sizeof *want);
        }
    free(want);
    free(got);
    free(a);
    free(bw);
    tsafe_buffer_free(A);
    tsafe_buffer_free(B);
    fx_close(&f);
}

/* out = a op b against plain u128 loops: full shape, broadcast, aliasing. */
static void check_elementwise(fixture *f)
{
    const size_t np = 3;
    const tsafe_elementwise_op ops[] = {TSAFE_OP_ADD, TSAFE_OP_SUB, TSAFE_OP_MUL};
    for (uint32_t L = 1; L <= f->limbs; L++) {
        uint64_t *a = rand_words(f, np, L), *bfull = rand_words(f, np, L);
        uint64_t *bone = rand_words(f, 1, L);
        /* edge values in the first slots of every limb */
        for (size_t p = 0; p < np; p++)
            for (uint32_t i = 0; i < L; i++) {
                uint64_t *x = a + (p * L + i) * f->n, *y = bfull + (p * L + i) * f->n;
                x[0] = 0; y[0] = f->q[i] - 1;
                x[1] = f->q[i] - 1; y[1] = f->q[i] - 1;
                x[2] = f->q[i] - 1; y[2] = 0;
            }
        tsafe_buffer *A = upload(f, a, np, L), *Bf = upload(f, bfull, np, L);
        tsafe_buffer *B1 = upload(f, bone, 1, L), *O = NULL;
        assert_int_equal(tsafe_buffer_alloc(f->b, np, L, &O), TSAFE_OK);
        for (int oi = 0; oi < 3; oi++)
            for (int bc = 0; bc < 2; bc++) {
                assert_int_equal(tsafe_backend_elementwise(f->b, ops[oi], O, A, bc ? B1 : Bf),
                                 TSAFE_OK);
                uint64_t *got = download(f, O);
                for (size_t p = 0; p < np; p++)
                    for (uint32_t i = 0; i < L; i++) {
                        uint64_t q = f->q[i];
                        const uint64_t *x = a + (p * L + i) * f->n;
                        const uint64_t *y = bc ? bone + (size_t)i * f->n
                                               : bfull + (p * L + i) * f->n;
                        const uint64_t *g = got + (p * L + i) * f->n;
                        for (size_t k = 0; k < f->n; k++) {
                            uint64_t want;
                            if (ops[oi] == TSAFE_OP_ADD)
                                want = (uint64_t)(((u128)x[k] + y[k]) % q);
                            else if (ops[oi] == TSAFE_OP_SUB)
                                want = (uint64_t)(((u128)x[k] + q - y[k]) % q);
                            else
                                want = (uint64_t)((u128)x[k] * y[k] % q);
                            if (g[k] != want)
                                fail_msg("op %d bcast %d L %u poly %zu limb %u k %zu", oi, bc,
                                         L, p, i, k);
                        }
                    }
                /* out aliasing a gives the same result */
                tsafe_buffer *A2 = upload(f, a, np, L);
                assert_int_equal(tsafe_backend_elementwise(f->b, ops[oi], A2, A2, bc ? B1 : Bf),
                                 TSAFE_OK);
                uint64_t *got2 = download(f, A2);
                assert_memory_equal(got2, got, np * L * f->n * sizeof *got);
                free(got2);
                free(got);
                tsafe_buffer_free(A2);
            }
        tsafe_buffer_free(A); tsafe_buffer_free(Bf); tsafe_buffer_free(B1);
        tsafe_buffer_free(O);
        free(a); free(bfull); free(bone);
    }
}

static void test_elementwise(void **state)
{
    (void)state;
    fixture f;
    fx_open_small(&f);
    check_elementwise(&f);
    fx_close(&f);
    fx_open_preset(&f, "ifma-n4096");
    check_elementwise(&f);
    fx_close(&f);
}

/* GMP reference of rescale in coefficient form: X = CRT(x_0..x_l) in
 * [0, Q), Y = nearest integer to X / q_l (q_l odd: never a tie), Y mod q_i. */
static void rescale_reference(const fixture *f, const uint64_t *x, uint32_t nl,
                              uint64_t *out)
{
    size_t n = f->n;
    uint32_t l = nl - 1;
    mpz_t Q, X, t, qi, ql, h, coef[TSAFE_MAX_PRIMES];
    mpz_inits(Q, X, t, qi, ql, h, NULL);
    mpz_set_ui(Q, 1);
    for (uint32_t i = 0; i < nl; i++)
        mpz_mul_ui(Q, Q, f->q[i]);
    /* coef_i = (Q/q_i) * ((Q/q_i)^-1 mod q_i) */
    for (uint32_t i = 0; i < nl; i++) {
        mpz_init(coef[i]);
        mpz_set_ui(qi, f->q[i]);
        mpz_divexact(coef[i], Q, qi);
        assert_true(mpz_invert(t, coef[i], qi));
        mpz_mul(coef[i], coef[i], t);
    }
    mpz_set_ui(ql, f->q[l]);
    mpz_fdiv_q_ui(h, ql, 2); /* (q_l - 1) / 2 */
    for (size_t k = 0; k < n; k++) {
        mpz_set_ui(X, 0);
        for (uint32_t i = 0; i < nl; i++)
            mpz_addmul_ui(X, coef[i], x[(size_t)i * n + k]);
        mpz_mod(X, X, Q);
        mpz_add(X, X, h);
        mpz_fdiv_q(X, X, ql);
        for (uint32_t i = 0; i < l; i++)
            out[(size_t)i * n + k] = mpz_fdiv_ui(X, f->q[i]);
    }
    for (uint32_t i = 0; i < nl; i++)
        mpz_clear(coef[i]);
    mpz_clears(Q, X, t, qi, ql, h, NULL);
}

static void check_rescale_gmp(fixture *f, size_t np)
{
    size_t n = f->n;
    for (uint32_t nl = 2; nl <= f->limbs; nl++) {
        uint64_t *x = rand_words(f, np, nl);
        /* edge coefficients: 0, Q-1 (all q_i - 1), and values near q_l/2 */
        for (size_t p = 0; p < np; p++)
            for (uint32_t i = 0; i < nl; i++) {
                uint64_t *l = x + (p * nl + i) * n;
                l[0] = 0;
                l[1] = f->q[i] - 1;
                l[2] = i == nl - 1 ? f->q[i] / 2 : 0;
                l[3] = i == nl - 1 ? f->q[i] / 2 + 1 : 0;
            }
        tsafe_buffer *in = upload(f, x, np, nl), *out = NULL;
        assert_int_equal(tsafe_buffer_alloc(f->b, np, nl - 1, &out), TSAFE_OK);
        assert_int_equal(tsafe_backend_ntt_forward(f->b, in), TSAFE_OK);
        assert_int_equal(tsafe_backend_rescale(f->b, out, in), TSAFE_OK);
        assert_int_equal(tsafe_backend_ntt_inverse(f->b, out), TSAFE_OK);
        uint64_t *got = download(f, out);
        uint64_t *want = malloc((size_t)(nl - 1) * n * sizeof *want);
        for (size_t p = 0; p < np; p++) {
            rescale_reference(f, x + p * nl * n, nl, want);
            assert_memory_equal(got + p * (nl - 1) * n, want, (size_t)(nl - 1) * n * 8);
        }
        free(want);
        free(got);
        free(x);
        tsafe_buffer_free(in);
        tsafe_buffer_free(out);
    }
}

/* Backend rescale of a real ciphertext's (c0, c1) equals tsafe_ckks_rescale. */
static void check_rescale_ciphertext(fixture *f)
{
    tsafe_secret_key *sk = NULL;
    tsafe_plaintext *pt = NULL;
    tsafe_ciphertext *ct = NULL, *r = NULL;
    size_t n = f->n, slots = tsafe_context_slots(f->c);
    uint32_t L = f->limbs;
    double *v = malloc(slots * sizeof *v);
    for (size_t i = 0; i < slots; i++)
        v[i] = tsafe_test_uniform(-1, 1);
    assert_int_equal(tsafe_secret_key_generate(f->c, NULL, &sk), TSAFE_OK);
    assert_int_equal(tsafe_plaintext_create(f->c, &pt), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encode(f->c, v, slots, tsafe_context_params(f->c)->scale,
                                       L - 1, pt), TSAFE_OK);
    assert_int_equal(tsafe_ciphertext_create(f->c, &ct), TSAFE_OK);
    assert_int_equal(tsafe_ciphertext_create(f->c, &r), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encrypt_symmetric(f->c, sk, pt, NULL, ct), TSAFE_OK);
    /* decryption consistency: c0 + c1 (.) s (s broadcast) equals decrypt */
    uint64_t *w = malloc(2 * L * n * sizeof *w);
    memcpy(w, ct->c0, L * n * sizeof *w);
    memcpy(w + L * n, ct->c1, L * n * sizeof *w);
    tsafe_buffer *C0 = upload(f, ct->c0, 1, L), *C1 = upload(f, ct->c1, 1, L);
    tsafe_buffer *S = upload(f, sk->s_ntt, 1, L);
    assert_int_equal(tsafe_backend_elementwise(f->b, TSAFE_OP_MUL, C1, C1, S), TSAFE_OK);
    assert_int_equal(tsafe_backend_elementwise(f->b, TSAFE_OP_ADD, C1, C1, C0), TSAFE_OK);
    tsafe_plaintext *dec = NULL;
    assert_int_equal(tsafe_plaintext_create(f->c, &dec), TSAFE_OK);
    assert_int_equal(tsafe_ckks_decrypt(f->c, sk, ct, dec), TSAFE_OK);
    uint64_t *m = download(f, C1);
    assert_memory_equal(m, dec->data, L * n * sizeof *m);
    free(m);
    /* rescale both polynomials in one batched call */
    tsafe_buffer *in = upload(f, w, 2, L), *out = NULL;
    assert_int_equal(tsafe_buffer_alloc(f->b, 2, L - 1, &out), TSAFE_OK);
    assert_int_equal(tsafe_backend_rescale(f->b, out, in), TSAFE_OK);
    assert_int_equal(tsafe_ckks_rescale(f->c, ct, r), TSAFE_OK);
    uint64_t *got = download(f, out);
    assert_memory_equal(got, r->c0, (L - 1) * n * sizeof *got);
    assert_memory_equal(got + (L - 1) * n, r->c1, (L - 1) * n * sizeof *got);
    free(got);
    free(w);
    free(v);
    tsafe_buffer_free(C0); tsafe_buffer_free(C1); tsafe_buffer_free(S);
    tsafe_buffer_free(in); tsafe_buffer_free(out);
    tsafe_plaintext_free(dec);
    tsafe_plaintext_free(pt);
    tsafe_ciphertext_free(ct);
    tsafe_ciphertext_free(r);
    tsafe_secret_key_free(sk);
}

static void test_rescale(void **state)
{
    (void)state;
    fixture f;
    fx_open_small(&f);
    check_rescale_gmp(&f, 2);
    check_rescale_ciphertext(&f);
    fx_close(&f);
    const char *names[] = {"ifma-n4096", "seed-n16384"};
    for (int i = 0; i < 2; i++) {
        fx_open_preset(&f, names[i]);
        if (i == 0)
            check_rescale_gmp(&f, 1);
        check_rescale_ciphertext(&f);
        fx_close(&f);
    }
}

static void test_shape_errors(void **state)
{
    (void)state;
    fixture f, g;
    fx_open_small(&f);
    fx_open_preset(&g, "ifma-n4096");
    uint32_t L = f.limbs;
    tsafe_buffer *a3 = NULL, *b3 = NULL, *b1 = NULL, *b2 = NULL, *l2 = NULL, *o3 = NULL,
                 *o2 = NULL, *one = NULL, *other = NULL, *r = NULL;
    assert_int_equal(tsafe_buffer_alloc(f.b, 3, L, &a3), TSAFE_OK);
    assert_int_equal(tsafe_buffer_alloc(f.b, 3, L, &b3), TSAFE_OK);
    assert_int_equal(tsafe_buffer_alloc(f.b, 1, L, &b1), TSAFE_OK);
    assert_int_equal(tsafe_buffer_alloc(f.b, 2, L, &b2), TSAFE_OK);
    assert_int_equal(tsafe_buffer_alloc(f.b, 3, L - 1, &l2), TSAFE_OK);
    assert_int_equal(tsafe_buffer_alloc(f.b, 3, L, &o3), TSAFE_OK);
    assert_int_equal(tsafe_buffer_alloc(f.b, 2, L, &o2), TSAFE_OK);
    assert_int_equal(tsafe_buffer_alloc(f.b, 3, 1, &one), TSAFE_OK);
    assert_int_equal(tsafe_buffer_alloc(g.b, 3, g.limbs, &other), TSAFE_OK);
    assert_int_equal(tsafe_buffer_alloc(f.b, 3, L - 2, &r), TSAFE_OK);
    const tsafe_elementwise_op op = TSAFE_OP_MUL;
    /* the valid shapes */
    assert_int_equal(tsafe_backend_elementwise(f.b, op, o3, a3, b3), TSAFE_OK);
    assert_int_equal(tsafe_backend_elementwise(f.b, op, o3, a3, b1), TSAFE_OK);
    /* mismatched limbs / polys */
    assert_int_equal(tsafe_backend_elementwise(f.b, op, o3, a3, l2), TSAFE_E_RANGE);
    assert_int_equal(tsafe_backend_elementwise(f.b, op, o3, l2, b3), TSAFE_E_RANGE);
    assert_int_equal(tsafe_backend_elementwise(f.b, op, o3, a3, b2), TSAFE_E_RANGE);
    assert_int_equal(tsafe_backend_elementwise(f.b, op, o2, a3, b3), TSAFE_E_RANGE);
    assert_int_equal(tsafe_backend_elementwise(f.b, op, l2, a3, b3), TSAFE_E_RANGE);
    /* broadcast only from b, never into out */
    assert_int_equal(tsafe_backend_elementwise(f.b, op, o3, b1, a3), TSAFE_E_RANGE);
    /* bad op, NULLs, another backend's buffers */
    assert_int_equal(tsafe_backend_elementwise(f.b, (tsafe_elementwise_op)7, o3, a3, b3),
                     TSAFE_E_ARG);
    assert_int_equal(tsafe_backend_elementwise(f.b, (tsafe_elementwise_op)-1, o3, a3, b3),
                     TSAFE_E_ARG);
    assert_int_equal(tsafe_backend_elementwise(NULL, op, o3, a3, b3), TSAFE_E_NULL);
    assert_int_equal(tsafe_backend_elementwise(f.b, op, NULL, a3, b3), TSAFE_E_NULL);
    assert_int_equal(tsafe_backend_elementwise(f.b, op, o3, NULL, b3), TSAFE_E_NULL);
    assert_int_equal(tsafe_backend_elementwise(f.b, op, o3, a3, NULL), TSAFE_E_NULL);
    assert_int_equal(tsafe_backend_elementwise(f.b, op, o3, a3, other), TSAFE_E_ARG);
    assert_int_equal(tsafe_backend_elementwise(g.b, op, o3, a3, b3), TSAFE_E_ARG);
    /* NTT */
    assert_int_equal(tsafe_backend_ntt_forward(NULL, a3), TSAFE_E_NULL);
    assert_int_equal(tsafe_backend_ntt_forward(f.b, NULL), TSAFE_E_NULL);
    assert_int_equal(tsafe_backend_ntt_inverse(NULL, a3), TSAFE_E_NULL);
    assert_int_equal(tsafe_backend_ntt_inverse(f.b, NULL), TSAFE_E_NULL);
    assert_int_equal(tsafe_backend_ntt_forward(f.b, other), TSAFE_E_ARG);
    assert_int_equal(tsafe_backend_ntt_inverse(g.b, a3), TSAFE_E_ARG);
    /* rescale: out must have one limb fewer and as many polys; >= 2 limbs */
    assert_int_equal(tsafe_backend_rescale(f.b, l2, a3), TSAFE_OK);
    assert_int_equal(tsafe_backend_rescale(f.b, o3, a3), TSAFE_E_RANGE);
    assert_int_equal(tsafe_backend_rescale(f.b, r, a3), TSAFE_E_RANGE);
    assert_int_equal(tsafe_backend_rescale(f.b, o2, l2), TSAFE_E_RANGE);
    assert_int_equal(tsafe_backend_rescale(f.b, l2, b1), TSAFE_E_RANGE);
    assert_int_equal(tsafe_backend_rescale(f.b, one, one), TSAFE_E_LEVEL);
    assert_int_equal(tsafe_backend_rescale(f.b, NULL, a3), TSAFE_E_NULL);
    assert_int_equal(tsafe_backend_rescale(f.b, l2, NULL), TSAFE_E_NULL);
    assert_int_equal(tsafe_backend_rescale(NULL, l2, a3), TSAFE_E_NULL);
    assert_int_equal(tsafe_backend_rescale(g.b, l2, a3), TSAFE_E_ARG);
    assert_int_equal(tsafe_backend_rescale(f.b, l2, other), TSAFE_E_ARG);
    tsafe_buffer *bufs[] = {a3, b3, b1, b2, l2, o3, o2, one, other, r};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        tsafe_buffer_free(bufs[i]);
    fx_close(&g);
    fx_close(&f);
}

/* A backend whose api_version differs is refused; missing required slots
 * are refused. */
static const char *dummy_name(tsafe_backend *b) { (void)b; return "dummy"; }

static void test_backend_init(void **state)
{
    (void)state;
    fixture f;
    fx_open_small(&f);
    struct tsafe_backend_i iface = *f.b->iface;
    tsafe_backend *b = (tsafe_backend *)0x1;
    assert_int_equal(tsafe_backend_init(&b, TSAFE_BACKEND_API_VERSION + 1, &iface, NULL, f.c),
                     TSAFE_E_VERSION);
    assert_null(b);
    iface.get_name = dummy_name;
    assert_int_equal(tsafe_backend_init(&b, TSAFE_BACKEND_API_VERSION, &iface, NULL, f.c),
                     TSAFE_OK);
    assert_string_equal(tsafe_backend_name(b), "dummy");
    tsafe_backend_free(b);
    iface.rescale = NULL;
    assert_int_equal(tsafe_backend_init(&b, TSAFE_BACKEND_API_VERSION, &iface, NULL, f.c),
                     TSAFE_E_ARG);
    assert_int_equal(tsafe_backend_init(&b, TSAFE_BACKEND_API_VERSION, NULL, NULL, f.c),
                     TSAFE_E_NULL);
    assert_int_equal(tsafe_backend_cpu_create(NULL, &b), TSAFE_E_NULL);
    assert_int_equal(tsafe_backend_cpu_create(f.c, NULL), TSAFE_E_NULL);
    fx_close(&f);
}


/* ----------------------------------------------- mul_acc and mod_switch */

/* The sealed protocol's BFV ring (N = 4096, q0 ~ 2^49, q1 ~ 2^gap_bits). */
static void fx_open_bfv(fixture *f, uint32_t gap_bits)
{
    memset(f, 0, sizeof *f);
    tsafe_bfv_params p = {12, 49, gap_bits, 37,
                          gap_bits > 60 ? TSAFE_BFV_INSECURE_FOR_TESTS : 0};
    assert_int_equal(tsafe_bfv_context_create(&p, &f->bfv), TSAFE_OK);
    assert_int_equal(tsafe_backend_cpu_create_bfv(f->bfv, &f->b), TSAFE_OK);
    f->n = tsafe_backend_n(f->b);
    f->limbs = tsafe_backend_max_limbs(f->b);
    /* a gap above 50 bits is two primes (every limb IFMA) */
    assert_int_equal(f->limbs, gap_bits > 50 ? 3 : 2);
    for (uint32_t i = 0; i < f->limbs; i++) {
        f->q[i] = tsafe_backend_prime(f->b, i);
        assert_int_equal(f->q[i], tsafe_bfv_context_prime(f->bfv, i));
    }
}

/* mul_acc against plain 128-bit loops, the jobs run in order: broadcast a
 * and w (pool buffers with P or 1 polynomials), a job without terms, and
 * jobs reading an earlier and a later job's accumulator. */
#define MAC_POOL 4
#define MAC_JOBS 6
static void check_mul_acc(fixture *f, size_t P, uint32_t L)
{
    size_t n = f->n, pw = (size_t)L * n; /* words per polynomial */
    uint64_t *ah[MAC_POOL], *wh[MAC_POOL], *acch[MAC_JOBS], *ref[MAC_JOBS];
    size_t ap[MAC_POOL], wp[MAC_POOL];
    tsafe_buffer *A[MAC_POOL], *W[MAC_POOL], *acc[MAC_JOBS];
    for (int i = 0; i < MAC_POOL; i++) {
        ap[i] = i % 2 ? 1 : P;
        wp[i] = (i / 2) % 2 ? 1 : P;
        ah[i] = rand_words(f, ap[i], L);
        wh[i] = rand_words(f, wp[i], L);
        for (uint32_t l = 0; l < L; l++) { /* the largest product */
            ah[i][l * n] = f->q[l] - 1;
            wh[i][l * n] = f->q[l] - 1;
        }
        A[i] = upload(f, ah[i], ap[i], L);
        W[i] = NULL;
        assert_int_equal(tsafe_buffer_alloc_operand(f->b, wp[i], L, &W[i]), TSAFE_OK);
        assert_null(tsafe_buffer_host_words(W[i]));
        assert_int_equal(tsafe_buffer_upload(W[i], wh[i], wp[i] * pw), TSAFE_OK);
    }
    for (int j = 0; j < MAC_JOBS; j++) {
        acch[j] = rand_words(f, P, L);
        ref[j] = malloc(P * pw * sizeof *ref[j]);
        assert_non_null(ref[j]);
        memcpy(ref[j], acch[j], P * pw * sizeof *ref[j]);
        acc[j] = upload(f, acch[j], P, L);
    }
    /* job j has j + 1 terms (job 0 none); term sources: pool, or acc */
    const tsafe_buffer *as[64], *ws[64];
    int asrc[64], wsrc[64];
    tsafe_backend_mac jobs[MAC_JOBS];
    size_t t = 0;
    for (int j = 0; j < MAC_JOBS; j++) {
        size_t nt = j ? (size_t)j + 1 : 0;
        jobs[j].acc = acc[j];
        jobs[j].n_terms = nt;
        jobs[j].assign = j == 5 || j == 0; /* acc = the sum (job 0: zeroed) */
        jobs[j].a = as + t;
        jobs[j].w = ws + t;
        for (size_t k = 0; k < nt; k++, t++) {
            asrc[t] = (int)tsafe_test_below(MAC_POOL);
            wsrc[t] = (int)tsafe_test_below(MAC_POOL);
            if (j == 3 && k == 0)
                asrc[t] = -1 - 1; /* job 1's accumulator, after job 1 */
            if (j == 2 && k == 1)
                asrc[t] = -1 - 4; /* job 4's accumulator, before job 4 */
            as[t] = asrc[t] >= 0 ? A[asrc[t]] : acc[-1 - asrc[t]];
            ws[t] = W[wsrc[t]];
        }
    }
    assert_int_equal(tsafe_backend_mul_acc(f->b, jobs, MAC_JOBS), TSAFE_OK);
    /* the reference */
    t = 0;
    for (int j = 0; j < MAC_JOBS; j++) {
        if (jobs[j].assign)
            memset(ref[j], 0, P * pw * sizeof *ref[j]);
        for (size_t k = 0; k < jobs[j].n_terms; k++, t++) {
            const uint64_t *a = asrc[t] >= 0 ? ah[asrc[t]] : ref[-1 - asrc[t]];
            size_t a1 = asrc[t] >= 0 && ap[asrc[t]] == 1;
            const uint64_t *w = wh[wsrc[t]];
            size_t w1 = wp[wsrc[t]] == 1;
            for (size_t p = 0; p < P; p++)
                for (uint32_t l = 0; l < L; l++)
                    for (size_t c = 0; c < n; c++) {
                        uint64_t q = f->q[l];
                        uint64_t x = a[(a1 ? 0 : p) * pw + l * n + c];
                        uint64_t y = w[(w1 ? 0 : p) * pw + l * n + c];
                        uint64_t *r = &ref[j][p * pw + l * n + c];
                        *r = (uint64_t)(((u128)*r + (u128)x * y % q) % q);
                    }
        }
    }
    for (int j = 0; j < MAC_JOBS; j++) {
        uint64_t *got = download(f, acc[j]);
        assert_memory_equal(got, ref[j], P * pw * sizeof *got);
        free(got);
    }
    /* the dispatcher's checks */
    tsafe_backend_mac bad = {acc[1], 1, as, ws, 0};
    const tsafe_buffer *self[] = {acc[1]}, *opa[] = {W[0]};
    bad.a = self; /* a job reading its own accumulator */
    assert_int_equal(tsafe_backend_mul_acc(f->b, &bad, 1), TSAFE_E_ARG);
    bad.w = self; /* ... as the right operand */
    bad.a = as;
    assert_int_equal(tsafe_backend_mul_acc(f->b, &bad, 1), TSAFE_E_ARG);
    bad.w = ws;
    bad.a = opa; /* an operand on the left */
    assert_int_equal(tsafe_backend_mul_acc(f->b, &bad, 1), TSAFE_E_ARG);
    tsafe_backend_mac two[] = {{acc[1], 0, NULL, NULL, 0}, {acc[1], 0, NULL, NULL, 0}};
    assert_int_equal(tsafe_backend_mul_acc(f->b, two, 2), TSAFE_E_ARG);
    assert_int_equal(tsafe_backend_mul_acc(f->b, NULL, 0), TSAFE_OK);
    assert_int_equal(tsafe_backend_mul_acc(f->b, NULL, 1), TSAFE_E_NULL);
    for (int i = 0; i < MAC_POOL; i++) {
        free(ah[i]);
        free(wh[i]);
        tsafe_buffer_free(A[i]);
        tsafe_buffer_free(W[i]);
    }
    for (int j = 0; j < MAC_JOBS; j++) {
        free(acch[j]);
        free(ref[j]);
        tsafe_buffer_free(acc[j]);
    }
}

static void test_mul_acc(void **state)
{
    (void)state;
    fixture f;
    fx_open_small(&f); /* scalar path (a 60-bit prime) */
    check_mul_acc(&f, 2, f.limbs);
    check_mul_acc(&f, 1, 2);
    check_mul_acc(&f, 3, 1);
    fx_close(&f);
    fx_open_preset(&f, "ifma-n4096"); /* IFMA where the CPU has it */
    check_mul_acc(&f, 2, f.limbs);
    fx_close(&f);
    fx_open_bfv(&f, 60);
    check_mul_acc(&f, 2, f.limbs);
    check_mul_acc(&f, 2, 1);
    fx_close(&f);
    fx_open_bfv(&f, 45); /* one gap prime */
    check_mul_acc(&f, 2, f.limbs);
    fx_close(&f);
}

/* Residues of X (mod each of the first nl primes) into coefficient k of
 * one polynomial of nl limbs. */
static void set_crt(const fixture *f, uint64_t *x, uint32_t nl, size_t k,
                    const mpz_t X)
{
    for (uint32_t i = 0; i < nl; i++)
        x[(size_t)i * f->n + k] = mpz_fdiv_ui(X, f->q[i]);
}

/* mod_switch (coefficient form) against the GMP reference: random
 * residues, and values X = m q_l + d around the rounding boundary
 * d = (q_l - 1)/2 (and 0, q_l - 1, Q - 1) set through their CRT residues. */
static void check_mod_switch(fixture *f, size_t np)
{
    size_t n = f->n;
    mpz_t Q, X;
    mpz_inits(Q, X, NULL);
    for (uint32_t nl = 2; nl <= f->limbs; nl++) {
        uint64_t ql = f->q[nl - 1], h = (ql - 1) / 2;
        mpz_set_ui(Q, 1);
        for (uint32_t i = 0; i < nl; i++)
            mpz_mul_ui(Q, Q, f->q[i]);
        uint64_t *x = rand_words(f, np, nl);
        uint64_t d[] = {0, 1, h - 1, h, h + 1, ql - 1};
        for (size_t p = 0; p < np; p++) {
            size_t k = 0;
            for (; k < sizeof d / sizeof d[0]; k++) {
                mpz_set_ui(X, tsafe_test_below(f->q[0])); /* m < Q / q_l */
                mpz_mul_ui(X, X, ql);
                mpz_add_ui(X, X, d[k]);
                set_crt(f, x + p * nl * n, nl, 1 + k, X);
            }
            mpz_sub_ui(X, Q, 1);
            set_crt(f, x + p * nl * n, nl, 1 + k, X);
        }
        tsafe_buffer *in = upload(f, x, np, nl), *out = NULL;
        assert_int_equal(tsafe_buffer_alloc(f->b, np, nl - 1, &out), TSAFE_OK);
        assert_int_equal(tsafe_backend_mod_switch(f->b, out, in), TSAFE_OK);
        uint64_t *got = download(f, out);
        uint64_t *want = malloc((size_t)(nl - 1) * n * sizeof *want);
        assert_non_null(want);
        for (size_t p = 0; p < np; p++) {
            rescale_reference(f, x + p * nl * n, nl, want);
            assert_memory_equal(got + p * (nl - 1) * n, want,
                                (size_t)(nl - 1) * n * sizeof *want);
        }
        /* shapes: one limb in, a wrong output, an operand */
        tsafe_buffer *one = NULL, *op = NULL;
        assert_int_equal(tsafe_buffer_alloc(f->b, np, 1, &one), TSAFE_OK);
        assert_int_equal(tsafe_backend_mod_switch(f->b, out, one), TSAFE_E_LEVEL);
        assert_int_equal(tsafe_backend_mod_switch(f->b, in, in), TSAFE_E_RANGE);
        assert_int_equal(tsafe_buffer_alloc_operand(f->b, np, nl, &op), TSAFE_OK);
        assert_int_equal(tsafe_backend_mod_switch(f->b, out, op), TSAFE_E_ARG);
        tsafe_buffer_free(one);
        tsafe_buffer_free(op);
        free(want);
        free(got);
        free(x);
        tsafe_buffer_free(in);
        tsafe_buffer_free(out);
    }
    mpz_clears(Q, X, NULL);
}

static void test_mod_switch(void **state)
{
    (void)state;
    fixture f;
    fx_open_bfv(&f, 60); /* the sealed ring: Q -> q0 */
    check_mod_switch(&f, 2);
    tsafe_buffer *in = NULL, *out = NULL; /* no rescale on the exact ring */
    assert_int_equal(tsafe_buffer_alloc(f.b, 1, 2, &in), TSAFE_OK);
    assert_int_equal(tsafe_buffer_alloc(f.b, 1, 1, &out), TSAFE_OK);
    assert_int_equal(tsafe_backend_rescale(f.b, out, in), TSAFE_E_UNSUPPORTED);
    tsafe_buffer_free(in);
    tsafe_buffer_free(out);
    fx_close(&f);
    fx_open_bfv(&f, 61);
    check_mod_switch(&f, 1);
    fx_close(&f);
    fx_open_bfv(&f, 45);
    check_mod_switch(&f, 2);
    fx_close(&f);
    fx_open_small(&f); /* CKKS data primes, every L -> L-1 */
    check_mod_switch(&f, 2);
    fx_close(&f);
    fx_open_preset(&f, "seed-n16384");
    check_mod_switch(&f, 1);
    fx_close(&f);
}

int main(void)
{
    tsafe_test_rng_init("backend_cpu");
    if (getenv("TSAFE_TEST_FILTER")) /* e.g. TSAFE_TEST_FILTER=test_rescale */
        cmocka_set_test_filter(getenv("TSAFE_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_and_buffers),
        cmocka_unit_test(test_ntt_small),
        cmocka_unit_test(test_ntt_presets),
        cmocka_unit_test(test_negacyclic_product),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_rescale),
        cmocka_unit_test(test_shape_errors),
        cmocka_unit_test(test_backend_init),
        cmocka_unit_test(test_mul_acc),
        cmocka_unit_test(test_mod_switch),
    };
    return cmocka_run_group_tests_name("backend_cpu", tests, NULL, NULL);
}
