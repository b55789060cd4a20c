/* Batched negacyclic NTT of the CUDA backend (internal).
 *
 * Convention (identical to the CPU backend): forward takes natural-order
 * coefficients in [0, q) to evaluations at psi^(2 bitrev(k) + 1) in slot k,
 * in [0, q); inverse is its exact inverse. Forward = Cooley-Tukey stages
 * m = 1, 2, .., N/2 (stride t = N/2m, twiddle psi^bitrev(m + i) for block i);
 * inverse = Gentleman-Sande with the inverse twiddles in reverse stage
 * order, then a multiply by N^-1. Lazy ranges: forward [0, 4q), inverse
 * [0, 2q) between stages and between passes; the last pass reduces fully.
 *
 * Tiling. A pass runs stages s0 .. s0+S-1 (stage s has m = 2^s). The
 * elements one tile needs are j = w (N >> s0) + k t_min + r, k < 2^S, with
 * t_min = N >> (s0 + S) the smallest stride of the pass, w the window and r
 * a column; a tile holds C = 2^log_cols consecutive columns so that global
 * loads are coalesced. One thread block = one tile of one (poly, limb): it
 * loads the tile into shared memory, runs the S stages with a barrier
 * between them, and writes it back. Small N: one fused pass (s0 = 0,
 * S = log N, C = 1). Large N (tile beyond shared memory): two passes, the
 * first over the log N - log_n2 large strides (columns), the second over
 * the log_n2 small ones (contiguous chunks of 2^log_n2).
 *
 * Epilogues (last pass only) fuse the rescale into the two NTTs it needs:
 * RESCALE_SPREAD (inverse NTT of the last limb, prime l = prime_base, one
 * limb): instead of storing t, store its spread value into each of the l
 * output limbs below dst (dst points at output limb l-1);
 * RESCALE_FINISH (forward NTT of the spread limbs): store
 * (aux - t) q_l^-1 where aux is the rescale input at the same position.
 *
 * Single source: everything a kernel thread does is a __host__ __device__
 * function below -- block setup, and one "phase" of the block's work per
 * barrier interval (tsafe_ntt_phase) -- and the launch geometry of every
 * pass (tsafe_ntt_step) and of the rescale (tsafe_rescale_calls) is shared
 * too. The kernel (ntt.cu) runs the phases with __syncthreads() between
 * them; the host emulation (emulate.cu) runs each phase for every thread
 * of the block in turn. Only the launch itself and the barrier differ. */
#ifndef TSAFE_CUDA_NTT_CUH
#define TSAFE_CUDA_NTT_CUH

#include <stddef.h>
#include <stdint.h>

#include "modarith.cuh"
#include "rescale.cuh"

#define TSAFE_NTT_MAX_THREADS 1024
/* log2 of the largest fused tile (16384 words = 128 KiB of shared memory) */
#define TSAFE_NTT_FUSED_LOG_MAX 14
/* second-pass chunk of the two-pass NTT (32 KiB of shared memory) */
#define TSAFE_NTT_TWO_PASS_LOG_N2 12
/* elements per first-pass tile (columns x rows) */
#define TSAFE_NTT_COL_TILE_LOG 11

typedef struct tsafe_ntt_pass {
    uint32_t s0, S, log_cols;
    uint32_t threads;
    size_t smem_bytes;
} tsafe_ntt_pass;

typedef struct tsafe_ntt_plan {
    uint32_t log_n;
    uint32_t n_passes; /* 1 or 2, in forward order */
    tsafe_ntt_pass pass[2];
} tsafe_ntt_plan;

/* Plan for N = 2^log_n when a block may use 2^fused_log_max words of
 * shared memory for a fused tile. */
