/* CUDA errors -> tsafe_status, with a thread-local readable message. */
#include <stdarg.h>
#include <stdio.h>

#include "cuda_internal.cuh"

static thread_local char g_msg[512];

extern "C" TSAFE_API const char *tsafe_cuda_last_error(void) { return g_msg; }

tsafe_status tsafe_cuda_map_error(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return TSAFE_OK;
    case cudaErrorMemoryAllocation:
        return TSAFE_E_NOMEM;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorStubLibrary:
        return TSAFE_E_NO_DEVICE;
    default:
        return TSAFE_E_DEVICE;
    }
}

tsafe_status tsafe_cuda_fail(cudaError_t e, const char *what)
{
    snprintf(g_msg, sizeof(g_msg), "%s: %s (%s)", what, cudaGetErrorString(e),
             cudaGetErrorName(e));
    return tsafe_cuda_map_error(e);
}

tsafe_status tsafe_cuda_fail_msg(tsafe_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof(g_msg), fmt, ap);
    va_end(ap);
    return st;
}
