/* Registry: semantics of put/acquire/release/remove, metering JSON, and a
 * hot-swap stress test (4 reader threads, 1 swapper) meant to run under
 * ThreadSanitizer (make TSAN=1 build/tsan/tests/test_registry) and ASan. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/lora_registry.h"
#include "clock.h"

#define LIVE 0x4c49564521ULL
#define DEAD 0xdeaddeadULL
#define NVALS 64
#define N_ADAPTERS 5

static uint64_t g_seed;

/* A stand-in for a loaded adapter: values derived from (seed, id). */
typedef struct obj {
    uint64_t magic;
    uint64_t id;
    double vals[NVALS];
} obj;

static double val_of(uint64_t id, size_t i)
{
    uint64_t z = g_seed ^ (id * 0x9e3779b97f4a7c15ULL) ^ (i * 0xbf58476d1ce4e5b9ULL);
    z = (z ^ (z >> 31)) * 0x94d049bb133111ebULL;
    return (double)(z >> 11) * 0x1p-53 - 0.5;
}

/* The "delta" of the adapter: a weighted sum, recomputable from its id. */
static double delta_ref(uint64_t id)
{
    double s = 0.0;
    for (size_t i = 0; i < NVALS; i++)
        s += val_of(id, i) * (double)(i + 1);
    return s;
}

static double delta_of(const obj *o)
{
    double s = 0.0;
    for (size_t i = 0; i < NVALS; i++)
        s += o->vals[i] * (double)(i + 1);
    return s;
}

static atomic_int *g_destroyed; /* per id */
static atomic_long g_destroy_total;
static atomic_long g_bad_destroy;

static obj *obj_new(uint64_t id)
{
    obj *o = malloc(sizeof *o);
    o->magic = LIVE;
    o->id = id;
    for (size_t i = 0; i < NVALS; i++)
        o->vals[i] = val_of(id, i);
    return o;
}

static void obj_destroy(void *p)
{
    obj *o = p;
    if (o->magic != LIVE)
        atomic_fetch_add(&g_bad_destroy, 1);
    atomic_fetch_add(&g_destroyed[o->id], 1);
    atomic_fetch_add(&g_destroy_total, 1);
    o->magic = DEAD;
    memset(o->vals, 0xff, sizeof o->vals);
    free(o);
}

static const char *adapter_name(uint64_t id)
{
    static const char *const names[N_ADAPTERS] = {"legal-v1", "med-v2", "code-v7",
                                                  "fin-v1", "chat-v3"};
    return names[id % N_ADAPTERS];
}

static double adapter_price(uint64_t id)
{
    return 0.05 * (double)(id % N_ADAPTERS + 1);
}

/* ------------------------------------------------------------ semantics */

static void reset_counts(size_t n)
{
    free(g_destroyed);
    g_destroyed = calloc(n, sizeof *g_destroyed);
    assert_non_null(g_destroyed);
    atomic_store(&g_destroy_total, 0);
    atomic_store(&g_bad_destroy, 0);
}

