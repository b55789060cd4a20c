/* The ct_read slot on the device (expand.cuh has the phases): the c0 of
 * every ciphertext of a call packed into a pinned host area (a ring of
 * TSAFE_CUDA_READ_AREAS, grown together: a call never waits on the
 * previous call's upload, which queues behind the kernels before it) and
 * uploaded in one copy (up to TSAFE_READ_CHUNK_WORDS a copy), then one block per
 * (ciphertext, limb) copies its c0 limb into poly 0 of the ciphertext's
 * buffer and expands c1 from the seed into poly 1, TSAFE_EXPAND_MAX_JOBS
 * ciphertexts a launch (their pointers and keys are the arguments). The
 * seeds and c0 are public (they travel in the clear), so nothing here is
 * wiped. Returns with the work queued on the backend's stream. */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.cuh"
#include "expand.cuh"

/* c0 words of one upload: 32 MiB (a round's query and shares fit) */
#define TSAFE_READ_CHUNK_WORDS (1ull << 22)

typedef struct expand_launch {
    uint64_t *c1[TSAFE_EXPAND_MAX_JOBS];
    const uint64_t *c0_src[TSAFE_EXPAND_MAX_JOBS]; /* the uploaded c0 */
    uint32_t key[TSAFE_EXPAND_MAX_JOBS][8];
    uint64_t q[TSAFE_EXPAND_MAX_LIMBS];
    uint64_t nonce0;
    uint32_t L, log_n;
} expand_launch;

