/* BFV operations: encryption (client), plaintext products and the sealing
 * step (server), decryption of read coefficients (client). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "bfv_internal.h"
#include "tsafe_check.h"
#include "../common/prng.h"

/* ------------------------------------------------------------ ciphertext */

tsafe_status tsafe_bfv_ct_create(const tsafe_bfv_context *c, tsafe_bfv_ct **out)
{
    TSAFE_REQUIRE(c && out, TSAFE_E_NULL);
    *out = NULL;
    tsafe_bfv_ct *ct = calloc(1, sizeof *ct);
    if (!ct)
        return TSAFE_E_NOMEM;
    ct->ctx = c;
    ct->c0 = tsafe_bfv_limbs_alloc(c);
    ct->c1 = tsafe_bfv_limbs_alloc(c);
    if (!ct->c0 || !ct->c1) {
        tsafe_bfv_ct_free(ct);
        return TSAFE_E_NOMEM;
    }
    *out = ct;
    return TSAFE_OK;
}

void tsafe_bfv_ct_free(tsafe_bfv_ct *ct)
{
    if (!ct)
        return;
    free(ct->c0);
    free(ct->c1);
    free(ct);
}

/* Encrypt with the scale Q / (t 2^frac_bits): frac_bits 0 is the plain
 * encoding, round(Q m / t). */
