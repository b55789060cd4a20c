/* libFuzzer driver: see targets.h for what tsafe_fuzz_session_feed checks. */
#include "fuzz/targets.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)tsafe_fuzz_session_feed(data, size);
    return 0;
}
