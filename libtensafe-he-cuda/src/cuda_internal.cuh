/* CUDA backend internals shared by its .cu files (not installed). */
#ifndef TSAFE_CUDA_INTERNAL_CUH
#define TSAFE_CUDA_INTERNAL_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/backend_impl.h"
#include "tensafe/cuda.h"
#include "ntt.cuh"
#include "pool.h"
#include "tables.h"
#include "tsafe_check.h"

/* Pinned staging: two halves for double-buffered copies. */
#define TSAFE_CUDA_STAGING_WORDS (1u << 19) /* 4 MiB per half */
/* Pool: reserved at creation, then grown geometrically. */
#define TSAFE_CUDA_POOL_INITIAL (64u << 20)
/* seal_batch's graphs kept per backend (seal.cu) */
#define TSAFE_CUDA_SEAL_GRAPHS 4
/* ct_read's pinned host areas (a ring) */
#define TSAFE_CUDA_READ_AREAS 2

typedef struct tsafe_cuda_backend {
    int device;
    char name[64];
    cudaStream_t stream;
    tsafe_cuda_tables tables;          /* host copy */
    uint64_t *d_tw_fwd, *d_tw_inv;     /* device twiddles */
    tsafe_cuda_prime *d_primes;
    tsafe_cuda_rescale_const *d_rescale;
    tsafe_ntt_plan plan;
    tsafe_cuda_pool pool;
    uint64_t *staging[2];
    cudaEvent_t staging_ev[2];
    int staging_next;
    /* graph capture */
    int capturing;
    tsafe_status capture_status;       /* first failure inside the capture */
    cudaGraphExec_t graph_exec;
    /* seal_batch's workspace (pool memory) and pinned host area, grown on
     * demand (seal.cu) */
    uint64_t *seal_ws, *seal_host;
    uint64_t seal_ws_words, seal_host_words;
    /* unless TSAFE_CUDA_SEAL_GRAPH=0: a seal chunk's copies and launches
     * as one graph per shape (J, R) and areas, replayed by one launch; LRU */
    struct {
        size_t J;
        uint64_t R;
        const uint64_t *pk, *ws, *host;
        cudaGraphExec_t exec;
        uint64_t used;
    } seal_graph[TSAFE_CUDA_SEAL_GRAPHS];
    uint64_t seal_graph_clock;
    int seal_graph_off; /* a capture failed: direct launches from then on */
    /* ct_read's c0 words (expand.cu; public bytes: never wiped): a ring of
     * pinned host areas, each with the event of its last upload, so that a
     * call waits only on the upload TSAFE_CUDA_READ_AREAS calls back (the
     * last one still queues behind the previous call's kernels); and
     * their device copy, grown on demand */
    struct {
        uint64_t *host;
        uint64_t words;
        cudaEvent_t ev;
    } read[TSAFE_CUDA_READ_AREAS];
    unsigned read_next;
    uint64_t *read_dev;
    uint64_t read_dev_words;
} tsafe_cuda_backend;

/* ------------------------------------------------------------- errors */

/* Record "what: <CUDA message> (<name>)", clear the runtime's last error
 * (the failure is now the caller's status, not a pending error for the
 * next launch check) and return the mapped status (TSAFE_E_NOMEM,
 * TSAFE_E_NO_DEVICE or TSAFE_E_DEVICE). Every CUDA call's status is
 * checked where it is made and, when not cudaSuccess, goes through here
 * or through tsafe_cuda_ignore. */
