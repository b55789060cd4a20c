/* Hot-swap stress with real adapters: 4 threads compute LoRA deltas from
 * whatever adapter a registry slot holds while another thread swaps the slot
 * thousands of times. Every delta must equal the one for the adapter the
 * token started with (reference counts keep it alive); metering totals must
 * add up. Run under ThreadSanitizer by .ci/run (name contains "registry"). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "tensafe/lora_he.h"
#include "tensafe/lora_registry.h"
#include "support/tsafe_test_rng.h"

#define VERSIONS 6
#define WORKERS 4
#define SWAPS 3000
#define D 96
#define R 4

typedef struct {
    tsafe_lora_site *site;
    float expected[D]; /* delta of this version for the shared input */
    int version;
} entry;

typedef struct {
    tsafe_registry *reg;
    entry *versions;
    const float *x;
    volatile int stop;
    uint64_t tokens, mismatches;
    int id;
} shared;

static int g_destroyed[VERSIONS * (SWAPS + 2)];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

/* A registry object: one swap's reference to a version (so each put has its
 * own destroy, counted exactly once). */
typedef struct {
    entry *e;
    int serial;
} handle;

static void destroy_handle(void *p)
{
    handle *h = p;
    pthread_mutex_lock(&g_lock);
    g_destroyed[h->serial]++;
    pthread_mutex_unlock(&g_lock);
    free(h);
}

static void *worker(void *arg)
{
    shared *s = arg;
    float delta[D];
    uint64_t n = 0, bad = 0;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE) || n < 50) {
        tsafe_registry_ref *ref = NULL;
        if (tsafe_registry_acquire(s->reg, "q_proj", &ref) != TSAFE_OK)
            continue;
        handle *h = tsafe_registry_ref_object(ref);
        if (tsafe_lora_site_plain_delta(h->e->site, s->x, delta) != TSAFE_OK)
            bad++;
        for (int i = 0; i < D; i++)
            if (fabsf(delta[i] - h->e->expected[i]) > 1e-6f * (1.0f + fabsf(h->e->expected[i])))
                bad++;
        if (tsafe_registry_meter(ref, 1, 1, 4 * D, 4 * D) != TSAFE_OK)
            bad++;
        tsafe_registry_release(ref);
        n++;
    }
    s->tokens = n;
    s->mismatches = bad;
    return NULL;
}

static void test_hotswap_real_adapters(void **state)
{
    (void)state;
    openblas_set_num_threads(1); /* OpenBLAS workers are invisible to TSan */
    tsafe_lora_plan plan;
    assert_int_equal(tsafe_lora_plan_auto(D, R, 1.0, 0.1, 1e-6, &plan), TSAFE_OK);
    tsafe_lora_local *l = NULL;
    assert_int_equal(tsafe_lora_local_create(&plan, NULL, &l), TSAFE_OK);
    float x[D], A[R * D], B[D * R];
    for (int i = 0; i < D; i++) x[i] = tsafe_test_uniform_float(-1, 1);
    entry versions[VERSIONS];
    for (int v = 0; v < VERSIONS; v++) {
        for (int i = 0; i < R * D; i++) A[i] = tsafe_test_uniform_float(-0.1, 0.1);
        for (int i = 0; i < D * R; i++) B[i] = tsafe_test_uniform_float(-0.1, 0.1);
        versions[v].version = v;
        assert_int_equal(tsafe_lora_site_create(tsafe_lora_local_context(l), &plan, A, B, D,
                                                1.5f, &versions[v].site), TSAFE_OK);
        /* expected delta from an independent double loop */
        for (int o = 0; o < D; o++) {
            double acc = 0;
            for (int k = 0; k < R; k++) {
                double u = 0;
                for (int j = 0; j < D; j++) u += (double)A[k * D + j] * x[j];
                acc += (double)B[o * R + k] * u;
            }
            versions[v].expected[o] = (float)(1.5 * acc);
        }
    }
    tsafe_registry *reg = NULL;
    assert_int_equal(tsafe_registry_create(&reg), TSAFE_OK);
    /* opaque test objects, no provenance: allowed explicitly */
    assert_int_equal(tsafe_registry_set_allow_unsigned(reg, 1), TSAFE_OK);
    int serial = 0;
    handle *h0 = malloc(sizeof *h0);
    *h0 = (handle){&versions[0], serial++};
    tsafe_registry_meta meta = {"adapter-v0", 0.5, NULL};
    assert_int_equal(tsafe_registry_put(reg, "q_proj", h0, destroy_handle, &meta), TSAFE_OK);

    shared s[WORKERS];
    pthread_t th[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        s[w] = (shared){reg, versions, x, 0, 0, 0, w};
        assert_int_equal(pthread_create(&th[w], NULL, worker, &s[w]), 0);
    }
    char id[32];
    for (int k = 1; k <= SWAPS; k++) { /* the swapper */
        handle *h = malloc(sizeof *h);
        *h = (handle){&versions[k % VERSIONS], serial++};
        snprintf(id, sizeof id, "adapter-v%d", k % VERSIONS);
        tsafe_registry_meta m = {id, 0.5, NULL};
        assert_int_equal(tsafe_registry_put(reg, "q_proj", h, destroy_handle, &m), TSAFE_OK);
    }
    for (int w = 0; w < WORKERS; w++)
        __atomic_store_n(&s[w].stop, 1, __ATOMIC_RELEASE);
    uint64_t tokens = 0;
    for (int w = 0; w < WORKERS; w++) {
        pthread_join(th[w], NULL);
        assert_int_equal(s[w].mismatches, 0);
        tokens += s[w].tokens;
    }
    tsafe_registry_counters c;
    assert_int_equal(tsafe_registry_slot_counters(reg, "q_proj", &c), TSAFE_OK);
    assert_int_equal(c.tokens, tokens);
    assert_int_equal(c.bytes_in, tokens * 4 * D);
    tsafe_registry_free(reg);
    /* every swapped-in object was destroyed exactly once */
    for (int i = 0; i < serial; i++)
        assert_int_equal(g_destroyed[i], 1);
    print_message("%d swaps, %llu deltas checked across %d threads\n", SWAPS,
                  (unsigned long long)tokens, WORKERS);
    for (int v = 0; v < VERSIONS; v++)
        tsafe_lora_site_free(versions[v].site);
    tsafe_lora_local_free(l);
}

int main(void)
{
    tsafe_test_rng_init("registry_hotswap");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hotswap_real_adapters),
    };
    return cmocka_run_group_tests_name("registry_hotswap", tests, NULL, NULL);
}
