/* Sealed-private HE-LoRA on one q_proj-like site: the client derives the
 * parameters, encrypts x; the server (adapter only, public keys only)
 * answers with masked, re-randomised products; the client re-encrypts its
 * share; the server returns delta sealed. The client learns only delta, the
 * server nothing about x. Every message is a byte buffer.
 * Build: cc -o lora_sealed lora_sealed.c $(pkg-config --cflags --libs tensafe-lora) -lm */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <tensafe/lora_sealed.h>

#define D 2048
#define R 16
#define DOUT 512 /* a GQA k_proj: d_out != d_in */
#define CHECK(call)                                                            \
    do {                                                                       \
        tsafe_status st_ = (call);                                             \
        if (st_ != TSAFE_OK) {                                                 \
            fprintf(stderr, "%s: %s\n", #call, tsafe_strerror(st_));           \
            return 1;                                                          \
        }                                                                      \
    } while (0)

static float frand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

int main(void)
{
    static float A[R * D], B[DOUT * R], x[D], delta[DOUT];
    unsigned seed = 7;
    for (int i = 0; i < R * D; i++)
        A[i] = 0.02f * frand(&seed);
    for (int i = 0; i < DOUT * R; i++)
        B[i] = 0.02f * frand(&seed);
    for (int i = 0; i < D; i++)
        x[i] = 2.0f * frand(&seed);

    /* both sides derive the same plan from public shapes; the client
     * refuses any other (tsafe_sealed_plan_check) */
    tsafe_sealed_plan plan;
    CHECK(tsafe_sealed_plan_derive(TSAFE_SEALED_PRIVATE, D, R, DOUT, NULL, &plan));
    tsafe_sealed_client *client;
    tsafe_sealed_server *server;
    tsafe_sealed_site *site;
    CHECK(tsafe_sealed_client_create(&plan, NULL, &client));
    CHECK(tsafe_sealed_server_create(&plan, &server));
    CHECK(tsafe_sealed_site_create(&plan, A, B, R, DOUT, 2.0f, &site));

    uint8_t *m[5];
    size_t n[5];
    uint32_t rank = R, d_out = DOUT;
    float *out[1] = {delta};
    const tsafe_sealed_site *sites[1] = {site};
    CHECK(tsafe_sealed_client_hello(client, &m[0], &n[0]));
    CHECK(tsafe_sealed_server_accept(server, m[0], n[0]));
    CHECK(tsafe_sealed_client_query(client, x, &m[1], &n[1], NULL));
    CHECK(tsafe_sealed_server_round1(server, sites, 1, m[1], n[1], &m[2], &n[2], NULL));
    CHECK(tsafe_sealed_client_respond(client, m[2], n[2], 1, &rank, &d_out, NULL, 0, &m[3],
                                      &n[3], NULL));
    CHECK(tsafe_sealed_server_round2(server, sites, 1, m[3], n[3], &m[4], &n[4], NULL));
    CHECK(tsafe_sealed_client_finish(client, m[4], n[4], 1, &d_out, out, NULL));

    /* the same delta in double precision */
    double num = 0, den = 0, u[R];
    for (int i = 0; i < R; i++) {
        u[i] = 0;
        for (int j = 0; j < D; j++)
            u[i] += (double)A[i * D + j] * x[j];
    }
    for (int o = 0; o < DOUT; o++) {
        double want = 0;
        for (int i = 0; i < R; i++)
            want += 2.0 * B[o * R + i] * u[i];
        num += (delta[o] - want) * (delta[o] - want);
        den += want * want;
    }
    const char *names[5] = {"hello", "query", "response 1", "share", "response 2"};
    for (int i = 0; i < 5; i++)
        printf("%-11s %8zu bytes\n", names[i], n[i]);
    printf("delta[0..3] = %.5f %.5f %.5f %.5f; relative L2 error %.2e (planner model %.1e)\n",
           delta[0], delta[1], delta[2], delta[3], sqrt(num / den), plan.expected_rel_error);
    for (int i = 0; i < 5; i++)
        tsafe_lora_bytes_free(m[i]);
    tsafe_sealed_site_free(site);
    tsafe_sealed_server_free(server);
    tsafe_sealed_client_free(client);
    return sqrt(num / den) <= 1e-3 ? 0 : 1;
}
