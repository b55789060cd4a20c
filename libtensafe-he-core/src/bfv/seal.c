/* The server's finishing step (tsafe_bfv_seal): a fresh public-key
 * encryption of zero, errors, mask and flooding at the read positions, and
 * the switch Q -> q0. Two implementations that draw the same randomness in
 * the same order and so give byte-identical results: the direct one on
 * host arrays, and the one through a compute backend (tsafe_bfv_sealer). */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "bfv_internal.h"
#include "tensafe/backend_impl.h"
#include "tensafe/bfv_backend.h"
#include "tsafe_check.h"
#include "../common/bytes.h"
#include "../common/prng.h"

/* A read's flood: uniform in [-half, half], half 2^bits (bits <= 100) or
 * (TSAFE_BFV_FLOOD_STEP) floor(floor(Q/t)/2), one plaintext step in all;
 * candidates of the span's bit length, each kept with probability above
 * 1/2. The range is the same for every read of a sealing: made once. */
typedef struct {
    tsafe_u128 half, span, mask;
} flood_range;

static void flood_range_make(const tsafe_bfv_context *c, uint32_t bits, flood_range *r)
{
    r->half = bits == TSAFE_BFV_FLOOD_STEP ? (c->Q >> c->p.t_bits) >> 1 : (tsafe_u128)1 << bits;
    r->span = 2 * r->half; /* values 0..span, span >= 2 */
    uint64_t sh = (uint64_t)(r->span >> 64), sl = (uint64_t)r->span;
    int len = sh ? 128 - __builtin_clzll(sh) : 64 - __builtin_clzll(sl); /* bits of span */
    r->mask = ((tsafe_u128)1 << len) - 1;
}

static __int128 flood_draw(tsafe_prng *g, const flood_range *r)
{
    tsafe_u128 v;
    do {
        uint64_t lo = tsafe_prng_u64(g), hi = tsafe_prng_u64(g);
        v = (((tsafe_u128)hi << 64) | lo) & r->mask;
    } while (v > r->span);
    return (__int128)v - (__int128)r->half;
}

/* v mod every limb into out[i * stride], |v| < 2^112: the magnitude's two
 * 64-bit halves by Shoup products against 2^64 mod q_i and 1 (no
 * division), then the sign. */
static void residues(const tsafe_bfv_context *c, __int128 v, uint64_t *out, size_t stride)
{
    int neg = v < 0;
    tsafe_u128 mag = neg ? (tsafe_u128)(-v) : (tsafe_u128)v;
    uint64_t mh = (uint64_t)(mag >> 64), ml = (uint64_t)mag;
    for (uint32_t i = 0; i < c->L; i++) {
        uint64_t q = c->mod[i].q;
        uint64_t r = tsafe_add_mod(tsafe_mul_shoup(mh, c->r64[i], c->r64_shoup[i], q),
                                   tsafe_mul_shoup(ml, 1, c->one_shoup[i], q), q);
        out[i * stride] = neg ? tsafe_neg_mod(r, q) : r;
    }
}

/* Arguments of both sealing paths: reads within N, distinct, masks < t. */
tsafe_status tsafe_bfv_seal_check_reads(const tsafe_bfv_context *c, const uint32_t *pos,
                                        const uint64_t *mask, size_t n_reads,
                                        uint32_t flood_bits, const tsafe_bfv_sealed *r)
{
    TSAFE_REQUIRE(n_reads <= r->cap && (flood_bits <= 100 || flood_bits == TSAFE_BFV_FLOOD_STEP),
                  TSAFE_E_RANGE);
    uint64_t seen[(1u << 15) / 64] = {0}; /* N <= 2^15 */
    for (size_t k = 0; k < n_reads; k++) {
        TSAFE_REQUIRE(pos[k] < c->n, TSAFE_E_RANGE);
        TSAFE_REQUIRE(!mask || mask[k] < c->t, TSAFE_E_VALUE_RANGE);
        /* a position read twice would get two masks and two floods */
        uint64_t bit = 1ull << (pos[k] & 63);
        TSAFE_REQUIRE(!(seen[pos[k] >> 6] & bit), TSAFE_E_ARG);
        seen[pos[k] >> 6] |= bit;
    }
    return TSAFE_OK;
}

