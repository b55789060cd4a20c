/* Host emulation of the CUDA backend's kernels (internal, for tests).
 *
 * Runs the kernels' own code on the host: the kernel bodies (block setup,
 * the NTT phases between barriers, the element-wise thread with its
 * 16-byte accesses) and the launch geometry (passes, grids, the rescale's
 * two NTT calls) are the __host__ __device__ functions of ntt.cuh and
 * elementwise.cuh; device-only instructions (__umul64hi, __ldg, vector
 * loads/stores) have host equivalents in modarith.cuh, one place each.
 * Only the launch is replaced: blocks in turn, and within each barrier
 * interval the threads of a block in turn (they touch disjoint
 * shared-memory words there, so this gives the parallel result). The same
 * holds for the multiply-accumulate (mac.cuh, with its batching of jobs
 * into launches) and the modulus switch (modswitch.cuh). A 16-byte
 * access that is not 16-byte aligned fails the operation with
 * TSAFE_E_DEVICE, as the device would fault. Not a substitute for a GPU
 * run: it cannot see races, missing barriers, launch limits, the device
 * spelling of those instructions or device faults. */
#ifndef TSAFE_CUDA_EMULATE_H
#define TSAFE_CUDA_EMULATE_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/backend.h"
#include "tensafe/backend_impl.h"
#include "tensafe/ckks.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsafe_cuda_emu tsafe_cuda_emu;

/* fused_log_max: the largest fused tile as on a device (14 for 128 KiB of
 * shared memory); smaller values force the two-pass NTT at small N. The
 * tables come from the ring of ctx's data primes. */
tsafe_status tsafe_cuda_emu_create(const tsafe_context *ctx,
                                   uint32_t fused_log_max,
                                   tsafe_cuda_emu **out);
/* The same for the ring that backend `ring` serves (any backend, e.g. a
 * CPU backend made with tsafe_backend_cpu_create_bfv): the tables are
 * built from its facts as the CUDA backend builds them. Borrows nothing. */
tsafe_status tsafe_cuda_emu_create_ring(const tsafe_backend *ring,
                                        uint32_t fused_log_max,
                                        tsafe_cuda_emu **out);
void tsafe_cuda_emu_free(tsafe_cuda_emu *e);
/* Number of NTT passes the plan uses. */
uint32_t tsafe_cuda_emu_ntt_passes(const tsafe_cuda_emu *e);

/* Same arguments and layouts as the vtable slots. */
tsafe_status tsafe_cuda_emu_ntt(tsafe_cuda_emu *e, int forward, uint64_t *data,
                                size_t n_polys, uint32_t n_limbs);
tsafe_status tsafe_cuda_emu_elementwise(tsafe_cuda_emu *e, int op,
                                        uint64_t *out, const uint64_t *a,
                                        const uint64_t *b, size_t n_polys,
                                        size_t b_polys, uint32_t n_limbs);
tsafe_status tsafe_cuda_emu_rescale(tsafe_cuda_emu *e, uint64_t *out,
                                    const uint64_t *in, size_t n_polys,
                                    uint32_t n_limbs_in);

/* tsafe_backend_mul_acc's jobs, on buffers whose memory is host memory
 * (a CPU backend's: an operand's values come first there, which is all
 * the kernel reads). The dispatcher's shape checks are the caller's; the
 * batching checks limbs and shapes again (TSAFE_E_RANGE). */
tsafe_status tsafe_cuda_emu_mul_acc(tsafe_cuda_emu *e,
                                    const tsafe_backend_mac *jobs,
                                    size_t n_jobs);
/* Number of mul_acc launches emulated so far (the batching: one per call
 * unless a call exceeds a parameter block or has ordered jobs). */
uint64_t tsafe_cuda_emu_mac_launches(const tsafe_cuda_emu *e);
/* Coefficient-form modulus switch, out = n_polys x (n_limbs_in - 1). */
tsafe_status tsafe_cuda_emu_mod_switch(tsafe_cuda_emu *e, uint64_t *out,
                                       const uint64_t *in, size_t n_polys,
                                       uint32_t n_limbs_in);

/* The ct_read slot's seed expansion (backend_impl.h API 5, expand.cuh):
 * c1 (L x N) of the ciphertext with this seed, limb i from ChaCha20 nonce
 * stream + i, kept below q[i]; any primes (tests take ones that reject
 * often). */
tsafe_status tsafe_cuda_emu_expand(const uint8_t seed[32], uint64_t stream, const uint64_t *q,
                                   uint32_t L, uint32_t log_n, uint64_t *c1);

/* The seal_batch slot (backend_impl.h API 4) on host memory: pk and every
 * job's accumulator a CPU backend's BFV buffers of this ring (the
 * operand's values first). Same stages and bodies as the device. */
tsafe_status tsafe_cuda_emu_seal_batch(tsafe_cuda_emu *e, const uint64_t *pk,
                                       const tsafe_backend_seal_job *jobs, size_t n);

/* The keystream and e1 stages alone for one job (N = 2^log_n samples
 * into e1): the expansion the device makes of a sealing's stream. */
tsafe_status tsafe_cuda_emu_seal_e1(const uint8_t key[32], uint64_t off, uint64_t stream,
                                    uint32_t log_n, int8_t *e1);

/* Test hook for the error path (needs no device): makes a CUDA runtime
 * call fail, converts it with tsafe_cuda_fail and says whether the
 * runtime's last error was cleared: 1 cleared, 0 still pending (the next
 * launch check would report it again), -1 nothing to check (without a
 * usable driver the runtime's initialisation error stays pending for good,
 * so the check is meaningful on a machine with a GPU only). */
int tsafe_cuda_emu_fail_clears_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
