/* `tensafe bench cuda`: the CUDA backend's benchmark (CUDA events) at the
 * seed and planner presets and on the sealed protocol's BFV ring (the
 * mul_acc batch, the modulus switch, and tsafe_bfv_seal_batch against the
 * CPU backend's sealings), or a clear skip line without a GPU. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "commands.h"
#include "tensafe/bfv.h"
#include "tensafe/bfv_backend.h"
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

/* tsafe_bfv_seal_batch of J sealings (8 reads each, as a sealed round-1
 * block) on backend b: the host wall time of the call, median of reps. */
static double seal_batch_us(const tsafe_bfv_context *c, const tsafe_bfv_public_key *pk,
                            tsafe_backend *b, size_t J, uint32_t reps, tsafe_status *st)
{
    size_t n = tsafe_bfv_context_n(c), L = tsafe_bfv_context_limbs(c);
    tsafe_bfv_sealer *sl = NULL;
    tsafe_buffer *key = NULL, **acc = calloc(J, sizeof *acc);
    tsafe_bfv_sealed **out = calloc(J, sizeof *out);
    tsafe_bfv_seal_item *it = calloc(J, sizeof *it);
    uint64_t *w = calloc(2 * L * n, sizeof *w);
    static const uint32_t pos[8] = {0, 512, 1024, 1536, 2048, 2560, 3072, 3584};
    double t[64], med = 0;
    *st = acc && out && it && w ? TSAFE_OK : TSAFE_E_NOMEM;
    if (*st == TSAFE_OK)
        *st = tsafe_bfv_sealer_create(c, b, &sl);
    if (*st == TSAFE_OK)
        *st = tsafe_bfv_public_key_operand(pk, b, &key);
    for (size_t k = 0; k < 2 * L * n && w; k++) /* any residues below the primes */
        w[k] = (k * 0x9e3779b97f4a7c15ull) >> 40;
    for (size_t j = 0; j < J && *st == TSAFE_OK; j++) {
        if ((*st = tsafe_buffer_alloc(b, 2, (uint32_t)L, &acc[j])) == TSAFE_OK &&
            (*st = tsafe_buffer_upload(acc[j], w, 2 * L * n)) == TSAFE_OK)
            *st = tsafe_bfv_sealed_create(c, 8, &out[j]);
        it[j] = (tsafe_bfv_seal_item){acc[j], pos, NULL, 8, NULL, out[j]};
    }
    if (reps > 64)
        reps = 64;
    for (uint32_t i = 0; i <= reps && *st == TSAFE_OK; i++) { /* the first: warm-up */
        double t0 = bench_now_us();
        *st = tsafe_bfv_seal_batch(sl, key, it, J, 20);
        if (i)
            t[i - 1] = bench_now_us() - t0;
    }
    if (*st == TSAFE_OK)
        med = bench_median_of(t, reps);
    for (size_t j = 0; j < J; j++) {
        tsafe_buffer_free(acc ? acc[j] : NULL);
        tsafe_bfv_sealed_free(out ? out[j] : NULL);
    }
    free(acc);
    free(out);
    free(it);
    free(w);
    tsafe_buffer_free(key);
    tsafe_bfv_sealer_free(sl);
    return med;
}

/* The sealed server's sealings per call: one batch on the GPU against the
 * same sealings one at a time on this machine's CPU backend (one thread). */
static int add_seal_batch(bench_report *r, const char *group, const tsafe_bfv_context *c,
                          int quick)
{
    tsafe_bfv_secret_key *sk = NULL;
    tsafe_bfv_public_key *pk = NULL;
    tsafe_backend *gpu = NULL, *cpu = NULL;
    tsafe_status st = tsafe_bfv_secret_key_generate(c, NULL, &sk);
    if (st == TSAFE_OK)
        st = tsafe_bfv_public_key_generate(c, sk, NULL, &pk);
    tsafe_bfv_secret_key_free(sk);
    if (st == TSAFE_OK)
        st = tsafe_backend_cuda_create_bfv(c, 0, &gpu);
    if (st == TSAFE_OK)
        st = tsafe_backend_cpu_create_bfv(c, &cpu);
    static const size_t sizes[] = {112, 1024, 5376};
    uint32_t reps = quick ? 3 : 11;
    double cpu_us = st == TSAFE_OK ? seal_batch_us(c, pk, cpu, 112, reps, &st) / 112 : 0;
    for (int i = 0; i < 3 && st == TSAFE_OK; i++) {
        double us = seal_batch_us(c, pk, gpu, sizes[i], reps, &st);
        char params[160], note[160];
        snprintf(params, sizeof params, "BFV sealed ring, %zu sealings, one call on %s",
                 sizes[i], tsafe_backend_name(gpu));
        snprintf(note, sizeof note,
                 "%.2f us per sealing; CPU backend one at a time %.1f us (%.1fx)",
                 us / sizes[i], cpu_us, cpu_us / (us / sizes[i]));
        if (st == TSAFE_OK)
            bench_report_add(r, group, "seal batch (tsafe_bfv_seal_batch)", params, us, note);
    }
    tsafe_backend_free(gpu);
    tsafe_backend_free(cpu);
    tsafe_bfv_public_key_free(pk);
    return st == TSAFE_OK ? 0 : tool_fail("bench cuda (seal batch)", st);
}

