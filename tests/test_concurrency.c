/* Shared immutable objects under concurrency (run under ThreadSanitizer by
 * .ci/run): one context, secret key and prepared plaintext used by several
 * threads at once, each with its own ciphertexts; results checked. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/ckks.h"
#include "tensafe/lora_sealed.h"
#include "support/tsafe_test_lora.h"
#include "support/tsafe_test_rng.h"

#define THREADS 4
#define ROUNDS 12

typedef struct {
    const tsafe_context *ctx;
    const tsafe_secret_key *sk;
    const tsafe_public_key *pk;
    const tsafe_plaintext *w;   /* shared, prepared for multiplication */
    const double *x, *wv;       /* inputs and the plaintext's values */
    size_t slots;
    int id;
    double worst;
    int failures;
} job;

static void *worker(void *arg)
{
    job *j = arg;
    tsafe_ciphertext *ct = NULL, *prod = NULL;
    tsafe_plaintext *pt = NULL;
    double *got = malloc(j->slots * sizeof *got);
    if (tsafe_ciphertext_create(j->ctx, &ct) || tsafe_ciphertext_create(j->ctx, &prod) ||
        tsafe_plaintext_create(j->ctx, &pt) || !got) {
        j->failures++;
        goto out;
    }
    for (int r = 0; r < ROUNDS; r++) {
        tsafe_status st = (r + j->id) % 2
            ? tsafe_ckks_encrypt_values_symmetric(j->ctx, j->sk, j->x, NULL, j->slots, 0x1p40, 1,
                                                  NULL, ct)
            : (tsafe_ckks_encode(j->ctx, j->x, j->slots, 0x1p40, 1, pt) ||
               tsafe_ckks_encrypt_public(j->ctx, j->pk, pt, NULL, ct));
        if (st || tsafe_ckks_mul_plain(j->ctx, ct, j->w, prod) ||
            tsafe_ckks_decrypt(j->ctx, j->sk, prod, pt) ||
            tsafe_ckks_decode(j->ctx, pt, got, j->slots)) {
            j->failures++;
            continue;
        }
        for (size_t i = 0; i < j->slots; i++)
            j->worst = fmax(j->worst, fabs(got[i] - j->x[i] * j->wv[i]));
    }
out:
    free(got);
    tsafe_plaintext_free(pt);
    tsafe_ciphertext_free(ct);
    tsafe_ciphertext_free(prod);
    return NULL;
}

static void test_shared_context_threads(void **state)
{
    (void)state;
    tsafe_params p;
    tsafe_context *ctx = NULL;
    assert_int_equal(tsafe_params_preset("ifma-n4096", &p), TSAFE_OK);
    assert_int_equal(tsafe_context_create(&p, &ctx), TSAFE_OK);
    tsafe_secret_key *sk = NULL;
    tsafe_public_key *pk = NULL;
    assert_int_equal(tsafe_secret_key_generate(ctx, NULL, &sk), TSAFE_OK);
    assert_int_equal(tsafe_public_key_generate(ctx, sk, NULL, &pk), TSAFE_OK);
    size_t slots = tsafe_context_slots(ctx);
    double *x = malloc(slots * sizeof *x), *wv = malloc(slots * sizeof *wv);
    for (size_t i = 0; i < slots; i++) {
        x[i] = tsafe_test_uniform(-1, 1);
        wv[i] = tsafe_test_uniform(-1, 1);
    }
    tsafe_plaintext *w = NULL;
    assert_int_equal(tsafe_plaintext_create(ctx, &w), TSAFE_OK);
    assert_int_equal(tsafe_ckks_encode(ctx, wv, slots, 0x1p40, 1, w), TSAFE_OK);
    assert_int_equal(tsafe_plaintext_prepare_mul(ctx, w), TSAFE_OK);
    pthread_t th[THREADS];
    job jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (job){ctx, sk, pk, w, x, wv, slots, t, 0, 0};
        assert_int_equal(pthread_create(&th[t], NULL, worker, &jobs[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(jobs[t].failures, 0);
        assert_true(jobs[t].worst < 1e-5);
    }
    free(x);
    free(wv);
    tsafe_plaintext_free(w);
    tsafe_public_key_free(pk);
    tsafe_secret_key_free(sk);
    tsafe_context_free(ctx);
}

/* Contexts created and freed concurrently (FFTW's planner is serialised). */
static void *make_contexts(void *arg)
{
    int *fails = arg;
    for (int i = 0; i < 3; i++) {
        tsafe_params p;
        tsafe_context *c = NULL;
        if (tsafe_params_preset(i % 2 ? "ifma-n4096" : "ifma-n8192", &p) ||
            tsafe_context_create(&p, &c))
            (*fails)++;
        tsafe_context_free(c);
    }
    return NULL;
}

static void test_concurrent_context_creation(void **state)
{
    (void)state;
    pthread_t th[THREADS];
    int fails[THREADS] = {0};
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, make_contexts, &fails[t]), 0);
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(fails[t], 0);
    }
}