static void test_basic_semantics(void **state)
{
    (void)state;
    reset_counts(16);
    tsafe_registry *reg = NULL;
    assert_int_equal(tsafe_registry_create(&reg), TSAFE_OK);
    /* opaque test objects, no provenance: allowed explicitly */
    assert_int_equal(tsafe_registry_set_allow_unsigned(reg, 1), TSAFE_OK);
    tsafe_registry_ref *r = (tsafe_registry_ref *)1;
    assert_int_equal(tsafe_registry_acquire(reg, "q", &r), TSAFE_E_NOT_FOUND);
    assert_null(r);

    tsafe_registry_meta meta = {adapter_name(1), adapter_price(1), NULL};
    assert_int_equal(tsafe_registry_put(reg, "q", obj_new(1), obj_destroy, &meta),
                     TSAFE_OK);
    tsafe_registry_ref *r1 = NULL;
    assert_int_equal(tsafe_registry_acquire(reg, "q", &r1), TSAFE_OK);
    assert_int_equal(((obj *)tsafe_registry_ref_object(r1))->id, 1);
    assert_string_equal(tsafe_registry_ref_adapter_id(r1), adapter_name(1));
    assert_true(tsafe_registry_ref_price(r1) == adapter_price(1));
    assert_int_equal(tsafe_registry_ref_generation(r1), 1);

    /* replace while r1 is in flight: 1 survives until released */
    tsafe_registry_meta meta2 = {adapter_name(2), adapter_price(2), NULL};
    assert_int_equal(tsafe_registry_put(reg, "q", obj_new(2), obj_destroy, &meta2),
                     TSAFE_OK);
    assert_int_equal(atomic_load(&g_destroyed[1]), 0);
    assert_int_equal(((obj *)tsafe_registry_ref_object(r1))->magic, LIVE);
    tsafe_registry_ref *r2 = NULL;
    assert_int_equal(tsafe_registry_acquire(reg, "q", &r2), TSAFE_OK);
    assert_int_equal(((obj *)tsafe_registry_ref_object(r2))->id, 2);
    assert_int_equal(tsafe_registry_ref_generation(r2), 2);
    assert_int_equal(tsafe_registry_meter(r1, 1500, 3, 10, 20), TSAFE_OK);
    assert_int_equal(tsafe_registry_meter(r2, 500, 1, 1, 2), TSAFE_OK);
    tsafe_registry_release(r1);
    assert_int_equal(atomic_load(&g_destroyed[1]), 1);

    /* remove: r2 keeps 2 alive; the slot is empty */
    assert_int_equal(tsafe_registry_remove(reg, "q"), TSAFE_OK);
    assert_int_equal(tsafe_registry_remove(reg, "q"), TSAFE_E_NOT_FOUND);
    assert_int_equal(tsafe_registry_acquire(reg, "q", &r), TSAFE_E_NOT_FOUND);
    assert_int_equal(atomic_load(&g_destroyed[2]), 0);

    tsafe_registry_counters c;
    assert_int_equal(tsafe_registry_slot_counters(reg, "q", &c), TSAFE_OK);
    assert_int_equal(c.tokens, 2000);
    assert_int_equal(c.he_ops, 4);
    assert_int_equal(c.bytes_in, 11);
    assert_int_equal(c.bytes_out, 22);
    assert_int_equal(tsafe_registry_adapter_counters(reg, adapter_name(1), &c),
                     TSAFE_OK);
    assert_int_equal(c.tokens, 1500);
    assert_int_equal(tsafe_registry_adapter_counters(reg, "nope", &c),
                     TSAFE_E_NOT_FOUND);
    assert_int_equal(tsafe_registry_slot_counters(reg, "nope", &c),
                     TSAFE_E_NOT_FOUND);

    /* the JSON export, cost = tokens / 1000 * price */
    assert_int_equal(tsafe_registry_put(reg, "k", obj_new(3), obj_destroy, &meta),
                     TSAFE_OK);
    char *js = NULL;
    assert_int_equal(tsafe_registry_metering_json(reg, &js), TSAFE_OK);
    json_error_t err;
    json_t *root = json_loads(js, 0, &err);
    assert_non_null(root);
    json_t *ads = json_object_get(root, "adapters");
    assert_int_equal(json_array_size(ads), 2);
    double cost_sum = 0.0;
    for (size_t i = 0; i < 2; i++) {
        json_t *a = json_array_get(ads, i);
        const char *id = json_string_value(json_object_get(a, "adapter_id"));
        double price = json_real_value(json_object_get(a, "price_per_1k_tokens"));
        json_int_t tok = json_integer_value(json_object_get(a, "tokens"));
        json_int_t want = strcmp(id, adapter_name(1)) == 0 ? 1500 : 500;
        double want_price = strcmp(id, adapter_name(1)) == 0 ? adapter_price(1)
                                                             : adapter_price(2);
        assert_int_equal(tok, want);
        assert_true(price == want_price);
        double cost = json_real_value(json_object_get(a, "cost"));
        assert_true(fabs(cost - (double)want / 1000.0 * want_price) < 1e-12);
        cost_sum += cost;
    }
    json_t *slots = json_object_get(root, "slots");
    assert_int_equal(json_array_size(slots), 2);
    json_t *s0 = json_array_get(slots, 0);
    assert_string_equal(json_string_value(json_object_get(s0, "slot")), "q");
    assert_true(json_is_null(json_object_get(s0, "adapter_id")));
    json_t *tot = json_object_get(root, "totals");
    assert_int_equal(json_integer_value(json_object_get(tot, "tokens")), 2000);
    assert_true(fabs(json_real_value(json_object_get(tot, "cost")) - cost_sum) < 1e-12);
    json_decref(root);
    free(js);

    /* a ref may outlive the registry */
    tsafe_registry_free(reg);
    assert_int_equal(atomic_load(&g_destroyed[3]), 1);
    assert_int_equal(atomic_load(&g_destroyed[2]), 0);
    assert_int_equal(tsafe_registry_meter(r2, 1, 1, 1, 1), TSAFE_OK);
    tsafe_registry_release(r2);
    assert_int_equal(atomic_load(&g_destroyed[2]), 1);
    assert_int_equal(atomic_load(&g_bad_destroy), 0);
    tsafe_registry_release(NULL);
    tsafe_registry_free(NULL);
}