static inline int tsafe_ntt_plan_build(uint32_t log_n, uint32_t fused_log_max,
                                       tsafe_ntt_plan *pl)
{
    if (log_n < 2 || log_n > 20 || fused_log_max < 2)
        return 0;
    pl->log_n = log_n;
    if (log_n <= fused_log_max) {
        pl->n_passes = 1;
        pl->pass[0].s0 = 0;
        pl->pass[0].S = log_n;
        pl->pass[0].log_cols = 0;
    } else {
        uint32_t log_n2 = TSAFE_NTT_TWO_PASS_LOG_N2;
        if (log_n2 > fused_log_max)
            log_n2 = fused_log_max;
        if (log_n2 >= log_n)
            log_n2 = log_n - 1;
        uint32_t s1 = log_n - log_n2;     /* stages of the first pass */
        if (s1 > fused_log_max)
            return 0;                     /* would need three passes */
        uint32_t lc = TSAFE_NTT_COL_TILE_LOG > s1 ? TSAFE_NTT_COL_TILE_LOG - s1 : 0;
        if (lc > log_n2)
            lc = log_n2;                  /* at most t_min columns */
        if (s1 + lc > fused_log_max)
            lc = fused_log_max - s1;
        pl->n_passes = 2;
        pl->pass[0].s0 = 0;
        pl->pass[0].S = s1;
        pl->pass[0].log_cols = lc;
        pl->pass[1].s0 = s1;
        pl->pass[1].S = log_n2;
        pl->pass[1].log_cols = 0;
    }
    for (uint32_t i = 0; i < pl->n_passes; i++) {
        tsafe_ntt_pass *p = &pl->pass[i];
        size_t tile = (size_t)1 << (p->S + p->log_cols);
        size_t bfly = tile / 2;
        p->threads = bfly < TSAFE_NTT_MAX_THREADS ? (uint32_t)bfly
                                                   : TSAFE_NTT_MAX_THREADS;
        p->smem_bytes = tile * sizeof(uint64_t);
    }
    return 1;
}

/* Blocks of one pass over rows = n_polys * n_limbs limbs. */
static inline uint64_t tsafe_ntt_pass_blocks(const tsafe_ntt_plan *pl,
                                             const tsafe_ntt_pass *p,
                                             uint64_t rows)
{
    return rows << (pl->log_n - p->S - p->log_cols);
}

enum {
    TSAFE_NTT_EPI_NONE = 0,
    TSAFE_NTT_EPI_RESCALE_SPREAD = 1, /* inverse only */
    TSAFE_NTT_EPI_RESCALE_FINISH = 2  /* forward only */
};

/* Epilogue request of one NTT call (NULL = none). */
typedef struct tsafe_ntt_epi {
    uint32_t kind;                      /* TSAFE_NTT_EPI_* */
    const tsafe_cuda_rescale_const *rc; /* rescale constants of prime l */
    const uint64_t *aux;                /* FINISH: rescale input */
    uint64_t aux_poly_stride;
} tsafe_ntt_epi;

typedef struct tsafe_ntt_args {
    const uint64_t *src;
    uint64_t *dst;
    uint64_t src_poly_stride; /* words between polynomials */
    uint64_t dst_poly_stride;
    uint32_t n_limbs;         /* limbs per polynomial touched */
    uint32_t prime_base;      /* limb i uses prime prime_base + i */
    uint32_t log_n;
    uint32_t s0, S, log_cols;
    uint32_t final_pass;      /* reduce fully (forward) / times N^-1 (inverse) */
    const uint64_t *tw;       /* [prime][N][2] (w, w') for this direction */
    const tsafe_cuda_prime *primes;
    uint32_t epilogue;        /* TSAFE_NTT_EPI_*, applied in the final pass */
    const tsafe_cuda_rescale_const *rc; /* row of the dropped prime */
    const uint64_t *aux;      /* FINISH: rescale input, same limb layout */
    uint64_t aux_poly_stride;
} tsafe_ntt_args;

/* Launch arguments of pass `step` (in execution order) of an NTT call;
 * shared by the launcher and the emulation. */
static inline void tsafe_ntt_args_fill(
    tsafe_ntt_args *a, const tsafe_ntt_plan *pl, int forward, uint32_t step,
    const uint64_t *src, uint64_t src_stride, uint64_t *dst,
    uint64_t dst_stride, uint32_t n_limbs, uint32_t prime_base,
    const uint64_t *tw, const tsafe_cuda_prime *primes, const tsafe_ntt_epi *epi)
{
    uint32_t pi = forward ? step : pl->n_passes - 1 - step;
    const tsafe_ntt_pass *p = &pl->pass[pi];
    a->src = step == 0 ? src : dst;
    a->src_poly_stride = step == 0 ? src_stride : dst_stride;
    a->dst = dst;
    a->dst_poly_stride = dst_stride;
    a->n_limbs = n_limbs;
    a->prime_base = prime_base;
    a->log_n = pl->log_n;
    a->s0 = p->s0;
    a->S = p->S;
    a->log_cols = p->log_cols;
    a->final_pass = step == pl->n_passes - 1;
    a->tw = tw;
    a->primes = primes;
    a->epilogue = epi ? epi->kind : (uint32_t)TSAFE_NTT_EPI_NONE;
    a->rc = epi ? epi->rc : NULL;
    a->aux = epi ? epi->aux : NULL;
    a->aux_poly_stride = epi ? epi->aux_poly_stride : 0;
}

