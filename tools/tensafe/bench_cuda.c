/* `tensafe bench cuda`: the CUDA backend's benchmark (CUDA events) at the
 * seed and planner presets, or a clear skip line without a GPU. */
#include <stdio.h>

#include "bench.h"
#include "commands.h"
#include "tensafe/ckks.h"

#ifdef TSAFE_WITH_CUDA
#include "tensafe/cuda.h"

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
        tsafe_cuda_bench_result res;
        tsafe_cuda_bench_config cfg = {.reps = quick ? 5u : 21u};
        tsafe_status st = tsafe_params_preset(presets[i], &p);
        if (st == TSAFE_OK)
            st = tsafe_context_create(&p, &ctx);
        if (st == TSAFE_OK)
            st = tsafe_cuda_bench(ctx, 0, &cfg, &res);
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
    }
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