static void test_bad_args(void **state)
{
    (void)state;
    tsafe_registry *reg = NULL;
    assert_int_equal(tsafe_registry_create(&reg), TSAFE_OK);
    /* opaque test objects, no provenance: allowed explicitly */
    assert_int_equal(tsafe_registry_set_allow_unsigned(reg, 1), TSAFE_OK);
    int dummy = 0;
    tsafe_registry_meta meta = {"a", 1.0, NULL};
    assert_int_equal(tsafe_registry_put(reg, "", &dummy, NULL, &meta), TSAFE_E_ARG);
    assert_int_equal(tsafe_registry_put(reg, "\xc0\xaf", &dummy, NULL, &meta),
                     TSAFE_E_ARG); /* overlong UTF-8 */
    meta.price_per_1k_tokens = -1.0;
    assert_int_equal(tsafe_registry_put(reg, "s", &dummy, NULL, &meta), TSAFE_E_ARG);
    meta.price_per_1k_tokens = NAN;
    assert_int_equal(tsafe_registry_put(reg, "s", &dummy, NULL, &meta), TSAFE_E_ARG);
    meta.price_per_1k_tokens = 1.0;
    meta.adapter_id = NULL;
    assert_int_equal(tsafe_registry_put(reg, "s", &dummy, NULL, &meta), TSAFE_E_ARG);
    assert_int_equal(tsafe_registry_put(reg, "s", &dummy, NULL, NULL), TSAFE_E_NULL);
    assert_int_equal(tsafe_registry_meter(NULL, 1, 1, 1, 1), TSAFE_E_NULL);
    char *js = NULL;
    assert_int_equal(tsafe_registry_metering_json(reg, &js), TSAFE_OK);
    assert_string_equal(js, "{\"adapters\":[],\"slots\":[],\"totals\":{\"tokens\":0,"
                            "\"he_ops\":0,\"bytes_in\":0,\"bytes_out\":0,\"cost\":0.0}}");
    free(js);
    tsafe_registry_free(reg);
}

/* --------------------------------------------------------------- stress */

#define N_READERS 4
#define N_SWAPS 20000
static const char *const stress_slots[2] = {"layer0.q_proj", "layer0.v_proj"};

typedef struct reader {
    tsafe_registry *reg;
    atomic_int *stop;
    long iterations;
    long failures;
    long not_found;
    uint64_t tokens[N_ADAPTERS], he_ops[N_ADAPTERS], bytes_in[N_ADAPTERS],
        bytes_out[N_ADAPTERS];
    uint64_t slot_tokens[2];
    unsigned seed;
} reader;