/* The reads' part of a sealing's draws from g: e0, then per read the
 * flood; each read's addition e0 + flood + round(Q mask / t) as one
 * integer (|.| < 2^112; the scaled mask is floor(Q/t) m + round((Q mod t)
 * m / t), tsafe_bfv_scale_up's value), reduced mod each limb once. */
static void draw_reads(tsafe_prng *g, const tsafe_bfv_context *c, const uint64_t *mask,
                       size_t n_reads, uint32_t flood_bits, seal_draw *d)
{
    tsafe_prng_cbd_tight(g, d->e0, n_reads ? n_reads : 1);
    flood_range fr;
    flood_range_make(c, flood_bits, &fr);
    uint32_t T = c->p.t_bits;
    tsafe_u128 delta = c->Q >> T, round_half = (tsafe_u128)1 << (T - 1);
    for (size_t k = 0; k < n_reads; k++) {
        __int128 v = flood_draw(g, &fr) + d->e0[k];
        if (mask) { /* < t, checked by tsafe_bfv_seal_check_reads */
            uint64_t m = mask[k];
            v += (__int128)(delta * m + (((tsafe_u128)c->q_mod_t * m + round_half) >> T));
        }
        residues(c, v, d->add + k, n_reads);
    }
}

/* The sealing's master seed: seed, or fresh from the CSPRNG. */
static tsafe_status master_seed(const uint8_t *seed, uint8_t master[32])
{
    if (!seed)
        return tsafe_seed_fresh(master);
    memcpy(master, seed, 32);
    return TSAFE_OK;
}

tsafe_status tsafe_bfv_seal_draw(const tsafe_bfv_context *c, const uint8_t *seed,
                                 const uint64_t *mask, size_t n_reads, uint32_t flood_bits,
                                 int with_zero, seal_draw *d)
{
    uint8_t master[32];
    tsafe_status st = master_seed(seed, master);
    if (st != TSAFE_OK)
        return st;
    tsafe_prng g;
    tsafe_prng_init(&g, master, TSAFE_BFV_STREAM_SEAL);
    sodium_memzero(master, sizeof master);
    if (with_zero) { /* r and e1 of the encryption of zero, unless prepared */
        tsafe_prng_ternary(&g, d->r, c->n);
        tsafe_prng_cbd_tight(&g, d->e1, c->n);
    }
    draw_reads(&g, c, mask, n_reads, flood_bits, d);
    tsafe_prng_clear(&g);
    return TSAFE_OK;
}

tsafe_status tsafe_bfv_seal_draw_lean(const tsafe_bfv_context *c, const uint8_t *seed,
                                      const uint64_t *mask, size_t n_reads,
                                      uint32_t flood_bits, seal_draw *d, uint8_t key[32],
                                      uint64_t *e1_off)
{
    tsafe_status st = master_seed(seed, key);
    if (st != TSAFE_OK)
        return st;
    tsafe_prng g;
    tsafe_prng_init(&g, key, TSAFE_BFV_STREAM_SEAL);
    /* only the keystream these draws read: r takes about N/5 bytes (5
     * trits a byte, 243 of 256 kept), a read about 6 + 2 x 16 (its error,
     * a flood candidate kept one time in two); a shortfall refills whole */
    tsafe_prng_reserve(&g, (size_t)c->n / 5 * 17 / 16 + 128);
    tsafe_prng_ternary(&g, d->r, c->n);
    *e1_off = tsafe_prng_offset(&g);
    tsafe_prng_reserve(&g, 64 * n_reads + 64);
    tsafe_prng_seek(&g, *e1_off + 6 * (uint64_t)c->n); /* e1: N samples of 6 bytes */
    draw_reads(&g, c, mask, n_reads, flood_bits, d);
    tsafe_prng_clear(&g);
    return TSAFE_OK;
}

