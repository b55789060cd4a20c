/* CUDA backend: lists the devices and creates a backend for a CKKS context
 * on each; with no driver or no GPU it says so and exits 0 (a host falls
 * back to the CPU backend). Linked fully static, through pkg-config's
 * --static flags (libcudart_static and its directory come from
 * tensafe-he-cuda.pc); CI builds it whenever the SDK was built with nvcc.
 * Build: cc -std=c11 -o cuda_devices cuda_devices.c $(pkg-config --cflags tensafe-he-cuda) -static $(pkg-config --static --libs tensafe-he-cuda) */
#include <stdio.h>

#include <tensafe/cuda.h>
#include <tensafe/tensafe.h>

#define CHECK(call)                                                            \
    do {                                                                       \
        tsafe_status st_ = (call);                                             \
        if (st_ != TSAFE_OK) {                                                 \
            fprintf(stderr, "%s: %s (%s)\n", #call, tsafe_strerror(st_),       \
                    tsafe_cuda_last_error());                                  \
            return 1;                                                          \
        }                                                                      \
    } while (0)

int main(void)
{
    int count = 0;
    CHECK(tsafe_cuda_device_count(&count));
    if (count == 0) {
        printf("CUDA: %s; skipped (the CPU backend serves)\n", tsafe_cuda_last_error());
        return 0;
    }
    tsafe_params params;
    tsafe_context *ctx = NULL;
    CHECK(tsafe_params_preset("seed-n16384", &params));
    CHECK(tsafe_context_create(&params, &ctx));
    for (int d = 0; d < count; d++) {
        char name[256];
        int major = 0, minor = 0;
        size_t free_b = 0, total_b = 0;
        tsafe_backend *b = NULL;
        CHECK(tsafe_cuda_device_name(d, name, sizeof name, &major, &minor));
        CHECK(tsafe_cuda_mem_info(d, &free_b, &total_b));
        CHECK(tsafe_backend_cuda_create(ctx, d, &b));
        printf("device %d: %s (sm_%d%d), %.1f of %.1f GiB free, backend %s\n", d, name, major,
               minor, (double)free_b / 1073741824.0, (double)total_b / 1073741824.0,
               tsafe_backend_name(b));
        tsafe_backend_free(b);
    }
    tsafe_context_free(ctx);
    return 0;
}
