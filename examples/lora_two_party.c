/* Two-party HE-LoRA on one q_proj-like site: the client encrypts x, the
 * server (adapter only, no secret key) multiplies, the client decrypts u and
 * releases it with differential-privacy noise, the server applies B.
 * Build: cc -o lora_two_party lora_two_party.c $(pkg-config --cflags --libs tensafe-lora) -lm */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <tensafe/lora_two_party.h>

#define D 2048
#define R 16
#define CHECK(call)                                                            \
    do {                                                                       \
        tsafe_status st_ = (call);                                             \
        if (st_ != TSAFE_OK) {                                                 \
            fprintf(stderr, "%s: %s\n", #call, tsafe_strerror(st_));           \
            return 1;                                                          \
        }                                                                      \
    } while (0)

static float frand(unsigned *s) { *s = *s * 1103515245u + 12345u; return ((*s >> 8) & 0xffff) / 32768.0f - 1.0f; }

int main(void)
{
    static float A[R * D], B[D * R], x[D], u[R], delta[D], plain[D];
    unsigned seed = 7;
    for (int i = 0; i < R * D; i++) A[i] = 0.05f * frand(&seed);
    for (int i = 0; i < D * R; i++) B[i] = 0.05f * frand(&seed);
    for (int i = 0; i < D; i++) x[i] = frand(&seed);

    /* the plan needs bounds on |x| and |A|: take |A| from the adapter itself */
    double max_a = 0;
    for (int i = 0; i < R * D; i++) max_a = fmax(max_a, fabs(A[i]));
    tsafe_lora_plan plan;
    CHECK(tsafe_lora_plan_auto(D, R, 1.0, max_a, 1e-6, &plan));
    printf("plan %s: N=%u, %u rows per product, %u products, modelled error %.2g\n", plan.name,
           1u << plan.params.log_n, plan.cols, plan.n_batches, plan.expected_error);

    tsafe_lora_client *client = NULL;
    tsafe_lora_server *server = NULL;
    tsafe_lora_site *site = NULL;
    CHECK(tsafe_lora_client_create(&plan, NULL, &client));
    CHECK(tsafe_lora_server_create(&plan, &server));
    CHECK(tsafe_lora_site_create(tsafe_lora_server_context(server), &plan, A, B, D, 2.0f, &site));

    /* clip u to L2 norm 1 (|u| is about 0.4 here), eps = 8 per token */
    tsafe_dp_params dpp = {.clip_norm = 1.0, .eps = 8.0, .delta = 1e-6,
                           .eps_total = 100.0, .delta_total = 1e-5};
    tsafe_dp_session *dp = NULL;
    CHECK(tsafe_dp_session_create(&dpp, &dp));

    const tsafe_lora_site *sites[1] = {site};
    uint32_t ranks[1] = {R};
    float *us[1] = {u}, *ds[1] = {delta};
    uint8_t *req, *resp, *umsg;
    size_t req_n, resp_n, umsg_n;
    tsafe_lora_stats stats = {0};
    CHECK(tsafe_lora_client_encrypt(client, x, &req, &req_n, &stats));
    CHECK(tsafe_lora_server_process(server, sites, 1, req, req_n, &resp, &resp_n, &stats));
    CHECK(tsafe_lora_client_decode(client, resp, resp_n, 1, ranks, us, &stats));
    CHECK(tsafe_lora_site_plain_delta(site, x, plain));

    /* 1) without DP: the HE path alone, u revealed to the server as is */
    float u_exact[R], *ue[1] = {u_exact};
    for (int i = 0; i < R; i++) u_exact[i] = u[i];
    CHECK(tsafe_lora_client_release(client, 1, ranks, ue, NULL, &umsg, &umsg_n, &stats));
    CHECK(tsafe_lora_server_apply(server, sites, 1, umsg, umsg_n, ds, &stats));
    tsafe_lora_bytes_free(umsg);
    double num = 0, den = 0;
    for (int i = 0; i < D; i++) {
        num += (delta[i] - plain[i]) * (delta[i] - plain[i]);
        den += plain[i] * plain[i];
    }
    printf("HE delta vs plaintext (no DP): relative L2 %.3g\n", sqrt(num / den));

    /* 2) with DP: what the server sees is clip(u) + N(0, sigma^2) */
    CHECK(tsafe_lora_client_release(client, 1, ranks, us, dp, &umsg, &umsg_n, &stats));
    CHECK(tsafe_lora_server_apply(server, sites, 1, umsg, umsg_n, ds, &stats));
    num = 0;
    for (int i = 0; i < D; i++)
        num += (delta[i] - plain[i]) * (delta[i] - plain[i]);
    tsafe_dp_stats ds_;
    CHECK(tsafe_dp_session_stats(dp, &ds_));
    printf("with DP (C=%.1f, sigma=%.3f): u[0] exact %.5f, released %.5f, delta rel L2 %.3g\n",
           ds_.clip_norm, ds_.sigma, u_exact[0], u[0], sqrt(num / den));
    printf("bytes: up %llu, down %llu; privacy spent eps=%.3f of %.1f\n",
           (unsigned long long)stats.bytes_up, (unsigned long long)stats.bytes_down,
           ds_.eps_spent, ds_.eps_total);

    tsafe_lora_bytes_free(req);
    tsafe_lora_bytes_free(resp);
    tsafe_lora_bytes_free(umsg);
    tsafe_dp_session_free(dp);
    tsafe_lora_site_free(site);
    tsafe_lora_server_free(server);
    tsafe_lora_client_free(client);
    return 0;
}
