/* A few coefficients of an NTT-form polynomial without its whole inverse
 * transform (ring.h, "Coset reads").
 *
 * Why: a sealed response sends c1 whole but only the read coefficients of
 * c0, and those sit at c, c + m, c + 2m, ... (one per row of a block); a
 * decryption likewise needs (c1 s) only there. The inverse NTT of a limb
 * costs (N/2) log N butterflies; this costs N products plus R per read.
 *
 * The arithmetic. Slot k of the forward NTT holds a(zeta_k) with
 * zeta_k = psi^(2 bitrev(k) + 1), so a_j = N^-1 sum_k zeta_k^-j a^_k. For
 * j = c + m l (m a power of two, R = N/m), write k = h m + lo (lo < m):
 * bitrev(k) = bitrev_m(lo) R + bitrev_R(h), hence zeta_k^m = psi^(m (2
 * bitrev_R(h) + 1)) =: y_h depends on h alone, and
 *     a_(c + m l) = sum_h y_h^-l S_h,  S_h = sum_lo w_(h m + lo) a^_(h m + lo),
 * with w_k = zeta_k^-c / N: N products (stage 1), then R per read
 * (stage 2). tests/test_ring.c compares it with the inverse NTT. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"

typedef struct coset_limb {
    uint64_t *w, *wp; /* N stage-1 weights and Shoup quotients */
    uint64_t *v, *vp; /* R x R: v[l R + h] = y_h^-l, Shoup */
} coset_limb;

typedef struct coset_entry {
    uint32_t m, c, r;
    coset_limb *limb; /* n_limbs */
} coset_entry;

#define COSET_ENTRIES 8

struct tsafe_coset_cache {
    pthread_mutex_t mu;
    const tsafe_ntt_table *ntt; /* borrowed: n_limbs tables */
    uint32_t n_limbs;
    size_t n_entries;
    coset_entry *entry[COSET_ENTRIES];
};

static uint32_t bitrev_bits(uint32_t x, uint32_t bits)
{
    uint32_t r = 0;
    for (uint32_t i = 0; i < bits; i++, x >>= 1)
        r = (r << 1) | (x & 1);
    return r;
}

static uint32_t log2_exact(size_t v)
{
    uint32_t l = 0;
    while (((size_t)1 << l) < v)
        l++;
    return l;
}

int tsafe_coset_fit(size_t n, const uint32_t *pos, size_t n_pos, uint32_t *m,
                    uint32_t *c)
{
    if (n_pos == 0 || n_pos > TSAFE_COSET_MAX_R)
        return 0;
    /* the largest power of two dividing every pos[k] - pos[0] (N when all
     * equal): m, and the residue c = pos[0] mod m */
    uint32_t diff = 0; /* differences mod 2^32 keep their low bits */
    for (size_t k = 1; k < n_pos; k++)
        diff |= pos[k] - pos[0];
    size_t mm = diff ? (size_t)(diff & (0u - diff)) : n; /* its lowest set bit */
    if (mm > n)
        mm = n;
    if (n / mm > TSAFE_COSET_MAX_R)
        return 0;
    *m = (uint32_t)mm;
    *c = (uint32_t)(pos[0] & (mm - 1));
    return 1;
}

static void limb_free(coset_limb *l)
{
    free(l->w);
    free(l->v);
    l->w = l->wp = l->v = l->vp = NULL;
}

static tsafe_status limb_build(coset_limb *cl, const tsafe_ntt_table *t, uint32_t m,
                               uint32_t c, uint32_t r)
{
    size_t n = t->n;
    const tsafe_modulus *md = &t->mod;
    uint64_t q = md->q;
    cl->w = malloc(2 * n * sizeof *cl->w);
    cl->v = malloc(2 * (size_t)r * r * sizeof *cl->v);
    if (!cl->w || !cl->v) {
        free(cl->w);
        free(cl->v);
        cl->w = cl->v = NULL;
        return TSAFE_E_NOMEM;
    }
    cl->wp = cl->w + n;
    cl->vp = cl->v + (size_t)r * r;
    uint64_t psi_inv = tsafe_inv_mod(t->psi, md);
    uint64_t n_inv = tsafe_inv_mod((uint64_t)(n % q), md);
    /* w_k = g^(2 bitrev(k) + 1) / N with g = psi^-c: G_j = g^(2j+1) */
    uint64_t g = tsafe_pow_mod(psi_inv, c, md), g2 = tsafe_mul_mod(g, g, md);
    uint64_t gj = tsafe_mul_mod(g, n_inv, md);
    for (size_t j = 0; j < n; j++) {
        cl->w[bitrev_bits((uint32_t)j, t->log_n)] = gj;
        gj = tsafe_mul_mod(gj, g2, md);
    }
    tsafe_vec_shoup_precompute(cl->wp, cl->w, n, q);
    /* v[l][h] = y_h^-l, y_h = psi^(m (2 bitrev_R(h) + 1)) */
    uint32_t log_r = log2_exact(r);
    for (uint32_t h = 0; h < r; h++) {
        uint64_t e = (uint64_t)m * (2u * bitrev_bits(h, log_r) + 1u);
        uint64_t yinv = tsafe_pow_mod(psi_inv, e % (2 * n), md), p = 1;
        for (uint32_t l = 0; l < r; l++) {
            cl->v[(size_t)l * r + h] = p;
            p = tsafe_mul_mod(p, yinv, md);
        }
    }
    tsafe_vec_shoup_precompute(cl->vp, cl->v, (size_t)r * r, q);
    return TSAFE_OK;
}

static void entry_free(coset_entry *e, uint32_t n_limbs)
{
    if (!e)
        return;
    for (uint32_t i = 0; e->limb && i < n_limbs; i++)
        limb_free(&e->limb[i]);
    free(e->limb);
    free(e);
}