/* tsafe_bfv_ct_read_buffers of n ciphertexts (a sealed-private token's
 * share ciphertexts, a query's chunks) on backend b, synchronized: the
 * host wall time, median of reps. On a GPU c1 is expanded from the seeds
 * there (the ct_read slot); on the CPU backend on this thread. */
static double ct_read_us(const tsafe_bfv_context *c, tsafe_backend *b, size_t n, uint32_t reps,
                         tsafe_status *st)
{
    size_t ctl = tsafe_bfv_ct_bytes(c), nc = tsafe_bfv_context_n(c);
    uint8_t *buf = malloc(n * ctl);
    tsafe_buffer **dst = calloc(n, sizeof *dst);
    int64_t *m = calloc(nc, sizeof *m);
    tsafe_bfv_secret_key *sk = NULL;
    tsafe_bfv_ct *ct = NULL;
    double t[64], med = 0;
    *st = buf && dst && m ? TSAFE_OK : TSAFE_E_NOMEM;
    if (*st == TSAFE_OK)
        *st = tsafe_bfv_secret_key_generate(c, NULL, &sk);
    if (*st == TSAFE_OK)
        *st = tsafe_bfv_ct_create(c, &ct);
    for (size_t j = 0; j < n && *st == TSAFE_OK; j++) {
        if ((*st = tsafe_bfv_encrypt(c, sk, m, nc, NULL, ct)) == TSAFE_OK &&
            (*st = tsafe_bfv_ct_write(c, ct, buf + j * ctl, ctl)) == TSAFE_OK)
            *st = tsafe_buffer_alloc(b, 2, tsafe_bfv_context_limbs(c), &dst[j]);
    }
    if (reps > 64)
        reps = 64;
    for (uint32_t i = 0; i <= reps && *st == TSAFE_OK; i++) { /* the first: warm-up */
        double t0 = bench_now_us();
        *st = tsafe_bfv_ct_read_buffers(c, buf, ctl, n, dst);
        if (*st == TSAFE_OK)
            *st = tsafe_backend_synchronize(b);
        if (i)
            t[i - 1] = bench_now_us() - t0;
    }
    if (*st == TSAFE_OK)
        med = bench_median_of(t, reps);
    for (size_t j = 0; dst && j < n; j++)
        tsafe_buffer_free(dst[j]);
    free(dst);
    free(buf);
    free(m);
    tsafe_bfv_ct_free(ct);
    tsafe_bfv_secret_key_free(sk);
    return med;
}

static int add_ct_read(bench_report *r, const char *group, const tsafe_bfv_context *c, int quick)
{
    tsafe_backend *gpu = NULL, *cpu = NULL;
    tsafe_status st = tsafe_backend_cuda_create_bfv(c, 0, &gpu);
    if (st == TSAFE_OK)
        st = tsafe_backend_cpu_create_bfv(c, &cpu);
    uint32_t reps = quick ? 3 : 11;
    static const size_t sizes[] = {8, 128};
    for (int i = 0; i < 2 && st == TSAFE_OK; i++) {
        double g = ct_read_us(c, gpu, sizes[i], reps, &st);
        double h = st == TSAFE_OK ? ct_read_us(c, cpu, sizes[i], reps, &st) : 0;
        char params[160], note[160];
        snprintf(params, sizeof params, "BFV sealed ring, %zu ciphertexts, one call on %s",
                 sizes[i], tsafe_backend_name(gpu));
        snprintf(note, sizeof note, "%.2f us per ciphertext; CPU backend %.1f us (%.1fx)",
                 g / sizes[i], h / sizes[i], h / g);
        if (st == TSAFE_OK)
            bench_report_add(r, group, "ct read (seeds expanded on the device)", params, g,
                             note);
    }
    tsafe_backend_free(gpu);
    tsafe_backend_free(cpu);
    return st == TSAFE_OK ? 0 : tool_fail("bench cuda (ct read)", st);
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
    if (st != TSAFE_OK) {
        tsafe_bfv_context_free(bfv);
        return tool_fail("bench cuda (BFV ring)", st);
    }
    char params[300];
    snprintf(params, sizeof params, "BFV sealed ring N=2^%u on %s", res.log_n,
             res.device_name);
    add_ring_ops(r, group, params, &res);
    int rc = add_seal_batch(r, group, bfv, quick);
    if (rc == 0)
        rc = add_ct_read(r, group, bfv, quick);
    tsafe_bfv_context_free(bfv);
    return rc;
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
