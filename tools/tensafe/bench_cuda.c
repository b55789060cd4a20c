/* `tensafe bench cuda`: the CUDA backend's benchmark (CUDA events) at the
 * seed and planner presets and on the sealed protocol's BFV ring (the
 * mul_acc batch and the modulus switch), or a clear skip line without a
 * GPU. */
#include <stdio.h>

#include "bench.h"
#include "commands.h"
#include "tensafe/bfv.h"
#include "tensafe/ckks.h"
#include "tensafe/lora_sealed.h"

#ifdef TSAFE_WITH_CUDA
#include "bench_cuda.h"
#include "tensafe/cuda.h"

/* mul_acc (one call of jobs x terms, ct x pt each) and the modulus switch. */
static void add_ring_ops(bench_report *r, const char *group, const char *params,
                         const cuda_bench_result *res)
{
    char note[96];
    snprintf(note, sizeof note, "%u jobs x %u terms, one call; %.4f us per term-limb",
             res->mac_jobs, res->mac_terms, res->mac_us_per_term_limb);
    bench_report_add(r, group, "mul_acc batch (ct x pt, accumulated)", params, res->mac_us,
                     note);
    bench_report_add(r, group, "mod_switch per polynomial (L -> L-1)", params,
                     res->mod_switch_us_per_poly, NULL);
}

int bench_cuda(bench_report *r, int quick)
{
    const char *group = "cuda";
    int count = 0;
    if (tsafe_cuda_device_count(&count) != TSAFE_OK || count == 0) {
        bench_report_add_value(r, group, "skipped: no CUDA device", "device count", 0, "devices");
        return 0;
    }
    static const char *presets[] = {"seed-n16384", "seed-n32768", "ifma-n4096"};
    for (int i = 0; i < 3; i++) {
        tsafe_params p;
        tsafe_context *ctx = NULL;
        cuda_bench_result res;
        cuda_bench_config cfg = {.reps = quick ? 5u : 21u};
        tsafe_status st = tsafe_params_preset(presets[i], &p);
        if (st == TSAFE_OK)
            st = tsafe_context_create(&p, &ctx);
        if (st == TSAFE_OK)
            st = cuda_bench_ckks(ctx, 0, &cfg, &res);
        tsafe_context_free(ctx);
        if (st != TSAFE_OK)
            return tool_fail("bench cuda", st);
        char params[300];
        snprintf(params, sizeof params, "%s on %s", presets[i], res.device_name);
        bench_report_add(r, group, "NTT forward per limb (batched)", params, res.ntt_fwd_us_per_limb, NULL);
        bench_report_add(r, group, "NTT inverse per limb (batched)", params, res.ntt_inv_us_per_limb, NULL);
        bench_report_add(r, group, "ct x pt per limb", params, res.mul_us_per_limb, NULL);
        bench_report_add(r, group, "rescale per polynomial", params, res.rescale_us_per_poly, NULL);
        bench_report_add(r, group, "pipeline, plain launches", params, res.pipeline_plain_us, NULL);
        bench_report_add(r, group, "pipeline, CUDA graph replay", params, res.pipeline_graph_us, NULL);
        add_ring_ops(r, group, params, &res);
    }
    /* the sealed path's ring: round 1 of a plan for d_in 4096, rank 16 */
    tsafe_sealed_plan plan;
    tsafe_bfv_context *bfv = NULL;
    cuda_bench_result res;
    cuda_bench_config cfg = {.reps = quick ? 5u : 21u};
    tsafe_status st = tsafe_sealed_plan_derive(TSAFE_SEALED_PRIVATE, 4096, 16, 4096, NULL,
                                               &plan);
    if (st == TSAFE_OK)
        st = tsafe_bfv_context_create(&plan.r1, &bfv);
    if (st == TSAFE_OK)
        st = cuda_bench_bfv(bfv, 0, &cfg, &res);
    tsafe_bfv_context_free(bfv);
    if (st != TSAFE_OK)
        return tool_fail("bench cuda (BFV ring)", st);
    char params[300];
    snprintf(params, sizeof params, "BFV sealed ring N=2^%u on %s", res.log_n,
             res.device_name);
    add_ring_ops(r, group, params, &res);
    return 0;
}
#else
int bench_cuda(bench_report *r, int quick)
{
    (void)quick;
    bench_report_add_value(r, "cuda", "skipped: built without CUDA (CUDA=0 or no nvcc)",
                           "", 0, "devices");
    return 0;
}
#endif
