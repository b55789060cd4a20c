/* Sealed two-party HE-LoRA: exactness against an independent integer
 * fixed-point reference (sealed: the server's reconstructed u is bit for
 * bit sum_j x_q[j] A_q[i][j]), delta against double precision
 * (sealed-private), plan derivation and checks, sequencing. The attack
 * tests live in test_sealed_attacks.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/lora_sealed.h"
#include "support/tsafe_test_rng.h"

typedef struct {
    uint32_t d_in, rank, d_out;
    float *A, *B, *x;
    float scale;
} adapter;

static void adapter_make(adapter *a, uint32_t d_in, uint32_t rank, uint32_t d_out)
{
    a->d_in = d_in;
    a->rank = rank;
    a->d_out = d_out;
    a->A = malloc((size_t)rank * d_in * sizeof *a->A);
    a->B = malloc((size_t)d_out * rank * sizeof *a->B);
    a->x = malloc(d_in * sizeof *a->x);
    for (size_t i = 0; i < (size_t)rank * d_in; i++)
        a->A[i] = (float)tsafe_test_uniform(-0.05, 0.05);
    for (size_t i = 0; i < (size_t)d_out * rank; i++)
        a->B[i] = (float)tsafe_test_uniform(-0.02, 0.02);
    for (size_t i = 0; i < d_in; i++)
        a->x[i] = (float)tsafe_test_uniform(-3, 3);
    a->scale = 2.0f;
}

static void adapter_free(adapter *a)
{
    free(a->A);
    free(a->B);
    free(a->x);
}

/* The fixed-point rules of docs/PROTOCOL.md, written out again. */
static void reference_u(const tsafe_sealed_plan *p, const adapter *a, int64_t *u)
{
    double mx = 0, ma = 0;
    for (uint32_t j = 0; j < a->d_in; j++)
        mx = fmax(mx, fabs(a->x[j]));
    for (size_t i = 0; i < (size_t)a->rank * a->d_in; i++)
        ma = fmax(ma, fabs(a->A[i]));
    double sx = mx / (double)((1 << (p->x_bits - 1)) - 1);
    double sa = ma / (double)((1 << (p->a_bits - 1)) - 1);
    for (uint32_t i = 0; i < a->rank; i++) {
        int64_t acc = 0;
        for (uint32_t j = 0; j < a->d_in; j++)
            acc += (int64_t)lrint(a->x[j] / sx) *
                   (int64_t)lrint(a->A[(size_t)i * a->d_in + j] / sa);
        u[i] = acc;
    }
}

static void reference_delta(const adapter *a, double *delta)
{
    double *u = calloc(a->rank, sizeof *u);
    for (uint32_t i = 0; i < a->rank; i++)
        for (uint32_t j = 0; j < a->d_in; j++)
            u[i] += (double)a->A[(size_t)i * a->d_in + j] * a->x[j];
    for (uint32_t o = 0; o < a->d_out; o++) {
        double acc = 0;
        for (uint32_t i = 0; i < a->rank; i++)
            acc += (double)a->B[(size_t)o * a->rank + i] * u[i];
        delta[o] = a->scale * acc;
    }
    free(u);
}

static double rel_l2(const float *got, const double *want, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return sqrt(num / den);
}

