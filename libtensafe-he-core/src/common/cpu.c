/* Run-time CPU feature detection, the one place that decides which
 * AVX-512 code may run (cpu.h). Kept out of the *_ifma.c / *_avx512.c
 * files: those are compiled with AVX-512 flags or target attributes and
 * must only run after this check said yes. */
#include "cpu.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* XCR0 bits the OS must save: XMM (1) and YMM (2) for AVX2; for AVX-512
 * also opmask (5), ZMM_Hi256 (6) and Hi16_ZMM (7). */
#define STATE_YMM 0x06u
#define STATE_ZMM 0xE6u

/* Leaf 7's EBX when the OS saves the register state `state`, else 0. */
static unsigned leaf7_ebx_os(uint64_t state)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    if (!(c & (1u << 27))) /* OSXSAVE: XGETBV usable */
        return 0;
    if ((read_xcr0() & state) != state)
        return 0;
    if (__get_cpuid_max(0, NULL) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return b;
}

static int detect(void)
{
    const unsigned need = (1u << 16)   /* AVX512F */
                        | (1u << 17)   /* AVX512DQ */
                        | (1u << 21)   /* AVX512_IFMA */
                        | (1u << 30)   /* AVX512BW */
                        | (1u << 31);  /* AVX512VL */
    return (leaf7_ebx_os(STATE_ZMM) & need) == need;
}

static int detect_f(void)
{
    return (leaf7_ebx_os(STATE_ZMM) & (1u << 16)) != 0; /* AVX512F */
}

static int detect_avx2(void)
{
    return (leaf7_ebx_os(STATE_YMM) & (1u << 5)) != 0; /* AVX2 */
}

/* FMA3 (leaf 1 ECX bit 12); the YMM state was checked with AVX2. */
static int detect_fma(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 12));
}

/* VBMI (byte permutes) and VPOPCNTDQ on top of the IFMA set: the AVX-512
 * samplers (common/prng_avx512.c). */
static int detect_sampling(void)
{
    unsigned a, b, c, d;
    __cpuid_count(7, 0, a, b, c, d); /* leaf 7 exists: detect() said yes */
    const unsigned need = (1u << 1)    /* AVX512_VBMI */
                        | (1u << 14);  /* AVX512_VPOPCNTDQ */
    return (c & need) == need;
}
#else
static int detect(void)
{
    return 0;
}

static int detect_f(void)
{
    return 0;
}

static int detect_avx2(void)
{
    return 0;
}

static int detect_fma(void)
{
    return 0;
}

static int detect_sampling(void)
{
    return 0;
}
#endif

/* A feature answer computed once: -1 = not yet known. Racing first calls
 * compute the same answer. */
static int cached(atomic_int *slot, int (*probe)(void))
{
    int v = atomic_load_explicit(slot, memory_order_relaxed);
    if (v < 0) {
        v = probe();
        atomic_store_explicit(slot, v, memory_order_relaxed);
    }
    return v;
}

static int probe_ifma(void)
{
    const char *env = getenv("TSAFE_DISABLE_IFMA");
    return env && strcmp(env, "1") == 0 ? 0 : detect();
}

/* On top of the IFMA answer, so TSAFE_DISABLE_IFMA turns it off too. */
static int probe_sampling(void)
{
    return tsafe_cpu_has_ifma() ? detect_sampling() : 0;
}

static int probe_avx2(void)
{
    const char *env = getenv("TSAFE_DISABLE_AVX2");
    return env && strcmp(env, "1") == 0 ? 0 : detect_avx2();
}

static atomic_int g_has_ifma = -1, g_has_sampling = -1, g_has_f = -1, g_has_avx2 = -1;

int tsafe_cpu_has_avx2(void)
{
    return cached(&g_has_avx2, probe_avx2);
}

static int probe_avx2_fma(void)
{
    return tsafe_cpu_has_avx2() ? detect_fma() : 0;
}

static atomic_int g_has_avx2_fma = -1;

int tsafe_cpu_has_avx2_fma(void)
{
    return cached(&g_has_avx2_fma, probe_avx2_fma);
}

int tsafe_cpu_has_ifma(void)
{
    return cached(&g_has_ifma, probe_ifma);
}

int tsafe_cpu_has_avx512_sampling(void)
{
    return cached(&g_has_sampling, probe_sampling);
}

int tsafe_cpu_has_avx512f(void)
{
    return cached(&g_has_f, detect_f);
}