/* Ternary r of one limb as residues. */
static void ternary_limb(const int8_t *r, uint64_t *u, size_t n, uint64_t q)
{
    tsafe_vec_from_i8(u, r, n, q);
}

/* In coefficient form: e1 on all of c1 (limbs of a1). */
static void add_e1(const tsafe_bfv_context *c, uint64_t *a1, const int8_t *e1)
{
    for (uint32_t i = 0; i < c->L; i++) /* |e1| <= 21 < q */
        tsafe_vec_add_i8(a1 + i * c->n, e1, c->n, c->mod[i].q);
}

/* The read additions (e0, flood, mask) at the read positions of c0. */
static void add_reads(const tsafe_bfv_context *c, uint64_t *a0, const seal_draw *d,
                      const uint32_t *pos, size_t n_reads)
{
    for (uint32_t i = 0; i < c->L; i++)
        for (size_t k = 0; k < n_reads; k++) {
            uint64_t *y = &a0[i * c->n + pos[k]];
            *y = tsafe_add_mod(*y, d->add[i * n_reads + k], c->mod[i].q);
        }
}

static void add_errors(const tsafe_bfv_context *c, uint64_t *a0, uint64_t *a1,
                       const seal_draw *d, const uint32_t *pos, size_t n_reads)
{
    add_e1(c, a1, d->e1);
    add_reads(c, a0, d, pos, n_reads);
}

static void draw_free(seal_draw *d, size_t n, size_t n_reads, uint32_t L)
{
    if (d->r)
        sodium_memzero(d->r, n);
    if (d->e1)
        sodium_memzero(d->e1, n);
    if (d->e0)
        sodium_memzero(d->e0, n_reads ? n_reads : 1);
    if (d->add)
        sodium_memzero(d->add, L * (n_reads ? n_reads : 1) * sizeof *d->add);
}

tsafe_status tsafe_bfv_seal(const tsafe_bfv_context *c, tsafe_bfv_acc *acc,
                            const tsafe_bfv_public_key *pk, const uint32_t *pos,
                            const uint64_t *mask, size_t n_reads,
                            uint32_t flood_bits, const uint8_t *seed,
                            tsafe_bfv_sealed *r)
{
    TSAFE_REQUIRE(c && acc && pk && r && (pos || n_reads == 0), TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_bfv_same_ctx(acc->ctx, c) && tsafe_bfv_same_ctx(pk->ctx, c) &&
                      tsafe_bfv_same_ctx(r->ctx, c),
                  TSAFE_E_PARAMS_MISMATCH);
    tsafe_status st = tsafe_bfv_seal_check_reads(c, pos, mask, n_reads, flood_bits, r);
    if (st != TSAFE_OK)
        return st;
    size_t n = c->n, nr = n_reads ? n_reads : 1;
    seal_draw d = {malloc(n), malloc(n), malloc(nr), malloc(c->L * nr * sizeof(uint64_t))};
    TSAFE_CHECK(d.r && d.e1 && d.e0 && d.add, TSAFE_E_NOMEM);
    TSAFE_TRY(tsafe_bfv_seal_draw(c, seed, mask, n_reads, flood_bits, 1, &d));

    /* + (r p0, r p1): a fresh public-key encryption of zero, so c1 no
     * longer depends on the plaintexts (it is RLWE-pseudorandom) */
    for (uint32_t i = 0; i < c->L; i++) {
        uint64_t q = c->mod[i].q, *u = acc->tmp;
        size_t o = i * n;
        ternary_limb(d.r, u, n, q);
        tsafe_ntt_forward(&c->ntt[i], u);
        tsafe_vec_mul_shoup_add(acc->a0 + o, u, pk->p0 + o, pk->p0_shoup + o, n, q);
        tsafe_vec_mul_shoup_add(acc->a1 + o, u, pk->p1 + o, pk->p1_shoup + o, n, q);
        tsafe_ntt_inverse(&c->ntt[i], acc->a0 + o);
        tsafe_ntt_inverse(&c->ntt[i], acc->a1 + o);
    }
    add_errors(c, acc->a0, acc->a1, &d, pos, n_reads);
    /* modulus switch Q -> q0: c1 whole (in place, limb by limb), c0 where read */
    for (uint32_t l = c->L - 1; l >= 1; l--)
        for (uint32_t i = 0; i < l; i++)
            tsafe_vec_mod_switch(acc->a1 + i * n, acc->a1 + i * n, acc->a1 + l * n, n,
                                 &c->sw[l][i]);
    memcpy(r->c1, acc->a1, n * sizeof *r->c1);
    uint64_t x[TSAFE_BFV_MAX_LIMBS];
    for (size_t k = 0; k < n_reads; k++) {
        for (uint32_t i = 0; i < c->L; i++)
            x[i] = acc->a0[i * n + pos[k]];
        r->c0[k] = tsafe_bfv_switch_to_q0(c, x);
    }
    r->n_reads = n_reads;
    st = TSAFE_OK;
fail:
    draw_free(&d, n, n_reads, c->L);
    free(d.r);
    free(d.e1);
    free(d.e0);
    free(d.add);
    return st;
}