static tsafe_status encrypt_at(const tsafe_bfv_context *c, const tsafe_bfv_secret_key *sk,
                               const int64_t *m, size_t count, uint32_t frac_bits,
                               const uint8_t *seed, tsafe_bfv_ct *ct)
{
    TSAFE_REQUIRE(c && sk && ct && (m || count == 0), TSAFE_E_NULL);
    TSAFE_REQUIRE(sk->ctx == c && ct->ctx == c, TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(count <= c->n, TSAFE_E_RANGE);
    TSAFE_REQUIRE(frac_bits <= TSAFE_BFV_MAX_FRAC_BITS && c->p.t_bits + frac_bits <= 62,
                  TSAFE_E_RANGE);
    tsafe_bfv_frac f;
    tsafe_bfv_frac_init(c, frac_bits, &f);
    int64_t half = (int64_t)1 << (f.bits - 1);
    for (size_t k = 0; k < count; k++)
        TSAFE_REQUIRE(m[k] >= -half && m[k] < half, TSAFE_E_VALUE_RANGE);
    tsafe_status st;
    uint8_t master[32], eseed[32];
    if (seed)
        memcpy(master, seed, 32);
    else if ((st = tsafe_seed_fresh(master)) != TSAFE_OK)
        return st;
    int8_t *e = malloc(c->n);
    uint64_t *tmp = tsafe_calloc_aligned(c->n, sizeof *tmp);
    TSAFE_CHECK(e && tmp, TSAFE_E_NOMEM);
    ct->valid = 0;
    tsafe_seed_derive(ct->seed, master, "tsafe-bfv-ct-a");
    tsafe_seed_derive(eseed, master, "tsafe-bfv-ct-e");
    tsafe_prng g;
    tsafe_prng_init(&g, eseed, TSAFE_BFV_STREAM_ERR);
    tsafe_prng_cbd_tight(&g, e, c->n);
    tsafe_prng_clear(&g);
    tsafe_bfv_expand_a(c, ct->seed, ct->c1);
    for (uint32_t i = 0; i < c->L; i++) {
        uint64_t q = c->mod[i].q;
        tsafe_vec_from_i8(tmp, e, c->n, q); /* e, then + round(Q m / t) */
        for (size_t k = 0; k < count; k++)
            if (m[k])
                tmp[k] = tsafe_add_mod(tmp[k], tsafe_bfv_scale_up_frac(c, &f, i, m[k]), q);
        tsafe_ntt_forward(&c->ntt[i], tmp);
        uint64_t *c0 = ct->c0 + i * c->n;
        const uint64_t *a = ct->c1 + i * c->n;
        const uint64_t *s = sk->s_ntt + i * c->n, *sp = sk->s_shoup + i * c->n;
        tsafe_vec_sub_mul_shoup(c0, tmp, a, s, sp, c->n, q); /* c0 = tmp - a s */
    }
    ct->valid = 1;
    st = TSAFE_OK;
fail:
    if (e)
        sodium_memzero(e, c->n);
    if (tmp)
        sodium_memzero(tmp, c->n * sizeof *tmp); /* held Q m / t + e */
    free(e);
    free(tmp);
    sodium_memzero(master, sizeof master);
    sodium_memzero(eseed, sizeof eseed);
    return st;
}

tsafe_status tsafe_bfv_encrypt(const tsafe_bfv_context *c, const tsafe_bfv_secret_key *sk,
                               const int64_t *m, size_t count, const uint8_t *seed,
                               tsafe_bfv_ct *ct)
{
    return encrypt_at(c, sk, m, count, 0, seed, ct);
}

tsafe_status tsafe_bfv_encrypt_frac(const tsafe_bfv_context *c, const tsafe_bfv_secret_key *sk,
                                    const int64_t *m, size_t count, uint32_t frac_bits,
                                    const uint8_t *seed, tsafe_bfv_ct *ct)
{
    return encrypt_at(c, sk, m, count, frac_bits, seed, ct);
}

/* ------------------------------------------------------------- plaintext */

tsafe_status tsafe_bfv_plain_create(const tsafe_bfv_context *c,
                                    const int64_t *coeffs, size_t count,
                                    tsafe_bfv_plain **out)
{
    TSAFE_REQUIRE(c && out && (coeffs || count == 0), TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(count <= c->n, TSAFE_E_RANGE);
    const int64_t lim = (int64_t)1 << 40;
    for (size_t k = 0; k < count; k++)
        TSAFE_REQUIRE(coeffs[k] > -lim && coeffs[k] < lim, TSAFE_E_VALUE_RANGE);
    tsafe_bfv_plain *pt = calloc(1, sizeof *pt);
    if (!pt)
        return TSAFE_E_NOMEM;
    pt->ctx = c;
    /* one block, values then quotients (tsafe_bfv_plain_operand lends both
     * to the CPU backend without a copy) */
    pt->p = tsafe_calloc_aligned(2 * (size_t)c->L * c->n, sizeof *pt->p);
    if (!pt->p) {
        tsafe_bfv_plain_free(pt);
        return TSAFE_E_NOMEM;
    }
    pt->ps = pt->p + (size_t)c->L * c->n;
    for (uint32_t i = 0; i < c->L; i++) {
        uint64_t q = c->mod[i].q, *p = pt->p + i * c->n;
        tsafe_bfv_encode_limb(c, i, coeffs, count, p); /* the rest stays 0 */
        tsafe_ntt_forward(&c->ntt[i], p);
        tsafe_vec_shoup_precompute(pt->ps + i * c->n, p, c->n, q);
    }
    *out = pt;
    return TSAFE_OK;
}

void tsafe_bfv_plain_free(tsafe_bfv_plain *pt)
{
    if (!pt)
        return;
    /* the adapter's weights: not the client's secret, but the server's */
    if (pt->p)
        sodium_memzero(pt->p, (size_t)pt->ctx->L * pt->ctx->n * sizeof *pt->p);
    free(pt->p); /* ps lives in the same block */
    free(pt);
}

/* ----------------------------------------------------------- accumulator */

tsafe_status tsafe_bfv_acc_create(const tsafe_bfv_context *c,
                                  tsafe_bfv_acc **out)
{
    TSAFE_REQUIRE(c && out, TSAFE_E_NULL);
    *out = NULL;
    tsafe_bfv_acc *acc = calloc(1, sizeof *acc);
    if (!acc)
        return TSAFE_E_NOMEM;
    acc->ctx = c;
    acc->a0 = tsafe_bfv_limbs_alloc(c);
    acc->a1 = tsafe_bfv_limbs_alloc(c);
    acc->tmp = tsafe_calloc_aligned(c->n, sizeof(uint64_t)); /* the sealing's r, one limb */
    if (!acc->a0 || !acc->a1 || !acc->tmp) {
        tsafe_bfv_acc_free(acc);
        return TSAFE_E_NOMEM;
    }
    *out = acc;
    return TSAFE_OK;
}

void tsafe_bfv_acc_free(tsafe_bfv_acc *acc)
{
    if (!acc)
        return;
    free(acc->a0);
    free(acc->a1);
    free(acc->tmp);
    free(acc);
}

void tsafe_bfv_acc_zero(tsafe_bfv_acc *acc)
{
    if (!acc)
        return;
    size_t words = (size_t)acc->ctx->L * acc->ctx->n;
    memset(acc->a0, 0, words * sizeof *acc->a0);
    memset(acc->a1, 0, words * sizeof *acc->a1);
}

tsafe_status tsafe_bfv_acc_mul_add(tsafe_bfv_acc *acc, const tsafe_bfv_ct *ct,
                                   const tsafe_bfv_plain *pt)
{
    TSAFE_REQUIRE(acc && ct && pt, TSAFE_E_NULL);
    const tsafe_bfv_context *c = acc->ctx;
    TSAFE_REQUIRE(tsafe_bfv_same_ctx(ct->ctx, c) && tsafe_bfv_same_ctx(pt->ctx, c), TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(ct->valid, TSAFE_E_STATE);
    for (uint32_t i = 0; i < c->L; i++) {
        size_t o = i * c->n;
        tsafe_vec_mul_shoup_add2(acc->a0 + o, acc->a1 + o, ct->c0 + o, ct->c1 + o, pt->p + o,
                                 pt->ps + o, c->n, c->mod[i].q);
    }
    return TSAFE_OK;
}

/* ---------------------------------------------------------------- sealed */

tsafe_status tsafe_bfv_sealed_create(const tsafe_bfv_context *c,
                                     size_t max_reads, tsafe_bfv_sealed **out)
{
    TSAFE_REQUIRE(c && out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(max_reads <= c->n, TSAFE_E_RANGE);
    tsafe_bfv_sealed *r = calloc(1, sizeof *r);
    if (!r)
        return TSAFE_E_NOMEM;
    r->ctx = c;
    r->cap = max_reads;
    r->c1 = tsafe_calloc_aligned(c->n, sizeof *r->c1);
    r->c0 = calloc(max_reads ? max_reads : 1, sizeof *r->c0);
    if (!r->c1 || !r->c0) {
        tsafe_bfv_sealed_free(r);
        return TSAFE_E_NOMEM;
    }
    *out = r;
    return TSAFE_OK;
}

void tsafe_bfv_sealed_free(tsafe_bfv_sealed *r)
{
    if (!r)
        return;
    free(r->c1);
    free(r->c0);
    free(r);
}

const uint64_t *tsafe_bfv_sealed_c1(const tsafe_bfv_sealed *r)
{
    return r ? r->c1 : NULL;
}

const uint64_t *tsafe_bfv_sealed_c0(const tsafe_bfv_sealed *r)
{
    return r ? r->c0 : NULL;
}

/* ------------------------------------------------------------ decryption */

/* round(t * v / q0) for v < q0 (not reduced mod t): a long-double quotient
 * estimate (64-bit mantissa, the quotient is below 2^43, so it is off by at
 * most one) corrected with exact 128-bit products -- no 128-bit division
 * per coefficient. */
static inline uint64_t scale_down(const tsafe_bfv_context *c, uint64_t v)
{
    uint64_t q = c->mod[0].q;
    tsafe_u128 num = (tsafe_u128)v * c->t + (q >> 1);
    uint64_t m = (uint64_t)((long double)num / (long double)q);
    tsafe_u128 prod = (tsafe_u128)m * q;
    while (prod > num) {
        m--;
        prod -= q;
    }
    while (num - prod >= q) {
        m++;
        prod += q;
    }
    return m;
}

/* (c1 * s)[pos] mod q0 for each read, by signed sums over the ternary
 * secret (no transform: a handful of reads costs N additions each). */
static void c1s_direct(const tsafe_bfv_context *c, const tsafe_bfv_secret_key *sk,
                       const uint64_t *c1, const uint32_t *pos, size_t n_reads,
                       uint64_t *out)
{
    size_t n = c->n;
    uint64_t q = c->mod[0].q;
    for (size_t k = 0; k < n_reads; k++) {
        size_t p = pos[k];
        tsafe_u128 plus = 0, minus = 0;
        /* s_j = +1 contributes c1[p - j] (or -c1[p - j + N] when p < j) */
        for (size_t t = 0; t < sk->n_plus; t++) {
            size_t j = sk->plus[t];
            if (j <= p)
                plus += c1[p - j];
            else
                minus += c1[p + n - j];
        }
        for (size_t t = 0; t < sk->n_minus; t++) {
            size_t j = sk->minus[t];
            if (j <= p)
                minus += c1[p - j];
            else
                plus += c1[p + n - j];
        }
        out[k] = tsafe_sub_mod((uint64_t)(plus % q), (uint64_t)(minus % q), q);
    }
}

/* The same through the NTT (many reads, or reads a coset read can take
 * from NTT form: a block's rows). */
static tsafe_status c1s_ntt(const tsafe_bfv_context *c,
                            const tsafe_bfv_secret_key *sk, const uint64_t *c1,
                            const uint32_t *pos, size_t n_reads, uint64_t *out)
{
    size_t n = c->n;
    uint64_t q = c->mod[0].q;
    uint64_t *tmp = tsafe_calloc_aligned(2 * n, sizeof *tmp);
    if (!tmp)
        return TSAFE_E_NOMEM;
    memcpy(tmp, c1, n * sizeof *tmp);
    tsafe_ntt_forward(&c->ntt[0], tmp);
    tsafe_vec_mul_shoup(tmp, tmp, sk->s_ntt, sk->s_shoup, n, q);
    tsafe_status st = tsafe_coset_read(c->coset, 0, tmp, pos, n_reads, out, tmp + n);
    if (st == TSAFE_E_UNSUPPORTED) {
        tsafe_ntt_inverse(&c->ntt[0], tmp);
        for (size_t k = 0; k < n_reads; k++)
            out[k] = tmp[pos[k]];
        st = TSAFE_OK;
    }
    sodium_memzero(tmp, 2 * n * sizeof *tmp); /* c1*s: key-dependent */
    free(tmp);
    return st;
}

static tsafe_status phase(const tsafe_bfv_context *c,
                          const tsafe_bfv_secret_key *sk,
                          const tsafe_bfv_sealed *r, const uint32_t *pos,
                          size_t n_reads, uint64_t *v)
{
    TSAFE_REQUIRE(c && sk && r && v && (pos || n_reads == 0), TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_bfv_same_ctx(sk->ctx, c) && tsafe_bfv_same_ctx(r->ctx, c), TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(n_reads == r->n_reads, TSAFE_E_RANGE);
    for (size_t k = 0; k < n_reads; k++)
        TSAFE_REQUIRE(pos[k] < c->n, TSAFE_E_RANGE);
    /* direct sums cost ~(2/3)N per read; the transform ~3 N log N, or
     * one forward NTT and N products when the reads are a coset (a block's
     * rows: measured 3x faster than direct sums at 8 reads) */
    uint32_t cm, cc;
    int coset = n_reads >= 3 && tsafe_coset_fit(c->n, pos, n_reads, &cm, &cc);
    if (!coset && n_reads * 2 <= 9 * (size_t)c->p.log_n)
        c1s_direct(c, sk, r->c1, pos, n_reads, v);
    else {
        tsafe_status st = c1s_ntt(c, sk, r->c1, pos, n_reads, v);
        if (st != TSAFE_OK)
            return st;
    }
    uint64_t q = c->mod[0].q;
    for (size_t k = 0; k < n_reads; k++)
        v[k] = tsafe_add_mod(v[k], r->c0[k], q);
    return TSAFE_OK;
}

tsafe_status tsafe_bfv_decrypt_reads(const tsafe_bfv_context *c,
                                     const tsafe_bfv_secret_key *sk,
                                     const tsafe_bfv_sealed *r,
                                     const uint32_t *pos, size_t n_reads,
                                     uint64_t *m)
{
    tsafe_status st = phase(c, sk, r, pos, n_reads, m);
    if (st != TSAFE_OK)
        return st;
    for (size_t k = 0; k < n_reads; k++)
        m[k] = scale_down(c, m[k]) & (c->t - 1);
    return TSAFE_OK;
}

tsafe_status tsafe_bfv_decrypt_noise(const tsafe_bfv_context *c,
                                     const tsafe_bfv_secret_key *sk,
                                     const tsafe_bfv_sealed *r,
                                     const uint32_t *pos, size_t n_reads,
                                     double *noise)
{
    TSAFE_REQUIRE(noise || n_reads == 0, TSAFE_E_NULL);
    uint64_t *v = malloc((n_reads ? n_reads : 1) * sizeof *v);
    if (!v)
        return TSAFE_E_NOMEM;
    tsafe_status st = phase(c, sk, r, pos, n_reads, v);
    uint64_t q = c ? c->mod[0].q : 0;
    for (size_t k = 0; st == TSAFE_OK && k < n_reads; k++) {
        uint64_t m = scale_down(c, v[k]); /* not reduced mod t: the nearest
                                             multiple of q/t */
        long double e = (long double)v[k] - (long double)q * m / (long double)c->t;
        noise[k] = (double)e;
    }
    free(v);
    return st;
}
