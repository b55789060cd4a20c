/* BFV context (primes, NTT tables, scaling constants, fingerprint) and
 * keys. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "bfv_internal.h"
#include "bytes.h"
#include "tensafe/ckks.h" /* tsafe_params_max_log_q: one security table */
#include "tsafe_check.h"
#include "../common/prng.h"

static tsafe_status check_params(const tsafe_bfv_params *p)
{
    if (p->log_n < 11 || p->log_n > 15)
        return TSAFE_E_PARAMS;
    if (p->resp_bits < 30 || p->resp_bits > 50 || p->gap_bits < 30 ||
        p->gap_bits > 61)
        return TSAFE_E_PARAMS;
    if (p->t_bits < 8 || p->t_bits + 8 > p->resp_bits)
        return TSAFE_E_PARAMS;
    if (p->flags & ~TSAFE_BFV_INSECURE_FOR_TESTS)
        return TSAFE_E_PARAMS;
    return TSAFE_OK;
}

tsafe_status tsafe_bfv_context_create(const tsafe_bfv_params *p,
                                      tsafe_bfv_context **out)
{
    TSAFE_REQUIRE(p && out, TSAFE_E_NULL);
    *out = NULL;
    tsafe_status st = check_params(p);
    if (st != TSAFE_OK)
        return st;
    if (!(p->flags & TSAFE_BFV_INSECURE_FOR_TESTS) &&
        p->resp_bits + p->gap_bits > tsafe_params_max_log_q(p->log_n))
        return TSAFE_E_INSECURE;
    if ((st = tsafe_sodium_ready()) != TSAFE_OK)
        return st;
    tsafe_bfv_context *c = calloc(1, sizeof *c);
    if (!c)
        return TSAFE_E_NOMEM;
    c->p = *p;
    c->n = (size_t)1 << p->log_n;
    /* q0, then the gap as one prime or, above 50 bits, two (IFMA limbs) */
    uint32_t bits[TSAFE_BFV_MAX_LIMBS] = {p->resp_bits, p->gap_bits, 0};
    c->L = 2;
    if (p->gap_bits > 50) {
        bits[1] = (p->gap_bits + 1) / 2;
        bits[2] = p->gap_bits / 2;
        c->L = 3;
    }
    uint64_t q[TSAFE_BFV_MAX_LIMBS] = {0};
    TSAFE_TRY(tsafe_primes_generate(p->log_n, c->L, bits, q));
    c->Q = 1;
    c->log2_q = 0;
    for (uint32_t i = 0; i < c->L; i++) {
        tsafe_modulus_init(&c->mod[i], q[i]);
        TSAFE_TRY(tsafe_ntt_table_init(&c->ntt[i], p->log_n, q[i], 1));
        c->Q *= q[i];
        c->log2_q += log2((double)q[i]);
        c->one_shoup[i] = tsafe_shoup_precompute(1, q[i]);
    }
    c->ring = (struct tsafe_ring_view){c->n, p->log_n, c->L, c->mod, c->ntt};
    TSAFE_TRY(tsafe_coset_cache_create(c->ntt, 1, &c->coset));
    /* the product of primes just below 2^b_i may still pass the bound by a
     * fraction of a bit: check the real size too */
    if (!(p->flags & TSAFE_BFV_INSECURE_FOR_TESTS) &&
        c->log2_q > tsafe_params_max_log_q(p->log_n))
        TSAFE_CHECK(0, TSAFE_E_INSECURE);
    c->t = 1ull << p->t_bits;
    tsafe_u128 delta = c->Q >> p->t_bits;
    c->q_mod_t = (uint64_t)(c->Q & (c->t - 1));
    for (uint32_t i = 0; i < c->L; i++) {
        c->delta_mod[i] = (uint64_t)(delta % q[i]);
        c->delta_shoup[i] = tsafe_shoup_precompute(c->delta_mod[i], q[i]);
        c->r64[i] = (uint64_t)(((tsafe_u128)1 << 64) % q[i]);
        c->r64_shoup[i] = tsafe_shoup_precompute(c->r64[i], q[i]);
    }
    for (uint32_t l = 1; l < c->L; l++)
        for (uint32_t i = 0; i < l; i++)
            tsafe_switch_consts_init(&c->sw[l][i], &c->mod[i], &c->mod[l]);

    crypto_generichash_state h;
    crypto_generichash_init(&h, NULL, 0, TSAFE_BFV_FINGERPRINT_BYTES);
    uint8_t buf[8 * 9];
    uint64_t words[9] = {0x3156464253545354ull /* "TSTSBFV1" */, p->log_n,
                         p->resp_bits, p->gap_bits, p->t_bits, c->L, q[0], q[1], q[2]};
    for (int w = 0; w < 9; w++)
        tsafe_store_le64(buf + 8 * w, words[w]);
    crypto_generichash_update(&h, buf, sizeof buf);
    crypto_generichash_final(&h, c->fingerprint, TSAFE_BFV_FINGERPRINT_BYTES);
    *out = c;
    return TSAFE_OK;
fail:
    tsafe_bfv_context_free(c);
    return st;
}