/* ------------------------------------------------------ through a backend */

struct tsafe_bfv_sealer {
    const tsafe_bfv_context *ctx;
    tsafe_backend *b;
    tsafe_buffer *r;    /* 1 poly x L limbs: the ternary r, then NTT(r) */
    tsafe_buffer *e;    /* 2 polys x L limbs: the errors (device backends) */
    tsafe_buffer *sw[TSAFE_BFV_MAX_LIMBS]; /* sw[l]: 2 polys x l limbs, the
                                             switch after dropping down to l */
    tsafe_buffer *sw1[TSAFE_BFV_MAX_LIMBS]; /* sw1[l]: 1 poly x l limbs, the
                                              same for c1 alone */
    uint64_t *rd;       /* L N words: c0 at the reads (tsafe_backend_ntt_read) */
    uint64_t *host;     /* 2 L N words of staging when buffers are not host memory */
    seal_draw d;
    size_t reads_cap;
    /* Prepared encryptions of zero (tsafe_bfv_sealer_prepare): r (p0, p1)
     * in NTT form (2 polys x L limbs, added to the products before their
     * inverse NTT, so preparing costs no transform the inline path does not)
     * and e1 (N small integers, added after it). zero[head .. head + ready)
     * are unused, each taken once; the buffers stay for the next prepare. */
    tsafe_buffer **zero;
    int8_t *zero_e1;    /* zero_cap x N */
    size_t zero_cap, head, ready;
    const tsafe_buffer *zero_pk; /* the key they were made for */
};

void tsafe_bfv_sealer_free(tsafe_bfv_sealer *s)
{
    if (!s)
        return;
    size_t n = s->ctx->n;
    uint32_t L = s->ctx->L;
    draw_free(&s->d, n, s->reads_cap, L);
    free(s->d.r);
    free(s->d.e1);
    free(s->d.e0);
    free(s->d.add);
    tsafe_buffer_free(s->r);
    tsafe_buffer_free(s->e);
    for (uint32_t l = 0; l < TSAFE_BFV_MAX_LIMBS; l++) {
        tsafe_buffer_free(s->sw[l]);
        tsafe_buffer_free(s->sw1[l]);
    }
    if (s->rd)
        sodium_memzero(s->rd, (size_t)L * n * sizeof *s->rd);
    free(s->rd);
    tsafe_bfv_sealer_drop(s);
    for (size_t i = 0; i < s->zero_cap; i++)
        tsafe_buffer_free(s->zero[i]);
    free(s->zero);
    if (s->zero_e1)
        sodium_memzero(s->zero_e1, s->zero_cap * n);
    free(s->zero_e1);
    if (s->host)
        sodium_memzero(s->host, 2 * (size_t)L * n * sizeof *s->host);
    free(s->host);
    free(s);
}

