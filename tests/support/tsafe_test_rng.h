/* Test-only PRNG (xoshiro256**): fresh seed per run unless TSAFE_TEST_SEED
 * is set; the seed is printed so a failure can be replayed. Not for keys. */
#ifndef TSAFE_TEST_RNG_H
#define TSAFE_TEST_RNG_H

#include <stdint.h>

/* Seeds the generator once per process and prints the seed. */
void tsafe_test_rng_init(const char *suite);
uint64_t tsafe_test_u64(void);
/* Uniform in [0, bound). */
uint64_t tsafe_test_below(uint64_t bound);
/* Uniform double in [lo, hi). */
double tsafe_test_uniform(double lo, double hi);
/* Uniform float in [lo, hi], never outside: rounding the double to float can
 * step past a bound (0.05 becomes 0.0500000007f), which a plan limit of
 * exactly that bound refuses, in about one run of thirty that draw millions. */
float tsafe_test_uniform_float(double lo, double hi);
/* 32 random bytes (e.g. a reproducible key seed). */
void tsafe_test_seed32(uint8_t out[32]);

#endif