void tsafe_bfv_context_free(tsafe_bfv_context *c)
{
    if (!c)
        return;
    for (uint32_t i = 0; i < TSAFE_BFV_MAX_LIMBS; i++)
        if (c->ntt[i].n)
            tsafe_ntt_table_free(&c->ntt[i]);
    tsafe_coset_cache_free(c->coset);
    free(c);
}

size_t tsafe_bfv_context_n(const tsafe_bfv_context *c) { return c ? c->n : 0; }

uint64_t tsafe_bfv_context_prime(const tsafe_bfv_context *c, uint32_t i)
{
    return c && i < c->L ? c->mod[i].q : 0;
}

uint32_t tsafe_bfv_context_limbs(const tsafe_bfv_context *c) { return c ? c->L : 0; }

double tsafe_bfv_context_log2_q(const tsafe_bfv_context *c)
{
    return c ? c->log2_q : 0.0;
}

const tsafe_bfv_params *tsafe_bfv_context_params(const tsafe_bfv_context *c)
{
    return c ? &c->p : NULL;
}

void tsafe_bfv_context_fingerprint(const tsafe_bfv_context *c,
                                   uint8_t out[TSAFE_BFV_FINGERPRINT_BYTES])
{
    if (!c || !out)
        return;
    memcpy(out, c->fingerprint, TSAFE_BFV_FINGERPRINT_BYTES);
}

void tsafe_bfv_expand_a(const tsafe_bfv_context *c, const uint8_t seed[32],
                        uint64_t *a)
{
    for (uint32_t i = 0; i < c->L; i++) {
        tsafe_prng g;
        tsafe_prng_init(&g, seed, TSAFE_BFV_STREAM_A + i);
        tsafe_prng_uniform_mod_tight(&g, c->mod[i].q, a + i * c->n, c->n);
        tsafe_prng_clear(&g);
    }
}

/* round(Q m / 2^T) mod q_i from floor(Q / 2^T) mod q_i (dmod) and
 * Q mod 2^T (qmt): floor(Q/2^T) m + round(qmt m / 2^T). |m| < 2^63 and
 * qmt |m| < 2^128. */
static uint64_t scale_up_at(const tsafe_bfv_context *c, uint32_t i, int64_t m,
                            uint64_t dmod, tsafe_u128 qmt, uint32_t T)
{
    uint64_t am = m < 0 ? (uint64_t)0 - (uint64_t)m : (uint64_t)m;
    const tsafe_modulus *q = &c->mod[i];
    /* |m| < 2^63 and, below, lo < 2^T: both reduce by Barrett (no
     * division; the 30-bit gap limbs need it for every value above q) */
    uint64_t ar = am < q->q ? am : tsafe_reduce_128(am, q);
    uint64_t hi = tsafe_mul_mod(dmod, ar, q);
    uint64_t lo = (uint64_t)((qmt * am + ((tsafe_u128)1 << (T - 1))) >> T);
    uint64_t lr = lo < q->q ? lo : tsafe_reduce_128(lo, q);
    uint64_t v = tsafe_add_mod(hi, lr, q->q);
    return m < 0 ? tsafe_neg_mod(v, q->q) : v;
}

uint64_t tsafe_bfv_scale_up(const tsafe_bfv_context *c, uint32_t i, int64_t m)
{
    return scale_up_at(c, i, m, c->delta_mod[i], c->q_mod_t, c->p.t_bits);
}