tsafe_status tsafe_coset_cache_create(const tsafe_ntt_table *ntt, uint32_t n_limbs,
                                      tsafe_coset_cache **out)
{
    if (!out)
        return TSAFE_E_NULL;
    *out = NULL;
    if (!ntt)
        return TSAFE_E_NULL;
    if (n_limbs == 0)
        return TSAFE_E_RANGE;
    tsafe_coset_cache *cc = calloc(1, sizeof *cc);
    if (!cc)
        return TSAFE_E_NOMEM;
    if (pthread_mutex_init(&cc->mu, NULL) != 0) {
        free(cc);
        return TSAFE_E_NOMEM;
    }
    cc->ntt = ntt;
    cc->n_limbs = n_limbs;
    *out = cc;
    return TSAFE_OK;
}

void tsafe_coset_cache_free(tsafe_coset_cache *cc)
{
    if (!cc)
        return;
    for (size_t i = 0; i < cc->n_entries; i++)
        entry_free(cc->entry[i], cc->n_limbs);
    pthread_mutex_destroy(&cc->mu);
    free(cc);
}

/* The tables for (m, c), built on first use; NULL when the cache is full
 * or out of memory (the caller then takes the inverse NTT). */
static const coset_entry *lookup(tsafe_coset_cache *cc, uint32_t m, uint32_t c)
{
    const coset_entry *found = NULL;
    pthread_mutex_lock(&cc->mu);
    for (size_t i = 0; i < cc->n_entries && !found; i++)
        if (cc->entry[i]->m == m && cc->entry[i]->c == c)
            found = cc->entry[i];
    if (!found && cc->n_entries < COSET_ENTRIES) {
        coset_entry *e = calloc(1, sizeof *e);
        int ok = e && (e->limb = calloc(cc->n_limbs, sizeof *e->limb)) != NULL;
        if (ok) {
            e->m = m;
            e->c = c;
            e->r = (uint32_t)(cc->ntt[0].n / m);
            for (uint32_t i = 0; i < cc->n_limbs && ok; i++)
                ok = limb_build(&e->limb[i], &cc->ntt[i], m, c, e->r) == TSAFE_OK;
        }
        if (ok) {
            cc->entry[cc->n_entries++] = e;
            found = e;
        } else
            entry_free(e, cc->n_limbs);
    }
    pthread_mutex_unlock(&cc->mu);
    return found;
}

tsafe_status tsafe_coset_read(tsafe_coset_cache *cc, uint32_t limb, const uint64_t *a,
                              const uint32_t *pos, size_t n_pos, uint64_t *out,
                              uint64_t *scratch)
{
    if (!cc || !a || !pos || !out || !scratch)
        return TSAFE_E_NULL;
    if (limb >= cc->n_limbs)
        return TSAFE_E_RANGE;
    const tsafe_ntt_table *t = &cc->ntt[limb];
    size_t n = t->n;
    uint32_t m, c;
    for (size_t k = 0; k < n_pos; k++)
        if (pos[k] >= n)
            return TSAFE_E_RANGE;
    if (!tsafe_coset_fit(n, pos, n_pos, &m, &c))
        return TSAFE_E_UNSUPPORTED;
    const coset_entry *e = lookup(cc, m, c);
    if (!e)
        return TSAFE_E_UNSUPPORTED;
    const coset_limb *cl = &e->limb[limb];
    uint64_t q = t->mod.q;
    uint32_t r = e->r;
    /* stage 1: S_h = sum over block h of w a^ (products reduced, < q;
     * block sums in 64 bits as long as they cannot wrap) */
    tsafe_vec_mul_shoup(scratch, a, cl->w, cl->wp, n, q);
    uint32_t room = 64 - t->mod.bits; /* terms that fit before a reduction */
    size_t step = room >= 31 ? m : (size_t)1 << (room > 0 ? room - 1 : 0);
    uint64_t S[TSAFE_COSET_MAX_R];
    for (uint32_t h = 0; h < r; h++) {
        const uint64_t *x = scratch + (size_t)h * m;
        uint64_t acc = 0;
        for (size_t lo = 0; lo < m; lo += step) {
            size_t end = lo + step < m ? lo + step : m, j = lo;
            /* four independent sums: the adds pipeline (and vectorize) */
            uint64_t p0 = 0, p1 = 0, p2 = 0, p3 = 0;
            for (; j + 4 <= end; j += 4) {
                p0 += x[j];
                p1 += x[j + 1];
                p2 += x[j + 2];
                p3 += x[j + 3];
            }
            for (; j < end; j++)
                p0 += x[j];
            /* each partial sum holds at most step terms < q: no wrap */
            uint64_t part = tsafe_add_mod(tsafe_add_mod(p0 % q, p1 % q, q),
                                          tsafe_add_mod(p2 % q, p3 % q, q), q);
            acc = tsafe_add_mod(acc, part, q);
        }
        S[h] = acc;
    }
    /* stage 2: a_(c + m l) = sum_h y_h^-l S_h (lazy Shoup terms < 2q,
     * at most 64 of them: the 128-bit sum stays below q 2^64) */
    for (size_t k = 0; k < n_pos; k++) {
        size_t l = (pos[k] - c) / m;
        const uint64_t *v = cl->v + l * r, *vp = cl->vp + l * r;
        tsafe_u128 sum = 0;
        for (uint32_t h = 0; h < r; h++)
            sum += tsafe_mul_shoup_lazy(S[h], v[h], vp[h], q);
        out[k] = tsafe_reduce_128(sum, &t->mod);
    }
    return TSAFE_OK;
}