/* Sealed sites are shared read-only by servers on several threads, each
 * thread with its own client and server (one session each). */
typedef struct {
    const tsafe_sealed_plan *plan;
    const tsafe_sealed_site *site;
    const float *x;
    float delta[64];
    int fail;
} sealed_job;

static void *sealed_worker(void *arg)
{
    sealed_job *j = arg;
    tsafe_sealed_client *c = NULL;
    tsafe_sealed_server *s = NULL;
    uint8_t *m[5] = {0};
    size_t l[5];
    uint32_t rank = 4, d_out = 64;
    float *dp = j->delta;
    j->fail = tsafe_sealed_client_create(j->plan, NULL, &c) != TSAFE_OK ||
              tsafe_sealed_server_create(j->plan, &s) != TSAFE_OK ||
              tsafe_sealed_client_hello(c, &m[0], &l[0]) != TSAFE_OK ||
              tsafe_sealed_server_accept(s, m[0], l[0]) != TSAFE_OK;
    for (int tok = 0; tok < 3 && !j->fail; tok++) {
        for (int i = 1; i < 5; i++) {
            tsafe_lora_bytes_free(m[i]);
            m[i] = NULL;
        }
        j->fail = tsafe_sealed_client_query(c, j->x, &m[1], &l[1], NULL) != TSAFE_OK ||
                  tsafe_sealed_server_round1(s, &j->site, 1, m[1], l[1], &m[2], &l[2], NULL) != TSAFE_OK ||
                  tsafe_sealed_client_respond(c, m[2], l[2], 1, &rank, &d_out, NULL, 0, &m[3], &l[3],
                                              NULL) != TSAFE_OK ||
                  tsafe_sealed_server_round2(s, &j->site, 1, m[3], l[3], &m[4], &l[4], NULL) != TSAFE_OK ||
                  tsafe_sealed_client_finish(c, m[4], l[4], 1, &d_out, &dp, NULL) != TSAFE_OK;
    }
    for (int i = 0; i < 5; i++)
        tsafe_lora_bytes_free(m[i]);
    tsafe_sealed_client_free(c);
    tsafe_sealed_server_free(s);
    return NULL;
}

static void test_sealed_shared_site_threads(void **state)
{
    (void)state;
    tsafe_sealed_plan plan;
    assert_int_equal(tsafe_sealed_plan_derive(TSAFE_SEALED_PRIVATE, 128, 4, 64, NULL, &plan),
                     TSAFE_OK);
    float A[4 * 128], B[64 * 4], x[128];
    for (int i = 0; i < 4 * 128; i++)
        A[i] = tsafe_test_uniform_float(-1, 1);
    for (int i = 0; i < 64 * 4; i++)
        B[i] = tsafe_test_uniform_float(-1, 1);
    for (int i = 0; i < 128; i++)
        x[i] = tsafe_test_uniform_float(-1, 1);
    tsafe_sealed_site *site;
    assert_int_equal(tsafe_sealed_site_create(&plan, A, B, 4, 64, 1.0f, &site), TSAFE_OK);
    enum { T = 3 };
    sealed_job jobs[T];
    pthread_t th[T];
    for (int t = 0; t < T; t++) {
        jobs[t] = (sealed_job){&plan, site, x, {0}, 0};
        assert_int_equal(pthread_create(&th[t], NULL, sealed_worker, &jobs[t]), 0);
    }
    for (int t = 0; t < T; t++)
        assert_int_equal(pthread_join(th[t], NULL), 0);
    /* the same x through the same site: every thread's delta within the
     * fixed-point error of the double-precision reference */
    double num = 0, den = 0;
    for (int o = 0; o < 64; o++) {
        double want = 0;
        for (int i = 0; i < 4; i++) {
            double u = 0;
            for (int j = 0; j < 128; j++)
                u += (double)A[i * 128 + j] * x[j];
            want += (double)B[o * 4 + i] * u;
        }
        for (int t = 0; t < T; t++) {
            assert_false(jobs[t].fail);
            num += (jobs[t].delta[o] - want) * (jobs[t].delta[o] - want);
            den += want * want;
        }
    }
    /* (looser where this x barely reaches the rank-4 adapter) */
    assert_true(sqrt(num / den) < tsafe_test_delta_tol(A, B, x, 4, 128, 64, 1.0, 1e-3));
    tsafe_sealed_site_free(site);
}

int main(void)
{
    tsafe_test_rng_init("concurrency");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_context_threads),
        cmocka_unit_test(test_concurrent_context_creation),
        cmocka_unit_test(test_sealed_shared_site_threads),
    };
    return cmocka_run_group_tests_name("concurrency", tests, NULL, NULL);
}
