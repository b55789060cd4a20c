/* CUDA devices: how many, their names and memory, and the check every
 * constructor runs on a device index. */
#include <string.h>

#include "cuda_internal.cuh"

extern "C" TSAFE_API tsafe_status tsafe_cuda_device_count(int *count)
{
    if (!count)
        return TSAFE_E_NULL;
    int c = 0;
    cudaError_t e = cudaGetDeviceCount(&c);
    if (e != cudaSuccess) {
        /* no device is not a failure: keep the message (fail also clears
         * the runtime's last error) and report 0 */
        (void)tsafe_cuda_fail(e, "no CUDA device: cudaGetDeviceCount");
        c = 0;
    }
    *count = c;
    return TSAFE_OK;
}

tsafe_status tsafe_cuda_check_device(int device)
{
    int count = 0;
    tsafe_status st = tsafe_cuda_device_count(&count);
    if (st != TSAFE_OK)
        return st;
    if (device < 0)
        return tsafe_cuda_fail_msg(TSAFE_E_ARG, "negative device index %d",
                                   device);
    if (device >= count)
        return count == 0 ? TSAFE_E_NO_DEVICE /* message already set */
                          : tsafe_cuda_fail_msg(TSAFE_E_NO_DEVICE,
                                                "device %d requested, %d present",
                                                device, count);
    return TSAFE_OK;
}

extern "C" TSAFE_API tsafe_status tsafe_cuda_device_name(int device, char *buf,
                                                         size_t cap,
                                                         int *cc_major,
                                                         int *cc_minor)
{
    tsafe_status st = tsafe_cuda_check_device(device);
    if (st != TSAFE_OK)
        return st;
    cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, device);
    if (e != cudaSuccess)
        return tsafe_cuda_fail(e, "cudaGetDeviceProperties");
    if (buf && cap) {
        strncpy(buf, prop.name, cap - 1);
        buf[cap - 1] = 0;
    }
    if (cc_major)
        *cc_major = prop.major;
    if (cc_minor)
        *cc_minor = prop.minor;
    return TSAFE_OK;
}

extern "C" TSAFE_API tsafe_status tsafe_cuda_mem_info(int device,
                                                      size_t *free_bytes,
                                                      size_t *total_bytes)
{
    if (!free_bytes || !total_bytes)
        return TSAFE_E_NULL;
    tsafe_status st = tsafe_cuda_check_device(device);
    if (st != TSAFE_OK)
        return st;
    tsafe_cuda_device_guard g(device);
    if (g.err != cudaSuccess)
        return tsafe_cuda_fail(g.err, "cudaSetDevice");
    cudaError_t e = cudaMemGetInfo(free_bytes, total_bytes);
    return e == cudaSuccess ? TSAFE_OK : tsafe_cuda_fail(e, "cudaMemGetInfo");
}
