/* The ct_read slot on the device (expand.cuh has the phases): each
 * ciphertext's c0 uploaded into poly 0 of its buffer, its c1 expanded
 * from the seed into poly 1 by one block per limb, TSAFE_EXPAND_MAX_JOBS
 * ciphertexts a launch (their pointers and keys are the arguments). The
 * seeds are public (they travel in the clear), so nothing here is
 * wiped. Returns with the work queued on the backend's stream. */
#include <string.h>

#include "cuda_internal.cuh"
#include "expand.cuh"

typedef struct expand_launch {
    uint64_t *c1[TSAFE_EXPAND_MAX_JOBS];
    uint32_t key[TSAFE_EXPAND_MAX_JOBS][8];
    uint64_t q[TSAFE_EXPAND_MAX_LIMBS];
    uint64_t nonce0;
    uint32_t L, log_n;
} expand_launch;

__global__ void __launch_bounds__(TSAFE_EXPAND_THREADS) tsafe_expand_kernel(expand_launch a)
{
    __shared__ tsafe_expand_shared sh;
    uint32_t job = blockIdx.x / a.L, limb = blockIdx.x % a.L, t = threadIdx.x;
    uint64_t n = 1ull << a.log_n;
    tsafe_expand_block b =
        ts_expand_block_make(a.key[job], a.nonce0 + limb, a.q[limb], a.c1[job] + limb * n, n);
    if (t == 0) {
        sh.cand = 0;
        sh.kept = 0;
    }
    __syncthreads();
    while (sh.kept < n) { /* the same value for every thread: read after a barrier */
        ts_expand_keystream(b, sh, t);
        __syncthreads();
        ts_expand_candidates(b, sh, t);
        __syncthreads();
        if (t == 0)
            ts_expand_scan(sh);
        __syncthreads();
        ts_expand_place(b, sh, t);
        __syncthreads();
        if (t == 0)
            ts_expand_advance(sh);
        __syncthreads();
    }
}

tsafe_status tsafe_cuda_ct_read_launch(tsafe_backend *b, const tsafe_backend_ct_job *jobs,
                                       size_t n, uint64_t stream)
{
    tsafe_cuda_backend *cb = (tsafe_cuda_backend *)b->ctx;
    tsafe_status st = tsafe_cuda_refuse_in_capture(cb, "ct read");
    if (st != TSAFE_OK)
        return st;
    uint32_t L = cb->tables.n_primes;
    if (L < 1 || L > TSAFE_EXPAND_MAX_LIMBS || cb->tables.ckks)
        return tsafe_cuda_fail_msg(TSAFE_E_UNSUPPORTED, "ct read needs a BFV ring");
    tsafe_cuda_device_guard dg(cb->device);
    if (dg.err != cudaSuccess)
        return tsafe_cuda_fail(dg.err, "cudaSetDevice");
    uint64_t words = (uint64_t)L * cb->tables.n;
    expand_launch a;
    memset(&a, 0, sizeof a);
    for (uint32_t i = 0; i < L; i++)
        a.q[i] = cb->tables.primes[i].q;
    a.nonce0 = stream;
    a.L = L;
    a.log_n = cb->tables.log_n;
    for (size_t first = 0; first < n && st == TSAFE_OK; first += TSAFE_EXPAND_MAX_JOBS) {
        size_t J = n - first < TSAFE_EXPAND_MAX_JOBS ? n - first : TSAFE_EXPAND_MAX_JOBS;
        for (size_t j = 0; j < J && st == TSAFE_OK; j++) {
            const tsafe_backend_ct_job *jb = &jobs[first + j];
            /* c0 through the staging halves, ordered on the stream */
            st = tsafe_cuda_buffer_upload(b, jb->mem, jb->c0, words);
            a.c1[j] = (uint64_t *)jb->mem + words;
            memcpy(a.key[j], jb->seed, 32); /* little-endian words, as the host */
        }
        if (st != TSAFE_OK)
            break;
        tsafe_cuda_launch_prepare();
        tsafe_expand_kernel<<<(unsigned)(J * L), TSAFE_EXPAND_THREADS, 0, cb->stream>>>(a);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            st = tsafe_cuda_fail(e, "ct read launch");
    }
    return st;
}
