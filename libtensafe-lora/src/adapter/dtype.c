/* dtype names and sizes, and the half-precision conversions. */
#include <string.h>

#include "safetensors_internal.h"

static const struct {
    tsafe_dtype dtype;
    const char *name;
    size_t size;
} k_dtypes[] = {
    {TSAFE_DTYPE_BOOL, "BOOL", 1},       {TSAFE_DTYPE_U8, "U8", 1},
    {TSAFE_DTYPE_I8, "I8", 1},           {TSAFE_DTYPE_F8_E5M2, "F8_E5M2", 1},
    {TSAFE_DTYPE_F8_E4M3, "F8_E4M3", 1}, {TSAFE_DTYPE_I16, "I16", 2},
    {TSAFE_DTYPE_U16, "U16", 2},         {TSAFE_DTYPE_F16, "F16", 2},
    {TSAFE_DTYPE_BF16, "BF16", 2},       {TSAFE_DTYPE_I32, "I32", 4},
    {TSAFE_DTYPE_U32, "U32", 4},         {TSAFE_DTYPE_F32, "F32", 4},
    {TSAFE_DTYPE_F64, "F64", 8},         {TSAFE_DTYPE_I64, "I64", 8},
    {TSAFE_DTYPE_U64, "U64", 8},
};
#define N_DTYPES (sizeof k_dtypes / sizeof k_dtypes[0])

const char *tsafe_dtype_name(tsafe_dtype dtype)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (k_dtypes[i].dtype == dtype)
            return k_dtypes[i].name;
    return "INVALID";
}

size_t tsafe_dtype_size(tsafe_dtype dtype)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (k_dtypes[i].dtype == dtype)
            return k_dtypes[i].size;
    return 0;
}

tsafe_dtype tsafe_dtype_from_name(const char *name)
{
    if (!name)
        return TSAFE_DTYPE_INVALID;
    for (size_t i = 0; i < N_DTYPES; i++)
        if (strcmp(k_dtypes[i].name, name) == 0)
            return k_dtypes[i].dtype;
    return TSAFE_DTYPE_INVALID;
}

static float bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float tsafe_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) /* inf / NaN: keep the payload, exponent all ones */
        return bits_to_f32(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        if (mant == 0)
            return bits_to_f32(sign);
        /* Subnormal: mant * 2^-24. Normalise so the leading one becomes
         * the implicit bit of a binary32 normal number. */
        int e = -14; /* exponent of the subnormal's "0.mant" form */
        while ((mant & 0x400u) == 0) {
            mant <<= 1;
            e--;
        }
        mant &= 0x3ffu;
        return bits_to_f32(sign | (uint32_t)(e + 127) << 23 | (mant << 13));
    }
    return bits_to_f32(sign | (exp + 112u) << 23 | (mant << 13));
}

float tsafe_bf16_to_f32(uint16_t b)
{
    return bits_to_f32((uint32_t)b << 16);
}

uint16_t tsafe_f32_to_bf16(float f)
{
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: truncate, force quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb; /* round to nearest even; overflow lands on inf */
    return (uint16_t)(u >> 16);
}

uint16_t tsafe_f32_to_f16(float f)
{
    uint32_t u = f32_to_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: keep the top payload bits, force quiet */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* >= 65520 rounds to inf (and inf itself) */
        return (uint16_t)(sign | 0x7c00u);
    uint32_t exp = a >> 23;
    if (exp < 113) {
        /* Result subnormal (or zero): value = a_mant * 2^(exp-150); in units
         * of 2^-24 that is m >> (126 - exp), with m the full significand. */
        if (exp < 102) /* below half the smallest subnormal: rounds to 0 */
            return sign;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - exp; /* 14 .. 24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u)))
            q++; /* may carry into the smallest normal: still correct bits */
        return (uint16_t)(sign | q);
    }
    /* Normal: rebias exponent, round the 13 dropped bits to nearest even;
     * a carry out of the mantissa correctly bumps the exponent. */
    uint32_t r = a - (112u << 23);
    uint32_t lsb = (r >> 13) & 1u;
    r += 0xfffu + lsb;
    return (uint16_t)(sign | (r >> 13));
}
