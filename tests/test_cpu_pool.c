/* The worker pool (tensafe/cpu_pool.h) and the CPU backend that runs on
 * it (tsafe_backend_cpu_factory_pool): every task runs exactly once, with
 * nested and concurrent run() calls; a pooled backend's mul_acc (many
 * independent jobs, operand and plain terms, broadcasts, assign) and NTT
 * give the words of the one-thread backend bit for bit, and a batch whose
 * job reads an earlier job's accumulator keeps its order. In the TSan
 * suites of .ci/run. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/backend_impl.h"
#include "tensafe/bfv.h"
#include "tensafe/cpu_pool.h"
#include "support/tsafe_test_rng.h"

/* ------------------------------------------------------------- pool */

typedef struct {
    tsafe_cpu_pool *pool;
    atomic_int *hits;
    size_t n;
} count_arg;

static void count_task(void *arg, size_t i)
{
    count_arg *c = arg;
    atomic_fetch_add(&c->hits[i], 1);
}

static void nested_task(void *arg, size_t i)
{
    count_arg *c = arg;
    assert_int_equal(tsafe_cpu_pool_available(c->pool), 1u); /* in a task */
    count_arg inner = {c->pool, c->hits + i * c->n, c->n};
    tsafe_cpu_pool_run(c->pool, c->n, count_task, &inner); /* in line */
}

static void check_hits(atomic_int *hits, size_t n, int want)
{
    for (size_t i = 0; i < n; i++)
        assert_int_equal(atomic_load(&hits[i]), want);
}

static void test_pool_runs_every_task_once(void **state)
{
    (void)state;
    const unsigned threads[] = {1, 2, 3, 0};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        tsafe_cpu_pool *p = NULL;
        assert_int_equal(tsafe_cpu_pool_create(threads[t], &p), TSAFE_OK);
        assert_true(tsafe_cpu_pool_threads(p) >= 1);
        if (threads[t])
            assert_int_equal(tsafe_cpu_pool_threads(p), threads[t]);
        assert_int_equal(tsafe_cpu_pool_available(p), tsafe_cpu_pool_threads(p));
        size_t n = 1 + tsafe_test_below(1000);
        /* room for n counters and for the nested run's 8 x 8 */
        size_t cap = n < 8 ? 64 : n * 8;
        atomic_int *hits = calloc(cap, sizeof *hits);
        assert_non_null(hits);
        count_arg c = {p, hits, n};
        for (int rep = 0; rep < 20; rep++)
            tsafe_cpu_pool_run(p, n, count_task, &c);
        check_hits(hits, n, 20);
        memset(hits, 0, cap * sizeof *hits);
        count_arg nest = {p, hits, 8}; /* 8 x 8 tasks through a nested run */
        tsafe_cpu_pool_run(p, 8, nested_task, &nest);
        check_hits(hits, 64, 1);
        free(hits);
        tsafe_cpu_pool_free(p);
    }
    tsafe_cpu_pool_free(NULL);
    assert_int_equal(tsafe_cpu_pool_threads(NULL), 1u);
    assert_int_equal(tsafe_cpu_pool_available(NULL), 1u);
    tsafe_cpu_pool *p = (tsafe_cpu_pool *)1;
    assert_int_equal(tsafe_cpu_pool_create(TSAFE_CPU_POOL_MAX_THREADS + 1, &p), TSAFE_E_RANGE);
    assert_null(p);
    assert_int_equal(tsafe_cpu_pool_create(2, NULL), TSAFE_E_NULL);
}

static void *runner(void *arg)
{
    count_arg *c = arg;
    for (int rep = 0; rep < 50; rep++)
        tsafe_cpu_pool_run(c->pool, c->n, count_task, c);
    return NULL;
}

