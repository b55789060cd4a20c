/* Host emulation of the kernels; see emulate.h. Mirrors the launch code of
 * ntt.cu, elementwise.cu and rescale.cu step for step. */
#include <stddef.h>
#include <stdlib.h>
#include <vector>

#include "elementwise.cuh"
#include "emulate.h"
#include "ntt.cuh"

struct tsafe_cuda_emu {
    tsafe_cuda_tables tables;
    tsafe_ntt_plan plan;
};

extern "C" tsafe_status tsafe_cuda_emu_create(const tsafe_context *ctx,
                                              uint32_t fused_log_max,
                                              tsafe_cuda_emu **out)
{
    if (!ctx || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    tsafe_cuda_emu *e = (tsafe_cuda_emu *)calloc(1, sizeof(*e));
    if (!e)
        return TSAFE_E_NOMEM;
    tsafe_status st = tsafe_cuda_tables_build(ctx, &e->tables);
    if (st == TSAFE_OK &&
        !tsafe_ntt_plan_build(e->tables.log_n, fused_log_max, &e->plan))
        st = TSAFE_E_UNSUPPORTED;
    if (st != TSAFE_OK) {
        tsafe_cuda_emu_free(e);
        return st;
    }
    *out = e;
    return TSAFE_OK;
}

extern "C" void tsafe_cuda_emu_free(tsafe_cuda_emu *e)
{
    if (!e)
        return;
    tsafe_cuda_tables_free(&e->tables);
    free(e);
}

extern "C" uint32_t tsafe_cuda_emu_ntt_passes(const tsafe_cuda_emu *e)
{
    return e ? e->plan.n_passes : 0;
}

template <bool FWD>
static void emu_pass(const tsafe_ntt_args &a, uint64_t blocks,
                     uint32_t threads)
{
    const uint32_t tile = 1u << (a.S + a.log_cols);
    const uint32_t half = tile >> 1;
    std::vector<uint64_t> sm(tile);
    for (uint64_t blk = 0; blk < blocks; blk++) {
        tsafe_ntt_block b;
        tsafe_ntt_block_setup(a, blk, b);
        /* poison: every slot must be loaded before use */
        for (uint32_t e = 0; e < tile; e++)
            sm[e] = ~0ull;
        for (uint32_t t = 0; t < threads; t++)
            for (uint32_t e = t; e < tile; e += threads)
                tsafe_ntt_load(a, b, sm.data(), e);
        if (FWD) {
            for (uint32_t s = a.s0; s < a.s0 + a.S; s++)
                for (uint32_t t = 0; t < threads; t++)
                    for (uint32_t bf = t; bf < half; bf += threads)
                        tsafe_ntt_fwd_butterfly(a, b, sm.data(), s, bf);
        } else {
            for (uint32_t s = a.s0 + a.S; s-- > a.s0;)
                for (uint32_t t = 0; t < threads; t++)
                    for (uint32_t bf = t; bf < half; bf += threads)
                        tsafe_ntt_inv_butterfly(a, b, sm.data(), s, bf);
        }
        for (uint32_t t = 0; t < threads; t++)
            for (uint32_t e = t; e < tile; e += threads)
                tsafe_ntt_store<FWD>(a, b, sm.data(), e);
    }
}

/* Mirror of tsafe_cuda_ntt_launch. */
static void emu_ntt(tsafe_cuda_emu *em, int forward, const uint64_t *src,
                    uint64_t src_stride, uint64_t *dst, uint64_t dst_stride,
                    size_t n_polys, uint32_t n_limbs, uint32_t prime_base,
                    const tsafe_ntt_epi *epi)
{
    const tsafe_ntt_plan *pl = &em->plan;
    uint64_t rows = (uint64_t)n_polys * n_limbs;
    for (uint32_t step = 0; step < pl->n_passes; step++) {
        uint32_t pi = forward ? step : pl->n_passes - 1 - step;
        const tsafe_ntt_pass *p = &pl->pass[pi];
        tsafe_ntt_args a;
        tsafe_ntt_args_fill(&a, pl, forward, step, src, src_stride, dst,
                            dst_stride, n_limbs, prime_base,
                            forward ? em->tables.tw_fwd : em->tables.tw_inv,
                            em->tables.primes, epi);
        uint64_t blocks = tsafe_ntt_pass_blocks(pl, p, rows);
        if (forward)
            emu_pass<true>(a, blocks, p->threads);
        else
            emu_pass<false>(a, blocks, p->threads);
    }
}

extern "C" tsafe_status tsafe_cuda_emu_ntt(tsafe_cuda_emu *e, int forward,
                                           uint64_t *data, size_t n_polys,
                                           uint32_t n_limbs)
{
    if (!e || !data)
        return TSAFE_E_NULL;
    if (n_limbs == 0 || n_limbs > e->tables.n_primes)
        return TSAFE_E_RANGE;
    uint64_t stride = (uint64_t)n_limbs * e->tables.n;
    emu_ntt(e, forward, data, stride, data, stride, n_polys, n_limbs, 0, NULL);
    return TSAFE_OK;
}

/* Mirror of tsafe_ew_kernel: every (block, thread, vector, word). */
template <int OP>
static void emu_ew(tsafe_cuda_emu *e, uint64_t *out, const uint64_t *a,
                   const uint64_t *b, size_t n_polys, size_t b_polys,
                   uint32_t n_limbs)
{
    uint32_t log_n = e->tables.log_n;
    int bc = b_polys == 1 && n_polys != 1;
    uint64_t blocks = ((uint64_t)n_polys * n_limbs) << (log_n - TSAFE_EW_CHUNK_LOG);
    for (uint64_t blk = 0; blk < blocks; blk++)
        for (uint32_t t = 0; t < TSAFE_EW_THREADS; t++)
            for (uint32_t v = 0; v < 2; v++) {
                uint64_t off, boff;
                uint32_t limb;
                tsafe_ew_index(blk, t, v, log_n, n_limbs, bc, off, boff, limb);
                for (uint32_t w = 0; w < 2; w++)
                    out[off + w] = tsafe_ew_apply<OP>(a[off + w], b[boff + w],
                                                      e->tables.primes[limb]);
            }
}

extern "C" tsafe_status tsafe_cuda_emu_elementwise(tsafe_cuda_emu *e, int op,
                                                   uint64_t *out,
                                                   const uint64_t *a,
                                                   const uint64_t *b,
                                                   size_t n_polys,
                                                   size_t b_polys,
                                                   uint32_t n_limbs)
{
    if (!e || !out || !a || !b)
        return TSAFE_E_NULL;
    if (n_limbs == 0 || n_limbs > e->tables.n_primes)
        return TSAFE_E_RANGE;
    if (b_polys != n_polys && b_polys != 1)
        return TSAFE_E_SHAPE;
    switch (op) {
    case TSAFE_OP_ADD:
        emu_ew<TSAFE_OP_ADD>(e, out, a, b, n_polys, b_polys, n_limbs);
        break;
    case TSAFE_OP_SUB:
        emu_ew<TSAFE_OP_SUB>(e, out, a, b, n_polys, b_polys, n_limbs);
        break;
    case TSAFE_OP_MUL:
        emu_ew<TSAFE_OP_MUL>(e, out, a, b, n_polys, b_polys, n_limbs);
        break;
    default:
        return TSAFE_E_ARG;
    }
    return TSAFE_OK;
}

extern "C" tsafe_status tsafe_cuda_emu_rescale(tsafe_cuda_emu *e,
                                               uint64_t *out,
                                               const uint64_t *in,
                                               size_t n_polys,
                                               uint32_t n_limbs_in)
{
    if (!e || !out || !in)
        return TSAFE_E_NULL;
    if (n_limbs_in < 2 || n_limbs_in > e->tables.n_primes)
        return TSAFE_E_LEVEL;
    if (out == in)
        return TSAFE_E_ARG;
    size_t n = e->tables.n;
    uint32_t l = n_limbs_in - 1;
    const tsafe_cuda_rescale_const *rc = e->tables.rescale + l * TSAFE_MAX_PRIMES;
    /* poison out: every word must be produced by the steps below */
    for (size_t i = 0; i < n_polys * l * n; i++)
        out[i] = ~0ull;
    /* mirror of tsafe_cuda_rescale_launch */
    tsafe_ntt_epi spread = {TSAFE_NTT_EPI_RESCALE_SPREAD, rc, NULL, 0};
    emu_ntt(e, 0, in + l * n, (l + 1) * n, out + (l - 1) * n, l * n, n_polys, 1,
            l, &spread);
    tsafe_ntt_epi finish = {TSAFE_NTT_EPI_RESCALE_FINISH, rc, in, (l + 1) * n};
    emu_ntt(e, 1, out, l * n, out, l * n, n_polys, l, 0, &finish);
    return TSAFE_OK;
}