static void *reader_main(void *arg)
{
    reader *rd = arg;
    uint64_t last_gen[2] = {0, 0};
    while (!atomic_load_explicit(rd->stop, memory_order_acquire)) {
        int si = (int)(rd->iterations & 1);
        tsafe_registry_ref *ref = NULL;
        tsafe_status st = tsafe_registry_acquire(rd->reg, stress_slots[si], &ref);
        rd->iterations++;
        if (st == TSAFE_E_NOT_FOUND) {
            rd->not_found++;
            continue;
        }
        if (st != TSAFE_OK) {
            rd->failures++;
            continue;
        }
        const obj *o = tsafe_registry_ref_object(ref);
        uint64_t gen = tsafe_registry_ref_generation(ref);
        if (gen < last_gen[si]) /* acquires see puts in order */
            rd->failures++;
        last_gen[si] = gen;
        if (o->magic != LIVE)
            rd->failures++;
        double d1 = delta_of(o);
        sched_yield(); /* give the swapper a chance to replace it */
        double d2 = delta_of(o);
        if (d1 != d2 || d1 != delta_ref(o->id) || o->magic != LIVE)
            rd->failures++;
        if (strcmp(tsafe_registry_ref_adapter_id(ref), adapter_name(o->id)) != 0 ||
            tsafe_registry_ref_price(ref) != adapter_price(o->id))
            rd->failures++;
        uint64_t tok = 1 + o->id % 3, ops = 8 + (uint64_t)si;
        uint64_t bin = 4096 + o->id % 17, bout = 256;
        if (tsafe_registry_meter(ref, tok, ops, bin, bout) != TSAFE_OK)
            rd->failures++;
        size_t a = (size_t)(o->id % N_ADAPTERS);
        rd->tokens[a] += tok;
        rd->he_ops[a] += ops;
        rd->bytes_in[a] += bin;
        rd->bytes_out[a] += bout;
        rd->slot_tokens[si] += tok;
        tsafe_registry_release(ref);
    }
    return NULL;
}

typedef struct swapper {
    tsafe_registry *reg;
    long failures;
    uint64_t next_id;
} swapper;

static void *swapper_main(void *arg)
{
    swapper *sw = arg;
    for (int i = 0; i < N_SWAPS; i++) {
        uint64_t id = sw->next_id++;
        tsafe_registry_meta meta = {adapter_name(id), adapter_price(id), NULL};
        const char *slot = stress_slots[i & 1];
        if (tsafe_registry_put(sw->reg, slot, obj_new(id), obj_destroy, &meta) !=
            TSAFE_OK)
            sw->failures++;
        if (i % 997 == 0 && tsafe_registry_remove(sw->reg, slot) != TSAFE_OK)
            sw->failures++; /* readers see NOT_FOUND for a moment */
        sched_yield();
    }
    return NULL;
}