/* Two threads submitting batches to one pool at once take turns. */
static void test_pool_concurrent_callers(void **state)
{
    (void)state;
    tsafe_cpu_pool *p = NULL;
    assert_int_equal(tsafe_cpu_pool_create(3, &p), TSAFE_OK);
    size_t n = 64 + tsafe_test_below(200);
    atomic_int *hits = calloc(2 * n, sizeof *hits);
    assert_non_null(hits);
    count_arg c[2] = {{p, hits, n}, {p, hits + n, n}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, runner, &c[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    check_hits(hits, 2 * n, 50);
    free(hits);
    tsafe_cpu_pool_free(p);
}

/* ---------------------------------------------------------- backend */

typedef struct {
    tsafe_bfv_context *bfv;
    tsafe_cpu_pool *pool;
    tsafe_backend *one, *many; /* without and with the pool */
    size_t n;
    uint32_t L;
} fixture;

static void fx_open(fixture *f)
{
    memset(f, 0, sizeof *f);
    tsafe_bfv_params p = {12, 49, 37, 37, 0};
    assert_int_equal(tsafe_bfv_context_create(&p, &f->bfv), TSAFE_OK);
    assert_int_equal(tsafe_cpu_pool_create(2, &f->pool), TSAFE_OK);
    tsafe_backend_factory fac;
    assert_int_equal(tsafe_backend_cpu_factory_pool(f->pool, &fac), TSAFE_OK);
    assert_int_equal(tsafe_backend_create(NULL, NULL, f->bfv, &f->one), TSAFE_OK);
    assert_int_equal(tsafe_backend_create(&fac, NULL, f->bfv, &f->many), TSAFE_OK);
    f->n = tsafe_backend_n(f->one);
    f->L = tsafe_backend_max_limbs(f->one);
}

static void fx_close(fixture *f)
{
    tsafe_backend_free(f->one);
    tsafe_backend_free(f->many);
    tsafe_cpu_pool_free(f->pool);
    tsafe_bfv_context_free(f->bfv);
}

/* polys x L x N reduced random words. */
static uint64_t *random_words(const fixture *f, tsafe_backend *b, size_t polys)
{
    size_t words = polys * f->L * f->n;
    uint64_t *w = malloc(words * sizeof *w);
    assert_non_null(w);
    for (size_t p = 0; p < polys; p++)
        for (uint32_t i = 0; i < f->L; i++)
            for (size_t k = 0; k < f->n; k++)
                w[(p * f->L + i) * f->n + k] = tsafe_test_below(tsafe_backend_prime(b, i));
    return w;
}

static tsafe_buffer *upload(tsafe_backend *b, const uint64_t *w, size_t polys, uint32_t L,
                            int operand)
{
    tsafe_buffer *buf = NULL;
    assert_int_equal(operand ? tsafe_buffer_alloc_operand(b, polys, L, &buf)
                             : tsafe_buffer_alloc(b, polys, L, &buf),
                     TSAFE_OK);
    assert_int_equal(tsafe_buffer_upload(buf, w, polys * L * tsafe_backend_n(b)), TSAFE_OK);
    return buf;
}

#define JOBS 24
#define TERMS 4

/* One batch's inputs as host words, run on backend b; the accumulators'
 * words after the call into out (JOBS x 2 polys x L x N). chain: job j
 * (j odd) takes job j-1's accumulator as its first left term. */
typedef struct {
    uint64_t *acc0[JOBS], *a[JOBS][TERMS], *w[JOBS][TERMS];
    size_t a_polys[JOBS][TERMS], w_polys[JOBS][TERMS];
    int w_operand[JOBS][TERMS], assign[JOBS];
    size_t n_terms[JOBS];
} batch_in;

static void batch_draw(const fixture *f, batch_in *in)
{
    for (size_t j = 0; j < JOBS; j++) {
        in->acc0[j] = random_words(f, f->one, 2);
        in->assign[j] = (int)tsafe_test_below(2);
        in->n_terms[j] = tsafe_test_below(TERMS + 1);
        for (size_t k = 0; k < TERMS; k++) {
            in->a_polys[j][k] = 1 + tsafe_test_below(2);
            in->w_polys[j][k] = 1 + tsafe_test_below(2);
            in->w_operand[j][k] = (int)tsafe_test_below(2);
            in->a[j][k] = random_words(f, f->one, in->a_polys[j][k]);
            in->w[j][k] = random_words(f, f->one, in->w_polys[j][k]);
        }
    }
}

static void batch_free(batch_in *in)
{
    for (size_t j = 0; j < JOBS; j++) {
        free(in->acc0[j]);
        for (size_t k = 0; k < TERMS; k++) {
            free(in->a[j][k]);
            free(in->w[j][k]);
        }
    }
}

static void batch_run(const fixture *f, tsafe_backend *b, const batch_in *in, int chain,
                      uint64_t *out)
{
    tsafe_buffer *acc[JOBS], *a[JOBS][TERMS], *w[JOBS][TERMS];
    const tsafe_buffer *ta[JOBS][TERMS], *tw[JOBS][TERMS];
    tsafe_backend_mac job[JOBS];
    for (size_t j = 0; j < JOBS; j++) {
        acc[j] = upload(b, in->acc0[j], 2, f->L, 0);
        for (size_t k = 0; k < TERMS; k++) {
            a[j][k] = upload(b, in->a[j][k], in->a_polys[j][k], f->L, 0);
            w[j][k] = upload(b, in->w[j][k], in->w_polys[j][k], f->L, in->w_operand[j][k]);
            ta[j][k] = a[j][k];
            tw[j][k] = w[j][k];
        }
        if (chain && (j & 1) && in->n_terms[j] > 0)
            ta[j][0] = acc[j - 1];
        job[j] = (tsafe_backend_mac){acc[j], in->n_terms[j], ta[j], tw[j], in->assign[j]};
    }
    assert_int_equal(tsafe_backend_mul_acc(b, job, JOBS), TSAFE_OK);
    size_t per = 2 * f->L * f->n;
    for (size_t j = 0; j < JOBS; j++) {
        assert_int_equal(tsafe_buffer_download(acc[j], out + j * per, per), TSAFE_OK);
        tsafe_buffer_free(acc[j]);
        for (size_t k = 0; k < TERMS; k++) {
            tsafe_buffer_free(a[j][k]);
            tsafe_buffer_free(w[j][k]);
        }
    }
}

static void test_pooled_mul_acc_bit_for_bit(void **state)
{
    (void)state;
    fixture f;
    fx_open(&f);
    for (int chain = 0; chain < 2; chain++) {
        batch_in in;
        batch_draw(&f, &in);
        size_t words = (size_t)JOBS * 2 * f.L * f.n;
        uint64_t *x = malloc(words * sizeof *x), *y = malloc(words * sizeof *y);
        assert_non_null(x);
        assert_non_null(y);
        batch_run(&f, f.one, &in, chain, x);
        batch_run(&f, f.many, &in, chain, y);
        assert_memory_equal(x, y, words * sizeof *x);
        free(x);
        free(y);
        batch_free(&in);
    }
    fx_close(&f);
}

static void test_pooled_ntt_bit_for_bit(void **state)
{
    (void)state;
    fixture f;
    fx_open(&f);
    size_t polys = 9, words = polys * f.L * f.n;
    uint64_t *w = random_words(&f, f.one, polys);
    uint64_t *x = malloc(words * sizeof *x), *y = malloc(words * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    tsafe_buffer *b1 = upload(f.one, w, polys, f.L, 0), *b2 = upload(f.many, w, polys, f.L, 0);
    assert_int_equal(tsafe_backend_ntt_forward(f.one, b1), TSAFE_OK);
    assert_int_equal(tsafe_backend_ntt_forward(f.many, b2), TSAFE_OK);
    assert_int_equal(tsafe_buffer_download(b1, x, words), TSAFE_OK);
    assert_int_equal(tsafe_buffer_download(b2, y, words), TSAFE_OK);
    assert_memory_equal(x, y, words * sizeof *x);
    assert_int_equal(tsafe_backend_ntt_inverse(f.many, b2), TSAFE_OK);
    assert_int_equal(tsafe_buffer_download(b2, y, words), TSAFE_OK);
    assert_memory_equal(w, y, words * sizeof *w); /* the round trip */
    tsafe_buffer_free(b1);
    tsafe_buffer_free(b2);
    free(w);
    free(x);
    free(y);
    fx_close(&f);
}

int main(void)
{
    tsafe_test_rng_init("cpu_pool");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_runs_every_task_once),
        cmocka_unit_test(test_pool_concurrent_callers),
        cmocka_unit_test(test_pooled_mul_acc_bit_for_bit),
        cmocka_unit_test(test_pooled_ntt_bit_for_bit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