/* Per-block values. */
typedef struct tsafe_ntt_block {
    const uint64_t *src;   /* tile origin (w, k = 0, r0) */
    uint64_t *dst;
    const uint64_t *aux;   /* FINISH epilogue: same position in aux */
    const uint64_t *tw;    /* this prime's twiddles */
    uint64_t q, two_q, n_inv, n_inv_shoup;
    uint32_t limb;
    uint32_t w;            /* window index */
    uint32_t log_tmin;
} tsafe_ntt_block;

TSAFE_HD void tsafe_ntt_block_setup(const tsafe_ntt_args &a, uint64_t block,
                                    tsafe_ntt_block &b)
{
    uint32_t log_tiles = a.log_n - a.S - a.log_cols; /* tiles per limb */
    uint64_t row = block >> log_tiles;
    uint64_t tile = block & ((1ull << log_tiles) - 1);
    uint64_t poly = row / a.n_limbs;
    uint32_t limb = (uint32_t)(row - poly * a.n_limbs);
    uint32_t prime = a.prime_base + limb;
    b.log_tmin = a.log_n - a.s0 - a.S;
    uint32_t log_groups = b.log_tmin - a.log_cols; /* column groups per window */
    b.w = (uint32_t)(tile >> log_groups);
    uint64_t g = tile & ((1ull << log_groups) - 1);
    uint64_t off = ((uint64_t)b.w << (a.log_n - a.s0)) + (g << a.log_cols) +
                   ((uint64_t)limb << a.log_n);
    b.src = a.src + poly * a.src_poly_stride + off;
    b.dst = a.dst + poly * a.dst_poly_stride + off;
    b.aux = a.aux ? a.aux + poly * a.aux_poly_stride + off : a.aux;
    b.limb = limb;
    b.tw = a.tw + ((uint64_t)prime << (a.log_n + 1));
    const tsafe_cuda_prime &p = a.primes[prime];
    b.q = p.q;
    b.two_q = p.two_q;
    b.n_inv = p.n_inv;
    b.n_inv_shoup = p.n_inv_shoup;
}

/* Shared-memory slot e = k C + c <-> global offset k t_min + c. */
TSAFE_HD uint64_t tsafe_ntt_global_off(const tsafe_ntt_args &a,
                                       const tsafe_ntt_block &b, uint32_t e)
{
    uint32_t k = e >> a.log_cols;
    uint32_t c = e & ((1u << a.log_cols) - 1);
    return ((uint64_t)k << b.log_tmin) + c;
}

TSAFE_HD void tsafe_ntt_load(const tsafe_ntt_args &a, const tsafe_ntt_block &b,
                             uint64_t *sm, uint32_t e)
{
    sm[e] = b.src[tsafe_ntt_global_off(a, b, e)];
}

/* Butterfly number bf of stage s: shared slots i0 < i1 and twiddle index. */
TSAFE_HD void tsafe_ntt_pair(const tsafe_ntt_args &a, const tsafe_ntt_block &b,
                             uint32_t s, uint32_t bf, uint32_t &i0,
                             uint32_t &i1, uint32_t &widx)
{
    uint32_t log_tk = a.s0 + a.S - 1 - s; /* stride in rows */
    uint32_t c = bf & ((1u << a.log_cols) - 1);
    uint32_t pr = bf >> a.log_cols;
    uint32_t blk = pr >> log_tk;
    uint32_t off = pr & ((1u << log_tk) - 1);
    uint32_t k0 = (blk << (log_tk + 1)) + off;
    i0 = (k0 << a.log_cols) + c;
    i1 = i0 + (1u << (log_tk + a.log_cols));
    widx = (1u << s) + (b.w << (s - a.s0)) + blk;
}