static void test_hot_swap_stress(void **state)
{
    (void)state;
    reset_counts(N_SWAPS + 8);
    tsafe_registry *reg = NULL;
    assert_int_equal(tsafe_registry_create(&reg), TSAFE_OK);
    /* opaque test objects, no provenance: allowed explicitly */
    assert_int_equal(tsafe_registry_set_allow_unsigned(reg, 1), TSAFE_OK);
    swapper sw = {reg, 0, 1};
    for (int s = 0; s < 2; s++) { /* both slots populated before readers start */
        uint64_t id = sw.next_id++;
        tsafe_registry_meta meta = {adapter_name(id), adapter_price(id), NULL};
        assert_int_equal(tsafe_registry_put(reg, stress_slots[s], obj_new(id),
                                            obj_destroy, &meta), TSAFE_OK);
    }
    atomic_int stop;
    atomic_init(&stop, 0);
    reader rd[N_READERS];
    pthread_t th[N_READERS], tsw;
    memset(rd, 0, sizeof rd);
    double t0 = tsafe_now_s();
    for (int i = 0; i < N_READERS; i++) {
        rd[i].reg = reg;
        rd[i].stop = &stop;
        assert_int_equal(pthread_create(&th[i], NULL, reader_main, &rd[i]), 0);
    }
    assert_int_equal(pthread_create(&tsw, NULL, swapper_main, &sw), 0);
    pthread_join(tsw, NULL);
    atomic_store_explicit(&stop, 1, memory_order_release);
    long iters = 0, fails = 0, nf = 0;
    uint64_t tok[N_ADAPTERS] = {0}, ops[N_ADAPTERS] = {0}, bin[N_ADAPTERS] = {0},
             bout[N_ADAPTERS] = {0}, stok[2] = {0, 0};
    for (int i = 0; i < N_READERS; i++) {
        pthread_join(th[i], NULL);
        iters += rd[i].iterations;
        fails += rd[i].failures;
        nf += rd[i].not_found;
        for (int a = 0; a < N_ADAPTERS; a++) {
            tok[a] += rd[i].tokens[a];
            ops[a] += rd[i].he_ops[a];
            bin[a] += rd[i].bytes_in[a];
            bout[a] += rd[i].bytes_out[a];
        }
        stok[0] += rd[i].slot_tokens[0];
        stok[1] += rd[i].slot_tokens[1];
    }
    double secs = tsafe_now_s() - t0;
    print_message("stress: %d swaps, %d readers, %ld acquires (%ld empty-slot), "
                  "%.2f s\n", N_SWAPS, N_READERS, iters, nf, secs);
    assert_int_equal(fails, 0);
    assert_int_equal(sw.failures, 0);

    /* metering totals equal what the threads recorded */
    double cost_ref = 0.0;
    for (int a = 0; a < N_ADAPTERS; a++) {
        tsafe_registry_counters c;
        tsafe_status st = tsafe_registry_adapter_counters(reg, adapter_name((uint64_t)a), &c);
        assert_int_equal(st, TSAFE_OK);
        assert_int_equal(c.tokens, tok[a]);
        assert_int_equal(c.he_ops, ops[a]);
        assert_int_equal(c.bytes_in, bin[a]);
        assert_int_equal(c.bytes_out, bout[a]);
        cost_ref += (double)tok[a] / 1000.0 * adapter_price((uint64_t)a);
    }
    for (int s = 0; s < 2; s++) {
        tsafe_registry_counters c;
        assert_int_equal(tsafe_registry_slot_counters(reg, stress_slots[s], &c), TSAFE_OK);
        assert_int_equal(c.tokens, stok[s]);
    }
    char *js = NULL;
    assert_int_equal(tsafe_registry_metering_json(reg, &js), TSAFE_OK);
    json_error_t err;
    json_t *root = json_loads(js, 0, &err);
    assert_non_null(root);
    json_t *tot = json_object_get(root, "totals");
    uint64_t all = 0;
    for (int a = 0; a < N_ADAPTERS; a++)
        all += tok[a];
    assert_int_equal(json_integer_value(json_object_get(tot, "tokens")), (json_int_t)all);
    assert_true(fabs(json_real_value(json_object_get(tot, "cost")) - cost_ref) <=
                1e-9 * cost_ref);
    json_decref(root);
    free(js);

    /* every object destroyed exactly once, after the registry goes */
    uint64_t created = sw.next_id - 1;
    assert_int_equal(atomic_load(&g_destroy_total), (long)created - 2);
    tsafe_registry_free(reg);
    assert_int_equal(atomic_load(&g_destroy_total), (long)created);
    for (uint64_t id = 1; id <= created; id++)
        assert_int_equal(atomic_load(&g_destroyed[id]), 1);
    assert_int_equal(atomic_load(&g_bad_destroy), 0);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    randombytes_buf(&g_seed, sizeof g_seed);
    const char *env = getenv("TSAFE_TEST_SEED");
    if (env)
        g_seed = strtoull(env, NULL, 0);
    printf("test_registry seed: 0x%016llx (set TSAFE_TEST_SEED to replay)\n",
           (unsigned long long)g_seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_semantics),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_hot_swap_stress),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(g_destroyed);
    return rc;
}
