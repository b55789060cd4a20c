/* The CUDA backend's call profile (profile.cuh; tsafe_cuda_profile). */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.cuh"
#include "profile.cuh"

int tsafe_cuda_prof_on = -1;

static uint64_t g_calls[TSAFE_PROF_ROWS], g_ns[TSAFE_PROF_ROWS], g_items[TSAFE_PROF_ROWS];

static const char *const k_names[TSAFE_PROF_ROWS] = {
    "buffer_alloc", "buffer_free", "buffer_upload", "buffer_download",
    "ntt", "elementwise", "mul_acc", "mod_switch", "synchronize",
    "seal_batch", "seal_batch: pack", "seal_batch: queue", "seal_batch: wait",
    "seal_batch: unpack", "ct_read",
};

int tsafe_cuda_prof_enabled_slow(void)
{
    return tsafe_cuda_env_flag(&tsafe_cuda_prof_on, "TSAFE_CUDA_PROFILE", 0);
}

void tsafe_cuda_prof_add(int row, uint64_t ns, uint64_t items)
{
    __atomic_fetch_add(&g_calls[row], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&g_ns[row], ns, __ATOMIC_RELAXED);
    __atomic_fetch_add(&g_items[row], items, __ATOMIC_RELAXED);
}

extern "C" TSAFE_API size_t tsafe_cuda_profile(tsafe_cuda_profile_row *rows, size_t cap,
                                               int reset)
{
    if (!tsafe_cuda_prof_enabled())
        return 0;
    size_t n = 0;
    for (int i = 0; i < TSAFE_PROF_ROWS; i++) {
        uint64_t c = reset ? __atomic_exchange_n(&g_calls[i], 0, __ATOMIC_RELAXED)
                           : __atomic_load_n(&g_calls[i], __ATOMIC_RELAXED);
        uint64_t ns = reset ? __atomic_exchange_n(&g_ns[i], 0, __ATOMIC_RELAXED)
                            : __atomic_load_n(&g_ns[i], __ATOMIC_RELAXED);
        uint64_t it = reset ? __atomic_exchange_n(&g_items[i], 0, __ATOMIC_RELAXED)
                            : __atomic_load_n(&g_items[i], __ATOMIC_RELAXED);
        if (!c)
            continue;
        if (rows && n < cap)
            rows[n] = tsafe_cuda_profile_row{k_names[i], c, it, ns * 1e-9};
        n++;
    }
    return n;
}