TSAFE_HD void tsafe_ntt_fwd_butterfly(const tsafe_ntt_args &a,
                                      const tsafe_ntt_block &b, uint64_t *sm,
                                      uint32_t s, uint32_t bf)
{
    uint32_t i0, i1, wi;
    tsafe_ntt_pair(a, b, s, bf, i0, i1, wi);
    ulonglong2 W = ts_ldg16(b.tw + 2 * (uint64_t)wi); /* (w, w') */
    uint64_t w = W.x, wp = W.y;
    uint64_t u = sm[i0];
    if (u >= b.two_q)
        u -= b.two_q;
    uint64_t v = ts_mul_shoup_lazy(sm[i1], w, wp, b.q);
    sm[i0] = u + v;
    sm[i1] = u + b.two_q - v;
}

TSAFE_HD void tsafe_ntt_inv_butterfly(const tsafe_ntt_args &a,
                                      const tsafe_ntt_block &b, uint64_t *sm,
                                      uint32_t s, uint32_t bf)
{
    uint32_t i0, i1, wi;
    tsafe_ntt_pair(a, b, s, bf, i0, i1, wi);
    ulonglong2 W = ts_ldg16(b.tw + 2 * (uint64_t)wi); /* (w, w') */
    uint64_t w = W.x, wp = W.y;
    uint64_t u = sm[i0], v = sm[i1];
    uint64_t x = u + v;
    if (x >= b.two_q)
        x -= b.two_q;
    sm[i0] = x;
    sm[i1] = ts_mul_shoup_lazy(u + b.two_q - v, w, wp, b.q);
}

template <bool FWD>
TSAFE_HD void tsafe_ntt_store(const tsafe_ntt_args &a, const tsafe_ntt_block &b,
                              const uint64_t *sm, uint32_t e)
{
    uint64_t v = sm[e];
    uint64_t off = tsafe_ntt_global_off(a, b, e);
    if (!a.final_pass) {
        b.dst[off] = v;
        return;
    }
    if (FWD) {
        if (v >= b.two_q)
            v -= b.two_q;
    } else {
        v = ts_mul_shoup_lazy(v, b.n_inv, b.n_inv_shoup, b.q);
    }
    if (v >= b.q)
        v -= b.q;
    if (!FWD && a.epilogue == TSAFE_NTT_EPI_RESCALE_SPREAD) {
        /* limb l of the input -> output limbs 0..l-1; dst is limb l-1 */
        uint32_t l = a.prime_base;
        uint64_t n = 1ull << a.log_n;
        uint64_t *d = b.dst + off - (uint64_t)(l - 1) * n;
        for (uint32_t i = 0; i < l; i++)
            d[i * n] = tsafe_rescale_spread(v, b.q, a.primes[i], a.rc[i]);
        return;
    }
    if (FWD && a.epilogue == TSAFE_NTT_EPI_RESCALE_FINISH)
        v = tsafe_rescale_finish(b.aux[off], v, b.q, a.rc[b.limb]);
    b.dst[off] = v;
}

/* The block's work in phases, one per barrier interval: phase 0 loads the
 * tile into shared memory, phases 1..S run one stage each (execution
 * order: increasing s forward, decreasing inverse), phase S+1 stores.
 * Thread tid of nthreads takes every nthreads-th word or butterfly; within
 * a phase the threads touch disjoint shared-memory words, so any order of
 * the threads gives the parallel result. */
TSAFE_HD uint32_t tsafe_ntt_phases(const tsafe_ntt_args &a) { return a.S + 2; }

template <bool FWD>
TSAFE_HD void tsafe_ntt_phase(const tsafe_ntt_args &a, const tsafe_ntt_block &b,
                              uint64_t *sm, uint32_t phase, uint32_t tid,
                              uint32_t nthreads)
{
    const uint32_t tile = 1u << (a.S + a.log_cols);
    if (phase == 0) {
        for (uint32_t e = tid; e < tile; e += nthreads)
            tsafe_ntt_load(a, b, sm, e);
    } else if (phase <= a.S) {
        uint32_t s = FWD ? a.s0 + phase - 1 : a.s0 + a.S - phase;
        for (uint32_t bf = tid; bf < tile / 2; bf += nthreads) {
            if (FWD)
                tsafe_ntt_fwd_butterfly(a, b, sm, s, bf);
            else
                tsafe_ntt_inv_butterfly(a, b, sm, s, bf);
        }
    } else {
        for (uint32_t e = tid; e < tile; e += nthreads)
            tsafe_ntt_store<FWD>(a, b, sm, e);
    }
}