tsafe_status tsafe_cuda_fail(cudaError_t e, const char *what);
/* Record a message for a non-CUDA failure and return st. */
tsafe_status tsafe_cuda_fail_msg(tsafe_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
tsafe_status tsafe_cuda_map_error(cudaError_t e);
/* For calls whose failure is deliberately not reported (cleanup paths):
 * clear the last error they left so that no later launch reports it. */
void tsafe_cuda_ignore(cudaError_t e);
/* Before a kernel launch: drop a stale non-sticky error left by CUDA calls
 * outside this library on the same thread (each such call already
 * returned its status to its caller), so that the check after <<<>>>
 * reports this launch's error only. */
static inline void tsafe_cuda_launch_prepare(void) { (void)cudaGetLastError(); }

#define TSAFE_CUDA_TRY(call)                                                 \
    do {                                                                     \
        cudaError_t e_ = (call);                                             \
        if (e_ != cudaSuccess) {                                             \
            st = tsafe_cuda_fail(e_, #call);                                 \
            goto fail;                                                       \
        }                                                                    \
    } while (0)

/* Makes the backend's device current for the scope (restores after). */
struct tsafe_cuda_device_guard {
    int prev = -1;
    cudaError_t err = cudaSuccess;
    explicit tsafe_cuda_device_guard(int dev)
    {
        err = cudaGetDevice(&prev);
        if (err == cudaSuccess && prev != dev)
            err = cudaSetDevice(dev);
        else
            prev = -1; /* nothing to restore */
    }
    ~tsafe_cuda_device_guard()
    {
        if (prev >= 0)
            tsafe_cuda_ignore(cudaSetDevice(prev));
    }
};

/* A switch from the environment, read once into *cache (-1: not read
 * yet): unset or empty gives dflt, "0" gives 0, anything else 1. */
static inline int tsafe_cuda_env_flag(int *cache, const char *name, int dflt)
{
    int v = __atomic_load_n(cache, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv(name);
        v = !e || !*e ? dflt : strcmp(e, "0") != 0;
        __atomic_store_n(cache, v, __ATOMIC_RELAXED);
    }
    return v;
}

/* ------------------------------------------------------------ launches */
/* Each returns TSAFE_OK or the launch error (message recorded). Work is
 * queued on st->stream. */

tsafe_status tsafe_cuda_ntt_setup(tsafe_cuda_backend *cb); /* smem limits */

/* NTT of n_polys x n_limbs limbs read from src (poly stride src_stride),
 * written to dst (poly stride dst_stride); src == dst is allowed (and
 * required to be the same layout then). limb i uses prime prime_base + i.
 * epi: optional fused epilogue (ntt.cuh), NULL for a plain NTT. */
tsafe_status tsafe_cuda_ntt_launch(tsafe_cuda_backend *cb, int forward,
                                   const uint64_t *src, uint64_t src_stride,
                                   uint64_t *dst, uint64_t dst_stride,
                                   size_t n_polys, uint32_t n_limbs,
                                   uint32_t prime_base, const tsafe_ntt_epi *epi);

/* The same for a call record (ntt.cuh); what the launcher above wraps. */
tsafe_status tsafe_cuda_ntt_run(tsafe_cuda_backend *cb, const tsafe_ntt_call *c);

tsafe_status tsafe_cuda_elementwise_launch(tsafe_cuda_backend *cb, int op,
                                           uint64_t *out, const uint64_t *a,
                                           const uint64_t *b, size_t n_polys,
                                           size_t b_polys, uint32_t n_limbs);

tsafe_status tsafe_cuda_rescale_launch(tsafe_cuda_backend *cb, uint64_t *out,
                                       const uint64_t *in, size_t n_polys,
                                       uint32_t n_limbs_in);

/* acc += sum a (*) w for every job (shapes checked by the dispatcher and
 * again here): usually one launch, more for calls beyond one parameter
 * block or jobs that read an earlier job's accumulator (mac.cuh). */
tsafe_status tsafe_cuda_mul_acc_launch(tsafe_cuda_backend *cb,
                                       const tsafe_backend_mac *jobs,
                                       size_t n_jobs);

/* Coefficient-form modulus switch dropping the last of n_limbs_in limbs
 * (modswitch.cuh); out and in must not overlap. */
tsafe_status tsafe_cuda_mod_switch_launch(tsafe_cuda_backend *cb, uint64_t *out,
                                          const uint64_t *in, size_t n_polys,
                                          uint32_t n_limbs_in);

/* The seal_batch slot (seal.cu): chunks of jobs, each one upload, the
 * stages of seal.cuh and one download; returns with the outputs written. */
/* The ct_read slot (expand.cu): c0 uploaded, c1 expanded from the seed
 * on the device, queued on the stream. */
tsafe_status tsafe_cuda_ct_read_launch(tsafe_backend *b, const tsafe_backend_ct_job *jobs,
                                       size_t n, uint64_t stream);
tsafe_status tsafe_cuda_seal_batch_launch(tsafe_backend *b, const void *pk,
                                          const tsafe_backend_seal_job *jobs, size_t n);

/* --------------------------------------------- devices, memory (vtable) */

/* TSAFE_OK when device is an index of a present device; else TSAFE_E_ARG
 * (negative) or TSAFE_E_NO_DEVICE, message recorded (device.cu). */
tsafe_status tsafe_cuda_check_device(int device);

/* Buffers, uploads, downloads and synchronize are refused (TSAFE_E_STATE,
 * message recorded) while the stream is captured into a graph. */
static inline tsafe_status tsafe_cuda_refuse_in_capture(const tsafe_cuda_backend *cb,
                                                        const char *what)
{
    if (!cb->capturing)
        return TSAFE_OK;
    return tsafe_cuda_fail_msg(TSAFE_E_STATE, "%s is not allowed while a graph is captured",
                               what);
}

/* memory.cu: staging and pool made at creation, freed at teardown (the
 * teardown takes a partly made state), and the vtable's buffer slots. */
tsafe_status tsafe_cuda_memory_setup(tsafe_cuda_backend *cb);
void tsafe_cuda_memory_teardown(tsafe_cuda_backend *cb);
tsafe_status tsafe_cuda_buffer_alloc(tsafe_backend *b, size_t words, void **mem);
void tsafe_cuda_buffer_free(tsafe_backend *b, void *mem);
tsafe_status tsafe_cuda_buffer_upload(tsafe_backend *b, void *mem, const uint64_t *src,
                                      size_t words);
tsafe_status tsafe_cuda_buffer_download(tsafe_backend *b, const void *mem, uint64_t *dst,
                                        size_t words);

/* The backend state behind a handle, or NULL when b is not a CUDA backend. */
tsafe_cuda_backend *tsafe_cuda_state(const tsafe_backend *b);

#endif
