/* CUDA backend (libtensafe-he-cuda): the core's backend vtable on NVIDIA
 * GPUs. Entry points only; no CUDA type appears here, so a host program
 * compiles against this header without the CUDA toolkit.
 *
 * A CUDA backend is created on one device for one ring -- a CKKS context's
 * data primes (tsafe_backend_cuda_create) or a BFV context's two primes
 * (tsafe_backend_cuda_create_bfv) -- and then used through the generic calls
 * of tensafe/backend.h (buffers, batched NTT, element-wise ops, rescale,
 * mul_acc, mod_switch, synchronize). Results are bit-identical to the CPU
 * backend's. A tsafe_backend_mul_acc call is one kernel launch over all its
 * jobs and terms (more only beyond 32 jobs / 160 terms, or where a job
 * reads another job's accumulator, which keeps the CPU's job order);
 * operand buffers are ordinary device buffers. Tested bit for bit against
 * the CPU backend on H100 and H200 GPUs (test_cuda_conformance,
 * test_cuda_seal) and, without a GPU, through a host emulation of the
 * kernel bodies.
 *
 * Work is queued on the backend's own CUDA stream: tsafe_buffer_upload
 * returns once the source array may be reused (the copy
 * to the device may still be in flight), tsafe_buffer_download returns when
 * the data is in the caller's array. Independent adapters run concurrently
 * when each uses its own backend (one stream each).
 *
 * Device memory comes from a per-backend pool (slabs reserved at creation,
 * grown rarely), never from one cudaMalloc per buffer.
 *
 * Errors: every CUDA failure becomes a status (TSAFE_E_DEVICE,
 * TSAFE_E_NO_DEVICE, TSAFE_E_NOMEM, ...) and a readable message available
 * through tsafe_cuda_last_error() on the failing thread. Nothing aborts or
 * prints.
 *
 * Waiting: a thread waiting on a backend's work (a download, a seal
 * batch, synchronize) waits as the environment variable TSAFE_CUDA_SYNC
 * says when the backend is created: "spin", "yield" or "blocking"
 * (cudaSetDeviceFlags on the device, process-wide; unset: the runtime's
 * default, which spins while the process has fewer active contexts than
 * cores). Another value fails creation with TSAFE_E_ARG.
 *
 * Seal batches: a seal batch's copies and launches are captured as a
 * CUDA graph per shape (sealings, reads) and replayed by one launch (a few
 * per backend, least recently used dropped); a capture that fails falls
 * back to direct launches, and TSAFE_CUDA_SEAL_GRAPH=0 (read once) turns
 * graphs off.
 *
 * Thread safety: the free functions here are thread-safe. A backend and its
 * buffers belong to one thread at a time (as every backend). The backend
 * borrows its context, which must outlive it.
 *
 * Build: present when the SDK was built with nvcc (`make CUDA=auto|1`);
 * machine code for sm_80 and sm_90 plus compute_90 PTX. */
#ifndef TENSAFE_CUDA_H
#define TENSAFE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/backend.h"
#include "tensafe/ckks.h"
#include "tensafe/export.h"
#include "tensafe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices. Returns TSAFE_OK with *count = 0 when
 * there is no driver or no device (the reason is then in
 * tsafe_cuda_last_error()); TSAFE_E_NULL when count is NULL. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_cuda_device_count(int *count);