__global__ void __launch_bounds__(TSAFE_EXPAND_THREADS) tsafe_expand_kernel(expand_launch a)
{
    __shared__ tsafe_expand_shared sh;
    uint32_t job = blockIdx.x / a.L, limb = blockIdx.x % a.L, t = threadIdx.x;
    uint64_t n = 1ull << a.log_n, words = (uint64_t)a.L * n;
    /* c0 sits one poly before c1 in the ciphertext's buffer */
    const uint64_t *src = a.c0_src[job] + limb * n;
    uint64_t *c0 = a.c1[job] - words + limb * n;
    for (uint64_t i = t; i < n; i += TSAFE_EXPAND_THREADS)
        c0[i] = src[i];
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

/* Every area of the ring grown to words at once (cudaHostAlloc is slow
 * and serialises the device's callers: growing one area a call put an
 * allocation into each of the first TSAFE_CUDA_READ_AREAS calls of a
 * shape, and a server making one call per token paid it in its first
 * tokens -- 47 ms a call on an H200 under 16 threads). */
static tsafe_status read_grow(tsafe_cuda_backend *cb, uint64_t words)
{
    for (int a = 0; a < TSAFE_CUDA_READ_AREAS; a++) {
        if (cb->read[a].words >= words)
            continue;
        cudaError_t e;
        if (cb->read[a].ev && (e = cudaEventSynchronize(cb->read[a].ev)) != cudaSuccess)
            return tsafe_cuda_fail(e, "ct read (queued work failed)");
        if (cb->read[a].host)
            tsafe_cuda_ignore(cudaFreeHost(cb->read[a].host));
        cb->read[a].words = 0;
        e = cudaHostAlloc((void **)&cb->read[a].host, words * sizeof(uint64_t),
                          cudaHostAllocDefault);
        if (e != cudaSuccess) {
            cb->read[a].host = NULL;
            return tsafe_cuda_fail(e, "cudaHostAlloc(ct read host area)");
        }
        cb->read[a].words = words;
    }
    return TSAFE_OK;
}

/* The next pinned host area of the ring, once its last upload is done,
 * and the device copy, each of at least words, kept for later calls. */
static tsafe_status read_area(tsafe_cuda_backend *cb, uint64_t words, uint64_t **host,
                              cudaEvent_t *ev)
{
    unsigned k = cb->read_next;
    cb->read_next = (k + 1) % TSAFE_CUDA_READ_AREAS;
    cudaError_t e;
    if (!cb->read[k].ev &&
        (e = cudaEventCreateWithFlags(&cb->read[k].ev, cudaEventDisableTiming)) != cudaSuccess) {
        cb->read[k].ev = NULL;
        return tsafe_cuda_fail(e, "cudaEventCreate(ct read)");
    }
    if ((e = cudaEventSynchronize(cb->read[k].ev)) != cudaSuccess)
        return tsafe_cuda_fail(e, "ct read (queued work failed)");
    tsafe_status st = read_grow(cb, words);
    if (st != TSAFE_OK)
        return st;
    if (cb->read_dev_words < words) {
        if (cb->read_dev) /* later work on this stream only: safe to reuse */
            (void)tsafe_cuda_pool_free(&cb->pool, cb->read_dev);
        cb->read_dev = NULL;
        cb->read_dev_words = 0;
        st = tsafe_cuda_pool_alloc(&cb->pool, words * sizeof(uint64_t), 1,
                                   (void **)&cb->read_dev);
        if (st != TSAFE_OK) {
            cb->read_dev = NULL;
            return st == TSAFE_E_NOMEM ? tsafe_cuda_fail_msg(st, "ct read area of %llu words",
                                                             (unsigned long long)words)
                                       : st;
        }
        cb->read_dev_words = words;
    }
    *host = cb->read[k].host;
    *ev = cb->read[k].ev;
    return TSAFE_OK;
}

/* Ciphertexts [0, J) whose c0 fit one upload. The device copy is reused
 * by the next call's upload only after this call's kernels (one stream). */
static tsafe_status read_chunk(tsafe_cuda_backend *cb, const tsafe_backend_ct_job *jobs,
                               size_t J, uint64_t stream)
{
    uint32_t L = cb->tables.n_primes;
    uint64_t words = (uint64_t)L * cb->tables.n, *host = NULL;
    cudaEvent_t ev = NULL;
    tsafe_status st = read_area(cb, J * words, &host, &ev);
    if (st != TSAFE_OK)
        return st;
    for (size_t j = 0; j < J; j++)
        memcpy(host + j * words, jobs[j].c0, words * sizeof(uint64_t));
    cudaError_t e = cudaMemcpyAsync(cb->read_dev, host, J * words * sizeof(uint64_t),
                                    cudaMemcpyHostToDevice, cb->stream);
    if (e != cudaSuccess)
        return tsafe_cuda_fail(e, "ct read upload");
    if ((e = cudaEventRecord(ev, cb->stream)) != cudaSuccess)
        return tsafe_cuda_fail(e, "cudaEventRecord(ct read)");
    expand_launch a;
    memset(&a, 0, sizeof a);
    for (uint32_t i = 0; i < L; i++)
        a.q[i] = cb->tables.primes[i].q;
    a.nonce0 = stream;
    a.L = L;
    a.log_n = cb->tables.log_n;
    for (size_t first = 0; first < J; first += TSAFE_EXPAND_MAX_JOBS) {
        size_t K = J - first < TSAFE_EXPAND_MAX_JOBS ? J - first : TSAFE_EXPAND_MAX_JOBS;
        for (size_t j = 0; j < K; j++) {
            a.c1[j] = (uint64_t *)jobs[first + j].mem + words;
            a.c0_src[j] = cb->read_dev + (first + j) * words;
            memcpy(a.key[j], jobs[first + j].seed, 32); /* little-endian words, as the host */
        }
        tsafe_cuda_launch_prepare();
        tsafe_expand_kernel<<<(unsigned)(K * L), TSAFE_EXPAND_THREADS, 0, cb->stream>>>(a);
        if ((e = cudaGetLastError()) != cudaSuccess)
            return tsafe_cuda_fail(e, "ct read launch");
    }
    return TSAFE_OK;
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
    size_t per = (size_t)(TSAFE_READ_CHUNK_WORDS / words);
    /* tests: TSAFE_CUDA_READ_MAX_JOBS caps an upload (several from a small
     * call) */
    const char *cap_env = getenv("TSAFE_CUDA_READ_MAX_JOBS");
    size_t cap = cap_env ? strtoull(cap_env, NULL, 10) : 0;
    if (cap && cap < per)
        per = cap;
    if (per == 0)
        per = 1;
    for (size_t first = 0; first < n && st == TSAFE_OK; first += per)
        st = read_chunk(cb, jobs + first, n - first < per ? n - first : per, stream);
    return st;
}
