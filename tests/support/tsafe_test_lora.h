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
/* ||s B A||_F in doubles. */
double tsafe_test_frobenius(const float *A, const float *B, uint32_t r, uint32_t d,
                            uint32_t dout, double s);
/* How much x reaches P = s B A: ||P x|| / (||P||_F rms(x)), from px =
 * ||P x|| and p_fro = ||P||_F (about 1 for a typical x). */
double tsafe_test_reach(double px, double p_fro, const float *x, uint32_t d);
/* tol, or tol times 0.5 / reach below a reach of 0.5 (INFINITY at 0). */
double tsafe_test_tol_at(double reach, double tol);
/* The relative error a delta may carry: tol where x reaches the adapter
 * typically (||P x|| >= ||P||_F rms(x) / 2, P = s B A), tol times half the
 * typical ||P x|| over this one's below. Every grid of the sealed modes
 * (and CKKS's noise) is a fraction of ||x||, so a rank-4 adapter and an x
 * nearly orthogonal to its rows err more, relatively (PROTOCOL.md,
 * "Precision"): tsafe_test_tol_at of its reach. INFINITY where P x is
 * exactly zero. */
double tsafe_test_delta_tol(const float *A, const float *B, const float *x, uint32_t r,
                            uint32_t d, uint32_t dout, double s, double tol);

#endif