tsafe_status tsafe_bfv_sealer_create(const tsafe_bfv_context *c, tsafe_backend *b,
                                     tsafe_bfv_sealer **out)
{
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(c && b, TSAFE_E_NULL);
    TSAFE_REQUIRE(tsafe_bfv_backend_serves(b, c), TSAFE_E_PARAMS_MISMATCH);
    tsafe_status st;
    tsafe_bfv_sealer *s = calloc(1, sizeof *s);
    TSAFE_REQUIRE(s, TSAFE_E_NOMEM);
    s->ctx = c;
    s->b = b;
    size_t n = c->n;
    s->reads_cap = n;
    s->d.r = malloc(n);
    s->d.e1 = malloc(n);
    s->d.e0 = malloc(n);
    uint32_t L = c->L;
    s->d.add = malloc(L * n * sizeof *s->d.add);
    s->host = tsafe_calloc_aligned(2 * (size_t)L * n, sizeof *s->host);
    s->rd = malloc((size_t)L * n * sizeof *s->rd);
    TSAFE_CHECK(s->d.r && s->d.e1 && s->d.e0 && s->d.add && s->host && s->rd,
                TSAFE_E_NOMEM);
    TSAFE_TRY(tsafe_buffer_alloc(b, 1, L, &s->r));
    TSAFE_TRY(tsafe_buffer_alloc(b, 2, L, &s->e));
    for (uint32_t l = 1; l < L; l++) {
        TSAFE_TRY(tsafe_buffer_alloc(b, 2, l, &s->sw[l]));
        TSAFE_TRY(tsafe_buffer_alloc(b, 1, l, &s->sw1[l]));
    }
    *out = s;
    return TSAFE_OK;
fail:
    tsafe_bfv_sealer_free(s);
    return st;
}

/* acc (+)= r (p0, p1) for the ternary r in s->d.r: r through the forward
 * NTT, one multiply-accumulate job. */
static tsafe_status add_r_pk(tsafe_bfv_sealer *s, tsafe_buffer *acc,
                             const tsafe_buffer *pk, int assign)
{
    const tsafe_bfv_context *c = s->ctx;
    size_t n = c->n;
    uint32_t L = c->L;
    tsafe_status st;
    uint64_t *u = tsafe_buffer_host_words(s->r);
    uint64_t *stage = u ? u : s->host;
    for (uint32_t i = 0; i < L; i++)
        ternary_limb(s->d.r, stage + i * n, n, c->mod[i].q);
    if (!u && (st = tsafe_buffer_upload(s->r, stage, L * n)) != TSAFE_OK)
        return st;
    if ((st = tsafe_backend_ntt_forward(s->b, s->r)) != TSAFE_OK)
        return st;
    const tsafe_buffer *a[1] = {s->r}, *w[1] = {pk};
    tsafe_backend_mac job = {acc, 1, a, w, assign};
    return tsafe_backend_mul_acc(s->b, &job, 1);
}

/* Polynomial p of a buffer as a buffer of its own (same memory: backend
 * memory is a flat array of words, backend_impl.h, API 3). A view lives on
 * the stack and is never passed to tsafe_buffer_free. */
static tsafe_buffer poly_view(const tsafe_buffer *buf, size_t p)
{
    tsafe_buffer v = *buf;
    v.mem = (uint64_t *)buf->mem + p * buf->n_limbs * buf->backend->ring->n;
    v.n_polys = 1;
    return v;
}

/* Add host-side errors to acc (coefficient form): in place in host memory,
 * else as a polynomial uploaded and added on the backend. e1 NULL: reads
 * only. */
