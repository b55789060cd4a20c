/* The GPU side of `tensafe bench cuda` (bench_cuda_kernels.cu, compiled
 * with nvcc only when the SDK is built with CUDA, linked with the static
 * libtensafe-he-cuda whose launchers it times directly): CUDA-event medians
 * of the backend's kernels on buffers larger than L2, a small per-token
 * pipeline with plain launches vs a graph replay, transfer rates, and the
 * sealed path's ring operations. Not part of any library's API. */
#ifndef TSAFE_TOOL_BENCH_CUDA_H
#define TSAFE_TOOL_BENCH_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/bfv.h"
#include "tensafe/ckks.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Zero fields take defaults. */
typedef struct cuda_bench_config {
    size_t min_buffer_bytes; /* large-op buffer size; default 4 x L2 size */
    uint32_t reps;           /* timed repetitions (median); default 21 */
    uint32_t warmup;         /* untimed runs first; default 3 */
    uint32_t pipeline_iters; /* pipeline runs per timing; default 100 */
} cuda_bench_config;

/* Medians over `reps` runs, timed with CUDA events on the backend stream. */
typedef struct cuda_bench_result {
    char device_name[256];
    int cc_major, cc_minor;
    int sm_count;
    size_t l2_bytes;
    uint32_t log_n;           /* ring degree N = 2^log_n */
    uint32_t n_limbs;         /* limbs per polynomial in the big buffers */
    size_t n_polys;           /* polynomials in the big buffers */
    double buffer_mib;        /* size of one big buffer */
    uint32_t ntt_passes;      /* 1 = fused shared-memory kernel */
    double ntt_fwd_us_per_limb;  /* batched forward NTT, per (poly, limb) */
    double ntt_inv_us_per_limb;
    double ntt_fwd_gbps;      /* bytes read + written / time */
    double mul_us_per_limb;   /* element-wise product (ct x pt) */
    double mul_gbps;          /* 3 words moved per coefficient */
    double add_us_per_limb;
    double rescale_us_per_poly; /* per polynomial of n_limbs limbs */
    /* small per-token pipeline (one 2-poly ciphertext times 8 plaintexts,
     * sum, rescale): plain launches vs one graph replay, per pipeline */
    double pipeline_plain_us;
    double pipeline_graph_us;
    double upload_gbps;       /* host -> device via pinned staging */
    double download_gbps;
    int roundtrip_ok;         /* forward then inverse NTT returned the input */
    uint32_t reps;
    /* multiply-accumulate: one tsafe_backend_mul_acc-shaped call of mac_jobs
     * jobs (2-poly accumulators) x mac_terms terms each, a term being a
     * 2-poly ciphertext times a 1-poly operand (broadcast), n_limbs limbs:
     * the shape of a batch of sealed sites / clients */
    uint32_t mac_jobs, mac_terms;
    double mac_us;            /* the whole call */
    double mac_us_per_term_limb; /* per (term, limb) */
    double mac_gbps;          /* operand and accumulator bytes / time */
    double mod_switch_us_per_poly; /* coefficient form, n_limbs -> n_limbs-1 */
} cuda_bench_result;

/* Run the benchmark on device `device` with ctx's parameters (cfg NULL =
 * defaults). Allocates and frees its own backend and buffers. */
tsafe_status cuda_bench_ckks(
    const tsafe_context *ctx, int device, const cuda_bench_config *cfg,
    cuda_bench_result *out);

/* The ring operations of the sealed path on a BFV ring (the backend of
 * tsafe_backend_cuda_create_bfv): fills the device fields, log_n, n_limbs
 * (2), n_polys, buffer_mib, the mac_* fields and mod_switch_us_per_poly
 * (2 -> 1 limbs), reps; every other figure is 0 (no NTT / rescale runs
 * here). cfg as for cuda_bench_ckks (pipeline_iters unused). */
tsafe_status cuda_bench_bfv(
    const tsafe_bfv_context *ctx, int device, const cuda_bench_config *cfg,
    cuda_bench_result *out);

#ifdef __cplusplus
}
#endif
#endif
