/* Shared helpers of the LoRA tests: random matrices and the independent
 * double-precision reference delta = s * B (A x). */
#ifndef TSAFE_TEST_LORA_H
#define TSAFE_TEST_LORA_H

#include <stddef.h>
#include <stdint.h>

/* n floats uniform in [-amp, amp) from the test PRNG (caller frees). */
float *tsafe_test_rand_floats(size_t n, double amp);
/* out[dout] = s * B (A x) in double; A r x d, B dout x r, row-major. */
void tsafe_test_ref_delta(const float *A, const float *B, const float *x, uint32_t r,
                          uint32_t d, uint32_t dout, double s, double *out);
/* ||got - want|| / ||want|| */
double tsafe_test_rel_l2(const float *got, const double *want, size_t n);

#endif
