#include "tsafe_test_lora.h"

#include <math.h>
#include <stdlib.h>

#include "tsafe_test_rng.h"

float *tsafe_test_rand_floats(size_t n, double amp)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; v && i < n; i++)
        v[i] = tsafe_test_uniform_float(-amp, amp);
    return v;
}

void tsafe_test_ref_delta(const float *A, const float *B, const float *x, uint32_t r,
                          uint32_t d, uint32_t dout, double s, double *out)
{
    double *u = calloc(r, sizeof *u);
    for (uint32_t i = 0; i < r; i++)
        for (uint32_t j = 0; j < d; j++)
            u[i] += (double)A[(size_t)i * d + j] * x[j];
    for (uint32_t o = 0; o < dout; o++) {
        double acc = 0;
        for (uint32_t i = 0; i < r; i++)
            acc += (double)B[(size_t)o * r + i] * u[i];
        out[o] = s * acc;
    }
    free(u);
}

double tsafe_test_rel_l2(const float *got, const double *want, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return sqrt(num / den);
}

double tsafe_test_frobenius(const float *A, const float *B, uint32_t r, uint32_t d,
                            uint32_t dout, double s)
{
    double *row = malloc(d * sizeof *row), acc = 0;
    if (!row)
        return NAN;
    for (uint32_t o = 0; o < dout; o++) {
        for (uint32_t j = 0; j < d; j++)
            row[j] = 0;
        for (uint32_t i = 0; i < r; i++)
            for (uint32_t j = 0; j < d; j++)
                row[j] += (double)B[(size_t)o * r + i] * A[(size_t)i * d + j];
        for (uint32_t j = 0; j < d; j++)
            acc += row[j] * row[j];
    }
    free(row);
    return fabs(s) * sqrt(acc);
}

double tsafe_test_reach(double px, double p_fro, const float *x, uint32_t d)
{
    double x2 = 0;
    for (uint32_t j = 0; j < d; j++)
        x2 += (double)x[j] * x[j];
    return px / (p_fro * sqrt(x2 / d));
}

double tsafe_test_tol_at(double reach, double tol)
{
    return reach > 0 ? tol * fmax(1, 0.5 / reach) : INFINITY;
}

double tsafe_test_delta_tol(const float *A, const float *B, const float *x, uint32_t r,
                            uint32_t d, uint32_t dout, double s, double tol)
{
    double *want = malloc(dout * sizeof *want), px = 0;
    if (!want)
        return NAN;
    tsafe_test_ref_delta(A, B, x, r, d, dout, s, want);
    for (uint32_t o = 0; o < dout; o++)
        px += want[o] * want[o];
    free(want);
    return tsafe_test_tol_at(tsafe_test_reach(sqrt(px), tsafe_test_frobenius(A, B, r, d, dout, s),
                                              x, d),
                             tol);
}
