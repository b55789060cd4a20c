/* The resettable randombytes stream of tsafe_test_stream.h (splitmix64). */
#include <string.h>

#include <sodium.h>

#include "tsafe_test_stream.h"

static uint64_t g_state;

static uint64_t next64(void)
{
    uint64_t z = (g_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static const char *rb_name(void) { return "test-stream"; }
static uint32_t rb_random(void) { return (uint32_t)next64(); }
static void rb_stir(void) {}
static uint32_t rb_uniform(const uint32_t upper) { return upper ? (uint32_t)(next64() % upper) : 0; }
static void rb_buf(void *const buf, const size_t size)
{
    uint8_t *p = buf;
    for (size_t i = 0; i < size; i += 8) {
        uint64_t v = next64();
        memcpy(p + i, &v, size - i < 8 ? size - i : 8);
    }
}
static int rb_close(void) { return 0; }
static randombytes_implementation k_stream = {rb_name, rb_random, rb_stir, rb_uniform, rb_buf,
                                              rb_close};

int tsafe_test_stream_install(void)
{
    return randombytes_set_implementation(&k_stream);
}

void tsafe_test_stream_reset(uint64_t state)
{
    g_state = state;
}
