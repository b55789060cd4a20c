/* BFV operations: encryption (client), plaintext products and the sealing
 * step (server), decryption of read coefficients (client). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "bfv_internal.h"
#include "tsafe_check.h"
#include "../common/prng.h"

/* Objects of equal contexts may be combined (a server's sites and the
 * ciphertexts it reads are built on separate but identical contexts). */
static int same_ctx(const tsafe_bfv_context *a, const tsafe_bfv_context *b)
{
    return a == b || memcmp(a->fingerprint, b->fingerprint,
                            TSAFE_BFV_FINGERPRINT_BYTES) == 0;
}

static inline uint64_t signed_mod(int64_t v, uint64_t q)
{
    if (v >= 0)
        return (uint64_t)v % q;
    uint64_t r = ((uint64_t)0 - (uint64_t)v) % q;
    return r ? q - r : 0;
}

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

tsafe_status tsafe_bfv_encrypt(const tsafe_bfv_context *c,
                               const tsafe_bfv_secret_key *sk, const int64_t *m,
                               size_t count, const uint8_t *seed,
                               tsafe_bfv_ct *ct)
{
    TSAFE_REQUIRE(c && sk && ct && (m || count == 0), TSAFE_E_NULL);
    TSAFE_REQUIRE(sk->ctx == c && ct->ctx == c, TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(count <= c->n, TSAFE_E_RANGE);
    int64_t half = (int64_t)(c->t >> 1);
    for (size_t k = 0; k < count; k++)
        TSAFE_REQUIRE(m[k] >= -half && m[k] < half, TSAFE_E_VALUE_RANGE);
    tsafe_status st;
    uint8_t master[32], eseed[32];
    if (seed)
        memcpy(master, seed, 32);
    else if ((st = tsafe_seed_fresh(master)) != TSAFE_OK)
        return st;
    int8_t *e = malloc(c->n);
    uint64_t *tmp = malloc(c->n * sizeof *tmp);
    TSAFE_CHECK(e && tmp, TSAFE_E_NOMEM);
    ct->valid = 0;
    tsafe_seed_derive(ct->seed, master, "tsafe-bfv-ct-a");
    tsafe_seed_derive(eseed, master, "tsafe-bfv-ct-e");
    tsafe_prng g;
    tsafe_prng_init(&g, eseed, TSAFE_BFV_STREAM_ERR);
    tsafe_prng_cbd(&g, e, c->n);
    tsafe_prng_clear(&g);
    tsafe_bfv_expand_a(c, ct->seed, ct->c1);
    for (uint32_t i = 0; i < 2; i++) {
        uint64_t q = c->mod[i].q;
        for (size_t k = 0; k < c->n; k++) {
            uint64_t v = e[k] >= 0 ? (uint64_t)e[k] : q - (uint64_t)(-e[k]);
            if (k < count && m[k])
                v = tsafe_add_mod(v, tsafe_bfv_scale_up(c, i, m[k]), q);
            tmp[k] = v;
        }
        tsafe_ntt_forward(&c->ntt[i], tmp);
        uint64_t *c0 = ct->c0 + i * c->n;
        const uint64_t *a = ct->c1 + i * c->n;
        const uint64_t *s = sk->s_ntt + i * c->n, *sp = sk->s_shoup + i * c->n;
        for (size_t k = 0; k < c->n; k++)
            c0[k] = tsafe_sub_mod(tmp[k], tsafe_mul_shoup(a[k], s[k], sp[k], q), q);
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
    pt->p = tsafe_bfv_limbs_alloc(c);
    pt->ps = tsafe_bfv_limbs_alloc(c);
    if (!pt->p || !pt->ps) {
        tsafe_bfv_plain_free(pt);
        return TSAFE_E_NOMEM;
    }
    for (uint32_t i = 0; i < 2; i++) {
        uint64_t q = c->mod[i].q, *p = pt->p + i * c->n;
        for (size_t k = 0; k < count; k++)
            p[k] = signed_mod(coeffs[k], q);
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
        sodium_memzero(pt->p, 2 * pt->ctx->n * sizeof *pt->p);
    free(pt->p);
    free(pt->ps);
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
    acc->tmp = calloc(2 * c->n, sizeof(uint64_t)); /* u and a product */
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
    memset(acc->a0, 0, 2 * acc->ctx->n * sizeof *acc->a0);
    memset(acc->a1, 0, 2 * acc->ctx->n * sizeof *acc->a1);
}

/* out += a * w (w fixed with Shoup quotients wp), one limb. */
static void mul_add_limb(uint64_t *out, const uint64_t *a, const uint64_t *w,
                         const uint64_t *wp, uint64_t *tmp, size_t n,
                         uint64_t q)
{
    tsafe_vec_mul_shoup(tmp, a, w, wp, n, q);
    tsafe_vec_add(out, out, tmp, n, q);
}

tsafe_status tsafe_bfv_acc_mul_add(tsafe_bfv_acc *acc, const tsafe_bfv_ct *ct,
                                   const tsafe_bfv_plain *pt)
{
    TSAFE_REQUIRE(acc && ct && pt, TSAFE_E_NULL);
    const tsafe_bfv_context *c = acc->ctx;
    TSAFE_REQUIRE(same_ctx(ct->ctx, c) && same_ctx(pt->ctx, c), TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(ct->valid, TSAFE_E_STATE);
    for (uint32_t i = 0; i < 2; i++) {
        size_t o = i * c->n;
        uint64_t q = c->mod[i].q;
        if (c->ntt[i].use_ifma) { /* the vector kernels run IFMA */
            mul_add_limb(acc->a0 + o, ct->c0 + o, pt->p + o, pt->ps + o, acc->tmp, c->n, q);
            mul_add_limb(acc->a1 + o, ct->c1 + o, pt->p + o, pt->ps + o, acc->tmp, c->n, q);
            continue;
        }
        /* one pass for both polynomials: the plaintext is read once */
        uint64_t *a0 = acc->a0 + o, *a1 = acc->a1 + o;
        const uint64_t *x0 = ct->c0 + o, *x1 = ct->c1 + o, *w = pt->p + o, *wp = pt->ps + o;
        for (size_t k = 0; k < c->n; k++) {
            a0[k] = tsafe_add_mod(a0[k], tsafe_mul_shoup(x0[k], w[k], wp[k], q), q);
            a1[k] = tsafe_add_mod(a1[k], tsafe_mul_shoup(x1[k], w[k], wp[k], q), q);
        }
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
    r->c1 = calloc(c->n, sizeof *r->c1);
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

/* Uniform integer in [-2^bits, 2^bits] (bits <= 100) as residues mod q0, q1:
 * rejection sampling on bits + 2 random bits. */
static void flood_sample(tsafe_prng *g, uint32_t bits, const tsafe_bfv_context *c,
                         uint64_t out[2])
{
    tsafe_u128 span = ((tsafe_u128)1 << (bits + 1)); /* values 0..span */
    tsafe_u128 mask = ((tsafe_u128)1 << (bits + 2)) - 1, v;
    do {
        uint64_t lo = tsafe_prng_u64(g), hi = tsafe_prng_u64(g);
        v = (((tsafe_u128)hi << 64) | lo) & mask;
    } while (v > span);
    tsafe_u128 half = (tsafe_u128)1 << bits;
    int neg = v < half;
    tsafe_u128 mag = neg ? half - v : v - half;
    for (uint32_t i = 0; i < 2; i++) { /* mag < 2^101 < q * 2^64: Barrett */
        uint64_t q = c->mod[i].q, r = tsafe_reduce_128(mag, &c->mod[i]);
        out[i] = neg ? tsafe_neg_mod(r, q) : r;
    }
}

/* round(x / q1) mod q0 for x given by its residues (x0 mod q0, x1 mod q1). */
static inline uint64_t switch_down(const tsafe_bfv_context *c, uint64_t x0,
                                   uint64_t x1)
{
    uint64_t q0 = c->mod[0].q, q1 = c->mod[1].q;
    uint64_t y1 = x1 + c->half_q1; /* (x + h) mod q1 */
    if (y1 >= q1)
        y1 -= q1;
    uint64_t y0 = tsafe_add_mod(x0, c->half_q1_q0, q0);
    uint64_t d = tsafe_sub_mod(y0, tsafe_reduce_128(y1, &c->mod[0]), q0);
    return tsafe_mul_shoup(d, c->q1_inv, c->q1_inv_shoup, q0);
}

tsafe_status tsafe_bfv_seal(const tsafe_bfv_context *c, tsafe_bfv_acc *acc,
                            const tsafe_bfv_public_key *pk, const uint32_t *pos,
                            const uint64_t *mask, size_t n_reads,
                            uint32_t flood_bits, const uint8_t *seed,
                            tsafe_bfv_sealed *r)
{
    TSAFE_REQUIRE(c && acc && pk && r && (pos || n_reads == 0), TSAFE_E_NULL);
    TSAFE_REQUIRE(same_ctx(acc->ctx, c) && same_ctx(pk->ctx, c) && same_ctx(r->ctx, c),
                  TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(n_reads <= r->cap && flood_bits <= 100, TSAFE_E_RANGE);
    uint64_t seen[(1u << 15) / 64] = {0}; /* N <= 2^15 */
    for (size_t k = 0; k < n_reads; k++) {
        TSAFE_REQUIRE(pos[k] < c->n, TSAFE_E_RANGE);
        TSAFE_REQUIRE(!mask || mask[k] < c->t, TSAFE_E_VALUE_RANGE);
        /* a position read twice would get two masks and two floods */
        uint64_t bit = 1ull << (pos[k] & 63);
        TSAFE_REQUIRE(!(seen[pos[k] >> 6] & bit), TSAFE_E_ARG);
        seen[pos[k] >> 6] |= bit;
    }
    tsafe_status st;
    uint8_t master[32];
    if (seed)
        memcpy(master, seed, 32);
    else if ((st = tsafe_seed_fresh(master)) != TSAFE_OK)
        return st;
    size_t n = c->n;
    int8_t *small = malloc(n);
    if (!small) {
        sodium_memzero(master, sizeof master);
        return TSAFE_E_NOMEM;
    }
    tsafe_prng g;
    tsafe_prng_init(&g, master, TSAFE_BFV_STREAM_SEAL);
    sodium_memzero(master, sizeof master);

    /* + (r p0, r p1): a fresh public-key encryption of zero, so c1 no
     * longer depends on the plaintexts (it is RLWE-pseudorandom) */
    tsafe_prng_ternary(&g, small, n);
    for (uint32_t i = 0; i < 2; i++) {
        uint64_t q = c->mod[i].q, *u = acc->tmp, *prod = acc->tmp + n;
        size_t o = i * n;
        for (size_t k = 0; k < n; k++)
            u[k] = small[k] > 0 ? 1 : small[k] < 0 ? q - 1 : 0;
        tsafe_ntt_forward(&c->ntt[i], u);
        mul_add_limb(acc->a0 + o, u, pk->p0 + o, pk->p0_shoup + o, prod, n, q);
        mul_add_limb(acc->a1 + o, u, pk->p1 + o, pk->p1_shoup + o, prod, n, q);
        tsafe_ntt_inverse(&c->ntt[i], acc->a0 + o);
        tsafe_ntt_inverse(&c->ntt[i], acc->a1 + o);
    }
    /* errors of the encryption of zero: e1 on all of c1, e0 where read */
    tsafe_prng_cbd(&g, small, n);
    for (uint32_t i = 0; i < 2; i++) {
        uint64_t q = c->mod[i].q, *a1 = acc->a1 + i * n;
        for (size_t k = 0; k < n; k++) /* |small| <= 21 < q: no division */
            a1[k] = tsafe_add_mod(a1[k], small[k] >= 0 ? (uint64_t)small[k]
                                                         : q - (uint64_t)(-small[k]), q);
    }
    tsafe_prng_cbd(&g, small, n_reads ? n_reads : 1);
    for (size_t k = 0; k < n_reads; k++) {
        uint64_t f[2];
        flood_sample(&g, flood_bits, c, f);
        for (uint32_t i = 0; i < 2; i++) {
            uint64_t q = c->mod[i].q, *x = &acc->a0[i * n + pos[k]];
            uint64_t add = tsafe_add_mod(signed_mod(small[k], q), f[i], q);
            if (mask)
                add = tsafe_add_mod(add, tsafe_bfv_scale_up(c, i, (int64_t)mask[k]), q);
            *x = tsafe_add_mod(*x, add, q);
        }
    }
    /* modulus switch Q -> q0 */
    for (size_t k = 0; k < n; k++)
        r->c1[k] = switch_down(c, acc->a1[k], acc->a1[n + k]);
    for (size_t k = 0; k < n_reads; k++)
        r->c0[k] = switch_down(c, acc->a0[pos[k]], acc->a0[n + pos[k]]);
    r->n_reads = n_reads;
    sodium_memzero(small, n);
    free(small);
    tsafe_prng_clear(&g);
    return TSAFE_OK;
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

/* The same through the NTT (many reads). */
static tsafe_status c1s_ntt(const tsafe_bfv_context *c,
                            const tsafe_bfv_secret_key *sk, const uint64_t *c1,
                            const uint32_t *pos, size_t n_reads, uint64_t *out)
{
    size_t n = c->n;
    uint64_t q = c->mod[0].q;
    uint64_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp)
        return TSAFE_E_NOMEM;
    memcpy(tmp, c1, n * sizeof *tmp);
    tsafe_ntt_forward(&c->ntt[0], tmp);
    tsafe_vec_mul_shoup(tmp, tmp, sk->s_ntt, sk->s_shoup, n, q);
    tsafe_ntt_inverse(&c->ntt[0], tmp);
    for (size_t k = 0; k < n_reads; k++)
        out[k] = tmp[pos[k]];
    sodium_memzero(tmp, n * sizeof *tmp); /* c1*s: key-dependent */
    free(tmp);
    return TSAFE_OK;
}

static tsafe_status phase(const tsafe_bfv_context *c,
                          const tsafe_bfv_secret_key *sk,
                          const tsafe_bfv_sealed *r, const uint32_t *pos,
                          size_t n_reads, uint64_t *v)
{
    TSAFE_REQUIRE(c && sk && r && v && (pos || n_reads == 0), TSAFE_E_NULL);
    TSAFE_REQUIRE(same_ctx(sk->ctx, c) && same_ctx(r->ctx, c), TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(n_reads == r->n_reads, TSAFE_E_RANGE);
    for (size_t k = 0; k < n_reads; k++)
        TSAFE_REQUIRE(pos[k] < c->n, TSAFE_E_RANGE);
    /* direct sums cost ~(2/3)N per read; the transform ~3 N log N */
    if (n_reads * 2 <= 9 * (size_t)c->p.log_n)
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
