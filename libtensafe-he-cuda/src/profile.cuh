/* Where a CUDA backend's callers spend their time (internal; the public
 * reader is tsafe_cuda_profile in tensafe/cuda.h). Off unless the
 * environment variable TSAFE_CUDA_PROFILE is set (read once): then each
 * timed scope adds its wall time and one call to its row, from any thread
 * (atomic adds; rows are process-wide, summed over every backend). Off,
 * a scope costs one predictable branch. */
#ifndef TSAFE_CUDA_PROFILE_CUH
#define TSAFE_CUDA_PROFILE_CUH

#include <stdint.h>
#include <time.h>

enum tsafe_cuda_prof_row {
    TSAFE_PROF_ALLOC,
    TSAFE_PROF_FREE,
    TSAFE_PROF_UPLOAD,
    TSAFE_PROF_DOWNLOAD,
    TSAFE_PROF_NTT,
    TSAFE_PROF_ELEMENTWISE,
    TSAFE_PROF_MUL_ACC,
    TSAFE_PROF_MOD_SWITCH,
    TSAFE_PROF_SYNCHRONIZE,
    TSAFE_PROF_SEAL_BATCH,
    TSAFE_PROF_SEAL_PACK,   /* inside seal_batch: the jobs into the pinned area */
    TSAFE_PROF_SEAL_QUEUE,  /* inside seal_batch: the copies and launches queued */
    TSAFE_PROF_SEAL_WAIT,   /* inside seal_batch: the stream's synchronisation */
    TSAFE_PROF_SEAL_UNPACK, /* inside seal_batch: the outputs out of the pinned area */
    TSAFE_PROF_CT_READ,
    TSAFE_PROF_ROWS
};

extern int tsafe_cuda_prof_on; /* -1: not read yet */
int tsafe_cuda_prof_enabled_slow(void);
void tsafe_cuda_prof_add(int row, uint64_t ns, uint64_t items);

static inline int tsafe_cuda_prof_enabled(void)
{
    int on = __atomic_load_n(&tsafe_cuda_prof_on, __ATOMIC_RELAXED);
    return on >= 0 ? on : tsafe_cuda_prof_enabled_slow();
}

static inline uint64_t tsafe_cuda_prof_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Times its own lifetime into one row. */
struct tsafe_cuda_prof_scope {
    int row;
    uint64_t t0, items;
    explicit tsafe_cuda_prof_scope(int r, uint64_t n = 1)
        : row(r), t0(tsafe_cuda_prof_enabled() ? tsafe_cuda_prof_now() : 0), items(n)
    {
    }
    void stop() /* early: the scope's end then adds nothing */
    {
        if (t0)
            tsafe_cuda_prof_add(row, tsafe_cuda_prof_now() - t0, items);
        t0 = 0;
    }
    ~tsafe_cuda_prof_scope() { stop(); }
};

#endif