void tsafe_bfv_frac_init(const tsafe_bfv_context *c, uint32_t frac_bits, tsafe_bfv_frac *f)
{
    uint32_t T = c->p.t_bits + frac_bits;
    f->bits = T;
    f->q_mod = c->Q & (((tsafe_u128)1 << T) - 1);
    tsafe_u128 delta = c->Q >> T;
    for (uint32_t i = 0; i < c->L; i++)
        f->delta_mod[i] = (uint64_t)(delta % c->mod[i].q);
}

uint64_t tsafe_bfv_scale_up_frac(const tsafe_bfv_context *c, const tsafe_bfv_frac *f,
                                 uint32_t i, int64_t m)
{
    return scale_up_at(c, i, m, f->delta_mod[i], f->q_mod, f->bits);
}

/* ------------------------------------------------------------------ keys */

static void limbs_free(const tsafe_bfv_context *c, uint64_t *p, int wipe)
{
    if (p && wipe)
        sodium_memzero(p, (size_t)c->L * c->n * sizeof *p);
    free(p);
}

void tsafe_bfv_secret_key_free(tsafe_bfv_secret_key *sk)
{
    if (!sk)
        return;
    const tsafe_bfv_context *c = sk->ctx;
    if (sk->s)
        sodium_memzero(sk->s, c->n);
    free(sk->s);
    limbs_free(c, sk->s_ntt, 1);
    limbs_free(c, sk->s_shoup, 1);
    if (sk->plus)
        sodium_memzero(sk->plus, c->n * sizeof *sk->plus);
    if (sk->minus)
        sodium_memzero(sk->minus, c->n * sizeof *sk->minus);
    free(sk->plus);
    free(sk->minus);
    sodium_memzero(sk, sizeof *sk);
    free(sk);
}

tsafe_status tsafe_bfv_secret_key_generate(const tsafe_bfv_context *c,
                                           const uint8_t *seed,
                                           tsafe_bfv_secret_key **out)
{
    TSAFE_REQUIRE(c && out, TSAFE_E_NULL);
    *out = NULL;
    tsafe_status st;
    uint8_t fresh[32];
    if (!seed) {
        if ((st = tsafe_seed_fresh(fresh)) != TSAFE_OK)
            return st;
        seed = fresh;
    }
    tsafe_bfv_secret_key *sk = calloc(1, sizeof *sk);
    if (!sk) {
        sodium_memzero(fresh, sizeof fresh);
        return TSAFE_E_NOMEM;
    }
    sk->ctx = c;
    sk->s = malloc(c->n);
    sk->s_ntt = tsafe_bfv_limbs_alloc(c);
    sk->s_shoup = tsafe_bfv_limbs_alloc(c);
    sk->plus = malloc(c->n * sizeof *sk->plus);
    sk->minus = malloc(c->n * sizeof *sk->minus);
    TSAFE_CHECK(sk->s && sk->s_ntt && sk->s_shoup && sk->plus && sk->minus,
                TSAFE_E_NOMEM);
    tsafe_prng g;
    tsafe_prng_init(&g, seed, TSAFE_BFV_STREAM_SECRET);
    tsafe_prng_ternary(&g, sk->s, c->n);
    tsafe_prng_clear(&g);
    for (size_t k = 0; k < c->n; k++) {
        if (sk->s[k] > 0)
            sk->plus[sk->n_plus++] = (uint32_t)k;
        else if (sk->s[k] < 0)
            sk->minus[sk->n_minus++] = (uint32_t)k;
    }
    for (uint32_t i = 0; i < c->L; i++) {
        uint64_t q = c->mod[i].q, *si = sk->s_ntt + i * c->n;
        for (size_t k = 0; k < c->n; k++)
            si[k] = sk->s[k] > 0 ? 1 : sk->s[k] < 0 ? q - 1 : 0;
        tsafe_ntt_forward(&c->ntt[i], si);
        tsafe_vec_shoup_precompute(sk->s_shoup + i * c->n, si, c->n, q);
    }
    sodium_memzero(fresh, sizeof fresh);
    *out = sk;
    return TSAFE_OK;
fail:
    sodium_memzero(fresh, sizeof fresh);
    tsafe_bfv_secret_key_free(sk);
    return st;
}