static tsafe_status add_host_errors(tsafe_bfv_sealer *s, tsafe_buffer *acc,
                                    const int8_t *e1, const uint32_t *pos,
                                    size_t n_reads)
{
    const tsafe_bfv_context *c = s->ctx;
    size_t n = c->n;
    uint32_t L = c->L;
    uint64_t *x = tsafe_buffer_host_words(acc);
    int staged = !x;
    if (staged) {
        x = s->host;
        memset(x, 0, 2 * (size_t)L * n * sizeof *x);
    }
    if (e1)
        add_e1(c, x + L * n, e1);
    add_reads(c, x, &s->d, pos, n_reads);
    if (!staged)
        return TSAFE_OK;
    tsafe_status st = tsafe_buffer_upload(s->e, x, 2 * (size_t)L * n);
    return st == TSAFE_OK ? tsafe_backend_elementwise(s->b, TSAFE_OP_ADD, acc, acc, s->e)
                          : st;
}

/* e1 on c1 alone (c1: a one-polynomial view, coefficient form). */
static tsafe_status add_c1_error(tsafe_bfv_sealer *s, tsafe_buffer *c1, const int8_t *e1)
{
    const tsafe_bfv_context *c = s->ctx;
    size_t n = c->n;
    uint32_t L = c->L;
    uint64_t *x = tsafe_buffer_host_words(c1);
    if (x) {
        add_e1(c, x, e1);
        return TSAFE_OK;
    }
    x = s->host;
    memset(x, 0, (size_t)L * n * sizeof *x);
    add_e1(c, x, e1);
    tsafe_buffer e = poly_view(s->e, 0);
    tsafe_status st = tsafe_buffer_upload(&e, x, (size_t)L * n);
    return st == TSAFE_OK ? tsafe_backend_elementwise(s->b, TSAFE_OP_ADD, c1, c1, &e) : st;
}

void tsafe_bfv_sealer_drop(tsafe_bfv_sealer *s)
{
    if (!s)
        return;
    s->head = s->ready = 0; /* the buffers stay for the next prepare */
    s->zero_pk = NULL;
}

size_t tsafe_bfv_sealer_ready(const tsafe_bfv_sealer *s) { return s ? s->ready : 0; }

tsafe_backend *tsafe_bfv_sealer_backend(const tsafe_bfv_sealer *s) { return s->b; }
const tsafe_bfv_context *tsafe_bfv_sealer_ctx(const tsafe_bfv_sealer *s) { return s->ctx; }

