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
