/* One MoE layer with expert LoRA on the routed experts, computed under HE
 * (local mode for brevity; see lora_two_party.c for the two-party flow), and
 * compared with the same LoRA in plaintext.
 * Build: cc -o moe_layer moe_layer.c $(pkg-config --cflags --libs tensafe-moe) -lm */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <tensafe/moe_lora.h>

#define CHECK(call)                                                            \
    do {                                                                       \
        tsafe_status st_ = (call);                                             \
        if (st_ != TSAFE_OK) {                                                 \
            fprintf(stderr, "%s: %s\n", #call, tsafe_strerror(st_));           \
            return 1;                                                          \
        }                                                                      \
    } while (0)

#define EXPERTS 16
#define RANK 8

static float frand(unsigned *s) { *s = *s * 1103515245u + 12345u; return ((*s >> 8) & 0xffff) / 32768.0f - 1.0f; }

int main(void)
{
    tsafe_moe_config cfg;
    CHECK(tsafe_moe_config_preset("qwen3.5-35b-a3b", &cfg));
    cfg.top_k = 4; /* a smaller layer: 16 experts, top-4 + shared */
    tsafe_moe_layer *layer = NULL;
    CHECK(tsafe_moe_layer_create_random(&cfg, 1, EXPERTS, &layer));
    const tsafe_moe_config *c = tsafe_moe_layer_config(layer);
    uint32_t d = c->hidden_size, I = c->expert_intermediate;
    printf("%s: hidden %u, %u experts (of %u), top-%u, expert dim %u, shared expert %u\n",
           c->name, d, c->n_experts, cfg.n_experts, c->top_k, I, c->shared_expert_intermediate);

    /* one plan per input size: hidden (gate/up) and expert dim (down) */
    tsafe_lora_plan ph, pa;
    CHECK(tsafe_lora_plan_auto(d, RANK, 4.0, 0.05, 1e-6, &ph));
    CHECK(tsafe_lora_plan_auto(I, RANK, 4.0, 0.05, 1e-6, &pa));
    tsafe_lora_local *lh = NULL, *la = NULL;
    CHECK(tsafe_lora_local_create(&ph, NULL, &lh));
    CHECK(tsafe_lora_local_create(&pa, NULL, &la));

    tsafe_moe_lora *lora = NULL;
    CHECK(tsafe_moe_lora_create(layer, &lora));
    static tsafe_lora_site *sites[EXPERTS + 1][3];
    unsigned seed = 3;
    float *A = malloc((size_t)RANK * d * sizeof *A), *B = malloc((size_t)d * RANK * sizeof *B);
    if (!A || !B)
        return 1;
    for (int e = 0; e <= EXPERTS; e++)
        for (int p = 0; p < 3; p++) {
            uint32_t in = p == 2 ? I : d, out = p == 2 ? d : I;
            for (size_t i = 0; i < (size_t)RANK * in; i++) A[i] = 0.04f * frand(&seed);
            for (size_t i = 0; i < (size_t)out * RANK; i++) B[i] = 0.02f * frand(&seed);
            CHECK(tsafe_lora_site_create(tsafe_lora_local_context(p == 2 ? la : lh),
                                         p == 2 ? &pa : &ph, A, B, out, 2.0f, &sites[e][p]));
            CHECK(tsafe_moe_lora_set_site(lora, e == EXPERTS ? TSAFE_MOE_SHARED : e,
                                          (tsafe_moe_proj)p, sites[e][p]));
        }

    float *h = malloc(d * sizeof *h), *he = malloc(d * sizeof *he), *plain = malloc(d * sizeof *plain);
    float *base = malloc(d * sizeof *base);
    if (!h || !he || !plain || !base)
        return 1;
    for (uint32_t i = 0; i < d; i++) h[i] = frand(&seed);

    tsafe_lora_engine eh = tsafe_lora_engine_local(lh), ea = tsafe_lora_engine_local(la);
    tsafe_lora_engine pe = tsafe_lora_engine_plain();
    tsafe_moe_route route;
    tsafe_moe_lora_stats st = {0};
    CHECK(tsafe_moe_layer_forward(layer, h, 1, base, NULL));
    CHECK(tsafe_moe_lora_forward(layer, lora, &eh, &ea, h, 1, he, &route, &st));
    CHECK(tsafe_moe_lora_forward(layer, lora, &pe, &pe, h, 1, plain, NULL, NULL));

    double num = 0, den = 0;
    for (uint32_t i = 0; i < d; i++) {
        num += (double)(he[i] - plain[i]) * (he[i] - plain[i]);
        den += (double)(plain[i] - base[i]) * (plain[i] - base[i]);
    }
    printf("routed experts:");
    for (uint32_t i = 0; i < route.k; i++)
        printf(" %u (w=%.3f)", route.expert[i], route.weight[i]);
    printf(", shared gate %.3f\n", route.shared_gate);
    printf("expert LoRA under HE: %llu encryption(s) of h, %llu of activations, %.2f ms\n",
           (unsigned long long)st.engine_calls_h, (unsigned long long)st.engine_calls_act,
           st.lora_us / 1000);
    printf("LoRA contribution vs plaintext: relative L2 error %.3g\n", sqrt(num / den));

    for (int e = 0; e <= EXPERTS; e++)
        for (int p = 0; p < 3; p++)
            tsafe_lora_site_free(sites[e][p]);
    tsafe_moe_lora_free(lora);
    tsafe_lora_local_free(lh);
    tsafe_lora_local_free(la);
    tsafe_moe_layer_free(layer);
    free(A); free(B); free(h); free(he); free(plain); free(base);
    return sqrt(num / den) <= 1e-5 ? 0 : 1;
}