/* Name of device `device` ("NVIDIA H100 80GB HBM3") into buf (cap bytes,
 * NUL-terminated, truncated when longer), with its compute capability. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_cuda_device_name(
    int device, char *buf, size_t cap, int *cc_major, int *cc_minor);

/* Free and total memory of device `device` in bytes. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_cuda_mem_info(int device,
                                                           size_t *free_bytes,
                                                           size_t *total_bytes);

/* Create a CUDA backend for ctx on device `device` (0-based). Uploads the
 * NTT tables once and reserves the buffer pool and pinned staging buffers.
 * TSAFE_E_NO_DEVICE when there is no such (or no supported) device,
 * TSAFE_E_NOMEM when device or pinned memory runs out, TSAFE_E_DEVICE for
 * other CUDA failures. Free with tsafe_backend_free. The calling thread's
 * current device is left unchanged. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_cuda_create(
    const tsafe_context *ctx, int device, tsafe_backend **out);

/* The same over the limbs of an exact (BFV) context: the sealed
 * protocol's ring (N = 4096, q0 ~ 2^49, q1 q2 ~ 2^60: three IFMA limbs). Serves the batched NTT,
 * element-wise ops, tsafe_backend_mul_acc and tsafe_backend_mod_switch;
 * tsafe_backend_rescale returns TSAFE_E_UNSUPPORTED (as on the CPU
 * backend: that ring switches in coefficient form). Errors, ownership and
 * the device as for tsafe_backend_cuda_create; ctx must outlive the
 * backend. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_backend_cuda_create_bfv(
    const tsafe_bfv_context *ctx, int device, tsafe_backend **out);

/* A backend factory (tensafe/backend.h) that creates CUDA backends on
 * device 0 for either ring (tsafe_backend_cuda_create or _create_bfv).
 * Static storage: never NULL, never freed. Without a usable device its
 * create() fails with TSAFE_E_NO_DEVICE (it does not fall back to the
 * CPU; a host that wants that falls back itself). For another device,
 * write a factory whose create() calls the constructors above. */
TSAFE_API const tsafe_backend_factory *tsafe_backend_cuda_factory(void);

/* 1 when b is a CUDA backend. */
TSAFE_API int tsafe_backend_is_cuda(const tsafe_backend *b);

/* The device address of a CUDA backend buffer (a `uint64_t *` in device
 * memory, layout of tensafe/backend.h), for hosts whose model runs on the
 * same GPU. Borrowed: valid until tsafe_buffer_free. Work queued on the
 * backend's stream may still be writing it: call tsafe_backend_synchronize
 * first. TSAFE_E_ARG when buf does not belong to a CUDA backend. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_cuda_buffer_device_pointer(
    const tsafe_buffer *buf, void **out);

/* Graph capture of a per-token pipeline (CUDA graphs): between begin and
 * end, the backend's NTT / element-wise / rescale / mul_acc / mod_switch
 * calls are recorded instead of run; launch replays the recorded work (asynchronously; a
 * download or tsafe_backend_synchronize waits for it). During a capture,
 * buffer alloc/upload/download and synchronize are refused with
 * TSAFE_E_STATE: allocate and fill buffers before begin (a buffer freed
 * during a capture keeps its device memory reserved until the backend is
 * freed: the graph may still use it). The replay reads
 * and writes the same buffers as the capture, so upload new inputs into
 * them between launches. A second end replaces the previous graph. The
 * buffers a graph uses must outlive its last launch. begin and end may be
 * called from different threads (the backend may move between threads;
 * one thread at a time). When end fails in the runtime and the stream is
 * still being captured, the capture stays open (calls stay refused) and
 * end may be called again; the backend's destruction closes it. */
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_cuda_graph_begin(tsafe_backend *b);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_cuda_graph_end(tsafe_backend *b);
TSAFE_API TSAFE_NODISCARD tsafe_status tsafe_cuda_graph_launch(tsafe_backend *b);

/* Where callers of CUDA backends spend their host time, for benchmarks:
 * with the environment variable TSAFE_CUDA_PROFILE set (to anything but
 * "0") when a backend is first used, every backend call (and the parts of
 * a seal_batch call: packing, queueing, waiting, unpacking) adds its wall
 * time to a process-wide row, from every thread and backend. Up to cap
 * rows with calls into rows (rows may be NULL to count); returns how many
 * rows have calls, 0 when profiling is off. reset != 0 zeroes the rows
 * read (a concurrent call may land on either side). Row names are static
 * strings. Thread-safe. */
typedef struct tsafe_cuda_profile_row {
    const char *what;
    uint64_t calls;
    uint64_t items; /* jobs (mul_acc, seal_batch, ct_read), words (copies) */
    double seconds; /* wall time summed over the calls */
} tsafe_cuda_profile_row;

TSAFE_API size_t tsafe_cuda_profile(tsafe_cuda_profile_row *rows, size_t cap, int reset);

/* Message of the last failing CUDA-backend call on this thread (""
 * when none). Static thread-local storage; never NULL. */
TSAFE_API const char *tsafe_cuda_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