tsafe_status tsafe_bfv_sealer_prepare(tsafe_bfv_sealer *s, const tsafe_buffer *pk,
                                      size_t count, const uint8_t *seed)
{
    TSAFE_REQUIRE(s && pk, TSAFE_E_NULL);
    const tsafe_bfv_context *c = s->ctx;
    TSAFE_REQUIRE(pk->backend == s->b, TSAFE_E_ARG);
    TSAFE_REQUIRE(pk->n_polys == 2 && pk->n_limbs == c->L && pk->operand, TSAFE_E_RANGE);
    TSAFE_REQUIRE(count <= 1u << 20, TSAFE_E_RANGE);
    if (s->zero_pk != pk) /* another key: what was prepared is useless */
        tsafe_bfv_sealer_drop(s);
    s->zero_pk = pk;
    if (s->ready >= count)
        return TSAFE_OK;
    size_t n = c->n;
    if (s->head > 0) { /* compact: unused entries to the front */
        for (size_t i = 0; i < s->ready; i++) {
            tsafe_buffer *t = s->zero[i];
            s->zero[i] = s->zero[s->head + i];
            s->zero[s->head + i] = t;
            memcpy(s->zero_e1 + i * n, s->zero_e1 + (s->head + i) * n, n);
        }
        s->head = 0;
    }
    if (count > s->zero_cap) {
        tsafe_buffer **z = realloc(s->zero, count * sizeof *z);
        TSAFE_REQUIRE(z, TSAFE_E_NOMEM);
        s->zero = z;
        int8_t *e1 = malloc(count * n);
        TSAFE_REQUIRE(e1, TSAFE_E_NOMEM);
        if (s->zero_e1) {
            memcpy(e1, s->zero_e1, s->ready * n);
            sodium_memzero(s->zero_e1, s->zero_cap * n);
            free(s->zero_e1);
        }
        s->zero_e1 = e1;
        for (; s->zero_cap < count; s->zero_cap++) {
            tsafe_status st = tsafe_buffer_alloc(s->b, 2, c->L, &s->zero[s->zero_cap]);
            if (st != TSAFE_OK)
                return st;
        }
    }
    tsafe_status st = TSAFE_OK;
    while (s->ready < count && st == TSAFE_OK) {
        tsafe_buffer *z = s->zero[s->ready];
        uint8_t master[32];
        if (seed) { /* tests: entry i's seed from (seed, i) */
            uint8_t ctr[8];
            tsafe_store_le64(ctr, (uint64_t)s->ready);
            crypto_generichash(master, 32, ctr, sizeof ctr, seed, 32);
        } else if ((st = tsafe_seed_fresh(master)) != TSAFE_OK)
            break;
        tsafe_prng g;
        tsafe_prng_init(&g, master, TSAFE_BFV_STREAM_SEAL + 1);
        sodium_memzero(master, sizeof master);
        tsafe_prng_ternary(&g, s->d.r, n);
        tsafe_prng_cbd_tight(&g, s->zero_e1 + s->ready * n, n);
        tsafe_prng_clear(&g);
        /* z = r (p0, p1) in NTT form; e1 kept beside it */
        if ((st = add_r_pk(s, z, pk, 1)) == TSAFE_OK)
            s->ready++;
    }
    sodium_memzero(s->d.r, n);
    return st;
}

/* c0 at the reads was read from NTT form (s->rd): c1 alone goes through
 * the inverse NTT and gets its error; each read gets its error, mask and
 * flood (s->d.add) and both switch to q0. */
static tsafe_status seal_at_reads(tsafe_bfv_sealer *s, tsafe_buffer *acc, const int8_t *e1,
                                  size_t n_reads, tsafe_bfv_sealed *r)
{
    const tsafe_bfv_context *c = s->ctx;
    uint32_t L = c->L;
    tsafe_status st;
    tsafe_buffer c1 = poly_view(acc, 1);
    TSAFE_TRY(tsafe_backend_ntt_inverse(s->b, &c1));
    TSAFE_TRY(add_c1_error(s, &c1, e1));
    const tsafe_buffer *from1 = &c1;
    for (uint32_t l = L - 1; l >= 1; l--) {
        TSAFE_TRY(tsafe_backend_mod_switch(s->b, s->sw1[l], from1));
        from1 = s->sw1[l];
    }
    uint64_t x[TSAFE_BFV_MAX_LIMBS];
    for (size_t k = 0; k < n_reads; k++) {
        for (uint32_t i = 0; i < L; i++)
            x[i] = tsafe_add_mod(s->rd[i * n_reads + k], s->d.add[i * n_reads + k],
                                 c->mod[i].q);
        r->c0[k] = tsafe_bfv_switch_to_q0(c, x);
    }
    TSAFE_TRY(tsafe_buffer_download(s->sw1[1], r->c1, c->n));
    r->n_reads = n_reads;
fail:
    return st;
}

/* No reads from NTT form on this backend: both polynomials through the
 * inverse NTT, then the errors, mask and flood, then Q -> q0 one limb at a
 * time. */