/* One token through client and server, every message as bytes. */
static void run_token(tsafe_sealed_client *c, tsafe_sealed_server *s,
                      const tsafe_sealed_site *site, const adapter *a, float *delta)
{
    uint8_t *q, *r1, *sh, *r2;
    size_t ql, r1l, shl, r2l;
    assert_int_equal(tsafe_sealed_client_query(c, a->x, &q, &ql, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_round1(s, &site, 1, q, ql, &r1, &r1l, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_respond(c, r1, r1l, 1, &a->rank, &a->d_out, NULL, 1,
                                                 &sh, &shl, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_round2(s, &site, 1, sh, shl, &r2, &r2l, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_finish(c, r2, r2l, 1, &a->d_out, &delta, NULL), TSAFE_OK);
    tsafe_lora_bytes_free(q);
    tsafe_lora_bytes_free(r1);
    tsafe_lora_bytes_free(sh);
    tsafe_lora_bytes_free(r2);
}

static void open_pair(const tsafe_sealed_plan *p, tsafe_sealed_client **c,
                      tsafe_sealed_server **s)
{
    uint8_t *hello;
    size_t hl;
    assert_int_equal(tsafe_sealed_client_create(p, NULL, c), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_create(p, s), TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_hello(*c, &hello, &hl), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_accept(*s, hello, hl), TSAFE_OK);
    tsafe_lora_bytes_free(hello);
}

static void check_shape(tsafe_sealed_mode mode, uint32_t d_in, uint32_t rank, uint32_t d_out)
{
    tsafe_sealed_plan p;
    assert_int_equal(tsafe_sealed_plan_derive(mode, d_in, rank, d_out, NULL, &p), TSAFE_OK);
    adapter a;
    adapter_make(&a, d_in, rank, d_out);
    tsafe_sealed_site *site;
    assert_int_equal(tsafe_sealed_site_create(&p, a.A, a.B, rank, d_out, a.scale, &site),
                     TSAFE_OK);
    tsafe_sealed_client *c;
    tsafe_sealed_server *s;
    open_pair(&p, &c, &s);
    float *delta = malloc(d_out * sizeof *delta);
    double *want = malloc(d_out * sizeof *want);
    reference_delta(&a, want);
    for (int tok = 0; tok < 2; tok++) {
        for (uint32_t j = 0; j < d_in; j++)
            a.x[j] = (float)tsafe_test_uniform(-3, 3);
        reference_delta(&a, want);
        run_token(c, s, site, &a, delta);
        double err = rel_l2(delta, want, d_out);
        if (mode == TSAFE_SEALED) {
            int64_t *u = malloc(rank * sizeof *u), *ref = malloc(rank * sizeof *ref);
            assert_int_equal(tsafe_sealed_server_last_u(s, 0, u, rank), TSAFE_OK);
            reference_u(&p, &a, ref);
            for (uint32_t i = 0; i < rank; i++)
                assert_true(u[i] == ref[i]); /* bit for bit */
            free(u);
            free(ref);
        }
        printf("# %s d_in=%u r=%u d_out=%u: rel L2 %.2e (model %.2e)\n",
               mode == TSAFE_SEALED ? "sealed" : "sealed-private", d_in, rank, d_out,
               err, p.expected_rel_error);
        assert_true(err <= 1e-3);
    }
    free(delta);
    free(want);
    tsafe_sealed_client_free(c);
    tsafe_sealed_server_free(s);
    tsafe_sealed_site_free(site);
    adapter_free(&a);
}

static void sealed_exact_shapes(void **state)
{
    (void)state;
    check_shape(TSAFE_SEALED, 2048, 32, 2048);
    check_shape(TSAFE_SEALED, 1536, 8, 256);   /* GQA: d_out != d_in */
    check_shape(TSAFE_SEALED, 1536, 64, 1536);
    check_shape(TSAFE_SEALED, 2048, 16, 512);
}

static void sealed_private_shapes(void **state)
{
    (void)state;
    check_shape(TSAFE_SEALED_PRIVATE, 2048, 32, 2048);
    check_shape(TSAFE_SEALED_PRIVATE, 1536, 8, 256);
    check_shape(TSAFE_SEALED_PRIVATE, 2048, 64, 512);
    check_shape(TSAFE_SEALED_PRIVATE, 1536, 16, 1536);
}

int main(void)
{
    tsafe_test_rng_init("lora_sealed");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sealed_exact_shapes),
        cmocka_unit_test(sealed_private_shapes),
    };
    return cmocka_run_group_tests_name("lora_sealed", tests, NULL, NULL);
}