void tsafe_bfv_public_key_free(tsafe_bfv_public_key *pk)
{
    if (!pk)
        return;
    limbs_free(pk->ctx, pk->p0, 0);
    limbs_free(pk->ctx, pk->p0_shoup, 0);
    limbs_free(pk->ctx, pk->p1, 0);
    limbs_free(pk->ctx, pk->p1_shoup, 0);
    free(pk);
}

tsafe_status tsafe_bfv_public_key_alloc(const tsafe_bfv_context *c,
                                        tsafe_bfv_public_key **out)
{
    tsafe_bfv_public_key *pk = calloc(1, sizeof *pk);
    if (!pk)
        return TSAFE_E_NOMEM;
    pk->ctx = c;
    pk->p0 = tsafe_bfv_limbs_alloc(c);
    pk->p0_shoup = tsafe_bfv_limbs_alloc(c);
    pk->p1 = tsafe_bfv_limbs_alloc(c);
    pk->p1_shoup = tsafe_bfv_limbs_alloc(c);
    if (!pk->p0 || !pk->p0_shoup || !pk->p1 || !pk->p1_shoup) {
        tsafe_bfv_public_key_free(pk);
        return TSAFE_E_NOMEM;
    }
    *out = pk;
    return TSAFE_OK;
}

void tsafe_bfv_public_key_finish(tsafe_bfv_public_key *pk)
{
    const tsafe_bfv_context *c = pk->ctx;
    tsafe_bfv_expand_a(c, pk->seed, pk->p1);
    for (uint32_t i = 0; i < c->L; i++) {
        uint64_t q = c->mod[i].q;
        tsafe_vec_shoup_precompute(pk->p0_shoup + i * c->n, pk->p0 + i * c->n, c->n, q);
        tsafe_vec_shoup_precompute(pk->p1_shoup + i * c->n, pk->p1 + i * c->n, c->n, q);
    }
}

tsafe_status tsafe_bfv_public_key_generate(const tsafe_bfv_context *c,
                                           const tsafe_bfv_secret_key *sk,
                                           const uint8_t *seed,
                                           tsafe_bfv_public_key **out)
{
    TSAFE_REQUIRE(c && sk && out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(sk->ctx == c, TSAFE_E_PARAMS_MISMATCH);
    tsafe_status st;
    uint8_t master[32], eseed[32];
    if (seed)
        memcpy(master, seed, 32);
    else if ((st = tsafe_seed_fresh(master)) != TSAFE_OK)
        return st;
    tsafe_bfv_public_key *pk = NULL;
    int8_t *e = malloc(c->n);
    TSAFE_CHECK(e, TSAFE_E_NOMEM);
    TSAFE_TRY(tsafe_bfv_public_key_alloc(c, &pk));
    tsafe_seed_derive(pk->seed, master, "tsafe-bfv-pk-a");
    tsafe_seed_derive(eseed, master, "tsafe-bfv-pk-e");
    tsafe_bfv_expand_a(c, pk->seed, pk->p1);
    tsafe_prng g;
    tsafe_prng_init(&g, eseed, TSAFE_BFV_STREAM_ERR);
    tsafe_prng_cbd_tight(&g, e, c->n);
    tsafe_prng_clear(&g);
    for (uint32_t i = 0; i < c->L; i++) {
        uint64_t q = c->mod[i].q, *p0 = pk->p0 + i * c->n;
        const uint64_t *a = pk->p1 + i * c->n;
        for (size_t k = 0; k < c->n; k++)
            p0[k] = e[k] >= 0 ? (uint64_t)e[k] : q - (uint64_t)(-e[k]);
        tsafe_ntt_forward(&c->ntt[i], p0);
        for (size_t k = 0; k < c->n; k++) {
            uint64_t as = tsafe_mul_shoup(a[k], sk->s_ntt[i * c->n + k],
                                          sk->s_shoup[i * c->n + k], q);
            p0[k] = tsafe_sub_mod(p0[k], as, q);
        }
    }
    tsafe_bfv_public_key_finish(pk);
    st = TSAFE_OK;
    *out = pk;
    pk = NULL;
fail:
    if (e)
        sodium_memzero(e, c->n);
    free(e);
    sodium_memzero(master, sizeof master);
    sodium_memzero(eseed, sizeof eseed);
    tsafe_bfv_public_key_free(pk);
    return st;
}