static tsafe_status seal_whole(tsafe_bfv_sealer *s, tsafe_buffer *acc, const int8_t *e1,
                               const uint32_t *pos, size_t n_reads, tsafe_bfv_sealed *r)
{
    size_t n = s->ctx->n;
    tsafe_status st;
    TSAFE_TRY(tsafe_backend_ntt_inverse(s->b, acc));
    TSAFE_TRY(add_host_errors(s, acc, e1, pos, n_reads));
    const tsafe_buffer *from = acc;
    for (uint32_t l = s->ctx->L - 1; l >= 1; l--) {
        TSAFE_TRY(tsafe_backend_mod_switch(s->b, s->sw[l], from));
        from = s->sw[l];
    }
    const uint64_t *o = tsafe_buffer_host_words(s->sw[1]);
    if (!o) {
        TSAFE_TRY(tsafe_buffer_download(s->sw[1], s->host, 2 * n));
        o = s->host;
    }
    memcpy(r->c1, o + n, n * sizeof *r->c1);
    for (size_t k = 0; k < n_reads; k++)
        r->c0[k] = o[pos[k]];
    r->n_reads = n_reads;
fail:
    return st;
}

tsafe_status tsafe_bfv_seal_buffer(tsafe_bfv_sealer *s, tsafe_buffer *acc,
                                   const tsafe_buffer *pk, const uint32_t *pos,
                                   const uint64_t *mask, size_t n_reads,
                                   uint32_t flood_bits, const uint8_t *seed,
                                   tsafe_bfv_sealed *r)
{
    TSAFE_REQUIRE(s && acc && pk && r && (pos || n_reads == 0), TSAFE_E_NULL);
    const tsafe_bfv_context *c = s->ctx;
    TSAFE_REQUIRE(tsafe_bfv_same_ctx(r->ctx, c), TSAFE_E_PARAMS_MISMATCH);
    TSAFE_REQUIRE(acc->backend == s->b && pk->backend == s->b, TSAFE_E_ARG);
    uint32_t L = c->L;
    TSAFE_REQUIRE(acc->n_polys == 2 && acc->n_limbs == L && !acc->operand &&
                      pk->n_polys == 2 && pk->n_limbs == L && pk->operand,
                  TSAFE_E_RANGE);
    tsafe_status st = tsafe_bfv_seal_check_reads(c, pos, mask, n_reads, flood_bits, r);
    if (st != TSAFE_OK)
        return st;
    size_t n = c->n;
    /* a prepared encryption of zero for this key, else one made now */
    int prepared = s->ready > 0 && s->zero_pk == pk;
    if ((st = tsafe_bfv_seal_draw(c, seed, mask, n_reads, flood_bits, !prepared, &s->d)) != TSAFE_OK)
        return st;
    const int8_t *e1 = s->d.e1;
    if (prepared) {
        /* + r p (NTT form, prepared); e1 prepared beside it. Each prepared
         * one is used once (not wiped: r p + e1 reveals nothing the
         * server's own memory, which holds the adapter, does not) */
        tsafe_buffer *z = s->zero[s->head];
        e1 = s->zero_e1 + s->head * n;
        s->head++, s->ready--;
        TSAFE_TRY(tsafe_backend_elementwise(s->b, TSAFE_OP_ADD, acc, acc, z));
    } else /* + r * (p0, p1) on the backend */
        TSAFE_TRY(add_r_pk(s, acc, pk, 0));
    /* c0 is sent only at the reads: read them from NTT form where the
     * backend can (no inverse NTT of c0); else the whole c0 */
    st = n_reads && n_reads <= TSAFE_COSET_MAX_R /* a few: else the whole c0 */
             ? tsafe_backend_ntt_read(s->b, acc, 0, pos, n_reads, s->rd)
             : TSAFE_E_UNSUPPORTED;
    if (st == TSAFE_OK)
        st = seal_at_reads(s, acc, e1, n_reads, r);
    else if (st == TSAFE_E_UNSUPPORTED)
        st = seal_whole(s, acc, e1, pos, n_reads, r);
fail: /* wipe the draws */
    draw_free(&s->d, n, n_reads, L);
    return st;
}