/* One NTT request: n_polys x n_limbs limbs from src (poly stride
 * src_stride) to dst (dst_stride), src == dst allowed with one layout;
 * limb i uses prime prime_base + i; epi optional (NULL = plain NTT). */
typedef struct tsafe_ntt_call {
    int forward;
    const uint64_t *src;
    uint64_t src_stride;
    uint64_t *dst;
    uint64_t dst_stride;
    size_t n_polys;
    uint32_t n_limbs;
    uint32_t prime_base;
    const tsafe_ntt_epi *epi;
} tsafe_ntt_call;

/* Grid of one pass. */
typedef struct tsafe_ntt_dims {
    uint64_t blocks;
    uint32_t threads;
    size_t smem_bytes;
} tsafe_ntt_dims;

/* Arguments and grid of pass `step` (execution order) of call c, for the
 * kernel or its emulation. TSAFE_E_RANGE when the grid exceeds 2^31 - 1
 * blocks (one launch). */
static inline tsafe_status tsafe_ntt_step(const tsafe_ntt_plan *pl,
                                          const tsafe_ntt_call *c,
                                          uint32_t step, const uint64_t *tw_fwd,
                                          const uint64_t *tw_inv,
                                          const tsafe_cuda_prime *primes,
                                          tsafe_ntt_args *a, tsafe_ntt_dims *d)
{
    uint32_t pi = c->forward ? step : pl->n_passes - 1 - step;
    const tsafe_ntt_pass *p = &pl->pass[pi];
    uint64_t rows = (uint64_t)c->n_polys * c->n_limbs;
    if (c->n_limbs && rows / c->n_limbs != c->n_polys)
        return TSAFE_E_RANGE;
    d->blocks = tsafe_ntt_pass_blocks(pl, p, rows);
    if (rows && (d->blocks >> (pl->log_n - p->S - p->log_cols)) != rows)
        return TSAFE_E_RANGE; /* the shift overflowed */
    if (d->blocks > 0x7fffffffull)
        return TSAFE_E_RANGE;
    d->threads = p->threads;
    d->smem_bytes = p->smem_bytes;
    tsafe_ntt_args_fill(a, pl, c->forward, step, c->src, c->src_stride, c->dst,
                        c->dst_stride, c->n_limbs, c->prime_base,
                        c->forward ? tw_fwd : tw_inv, primes, c->epi);
    return TSAFE_OK;
}

/* The rescale (NTT form in and out, `in` has n_limbs_in limbs, out
 * n_limbs_in - 1, out != in) as two NTT calls with fused epilogues:
 *  1. inverse NTT of each polynomial's last limb (prime l), read from `in`;
 *     its last pass writes the rounded, spread values t_i into all l
 *     output limbs -- no scratch buffer, no extra kernel;
 *  2. forward NTT of the l output limbs; its last pass stores
 *     (in_i - t_i) q_l^-1 mod q_i.
 * rescale_table: tsafe_cuda_tables.rescale (device or host copy). The
 * epilogue records are written to epi[0..1], which must outlive the calls. */
static inline void tsafe_rescale_calls(uint64_t n, uint64_t *out,
                                       const uint64_t *in, size_t n_polys,
                                       uint32_t n_limbs_in,
                                       const tsafe_cuda_rescale_const *rescale_table,
                                       tsafe_ntt_epi epi[2],
                                       tsafe_ntt_call calls[2])
{
    uint32_t l = n_limbs_in - 1;
    const tsafe_cuda_rescale_const *rc = rescale_table + l * TSAFE_MAX_PRIMES;
    epi[0].kind = TSAFE_NTT_EPI_RESCALE_SPREAD;
    epi[0].rc = rc;
    epi[0].aux = NULL;
    epi[0].aux_poly_stride = 0;
    epi[1].kind = TSAFE_NTT_EPI_RESCALE_FINISH;
    epi[1].rc = rc;
    epi[1].aux = in;
    epi[1].aux_poly_stride = (l + 1) * n;
    /* 1: dst is output limb l-1; the epilogue spreads to limbs 0..l-1 */
    calls[0] = {0, in + l * n, (l + 1) * n, out + (l - 1) * n, l * n, n_polys,
                1, l, &epi[0]};
    calls[1] = {1, out, l * n, out, l * n, n_polys, l, 0, &epi[1]};
}

#endif
