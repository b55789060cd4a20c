/* Parameter presets, the 128-bit security table and the params encoding. */
#include <math.h>
#include <string.h>

#include "ckks_internal.h"
#include "../common/bytes.h"

typedef struct {
    const char *name;
    uint32_t log_n;
    uint32_t n_primes;
    uint32_t bits[8];
    uint32_t n_special;
    int scale_log2;
} preset;

/* The seeds' sets keep SEAL's trailing special prime (counted for security,
 * unused here); the IFMA sets use primes below 2^50 for the 52-bit path. */
static const preset k_presets[] = {
    {"seed-n16384", 14, 4, {60, 40, 40, 60}, 1, 40},
    {"seed-n32768", 15, 5, {60, 40, 40, 40, 60}, 1, 40},
    {"ifma-n4096", 12, 2, {50, 50}, 0, 40},
    {"ifma-n8192", 13, 3, {50, 50, 50}, 0, 40},
    {"ifma-n16384", 14, 5, {50, 40, 40, 40, 50}, 0, 40},
};

size_t tsafe_params_preset_count(void)
{
    return sizeof k_presets / sizeof k_presets[0];
}

const char *tsafe_params_preset_name(size_t i)
{
    return i < tsafe_params_preset_count() ? k_presets[i].name : NULL;
}

tsafe_status tsafe_params_preset(const char *name, tsafe_params *out)
{
    if (!name || !out)
        return TSAFE_E_NULL;
    for (size_t i = 0; i < tsafe_params_preset_count(); i++) {
        const preset *p = &k_presets[i];
        if (strcmp(p->name, name) != 0)
            continue;
        memset(out, 0, sizeof *out);
        out->log_n = p->log_n;
        out->n_primes = p->n_primes;
        for (uint32_t j = 0; j < p->n_primes; j++)
            out->prime_bits[j] = p->bits[j];
        out->n_special = p->n_special;
        out->scale = ldexp(1.0, p->scale_log2);
        return TSAFE_OK;
    }
    return TSAFE_E_NOT_FOUND;
}

/* Largest log2(Q) for 128-bit classical security with a uniform ternary
 * secret. Sources, one per row (docs/PARAMETERS.md says the same):
 *   N = 1024 .. 32768: Albrecht et al., "Homomorphic Encryption Security
 *     Standard", HomomorphicEncryption.org, Nov 2018, ternary-secret table,
 *     128-bit classical column (also SEAL 4.x util/hestdparms.h).
 *   N = 65536: the standard has no row; OpenFHE's table
 *     (src/core/lib/lattice/stdlatticeparms.cpp, HEStd_ternary,
 *     HEStd_128_classic) gives 1747 since v1.2.0 (PR #807, June 2024, which
 *     re-estimated the 1772 it had carried since 2023).
 * Any other N has no cited bound and is refused (0). */
uint32_t tsafe_params_max_log_q(uint32_t log_n)
{
    switch (log_n) {
    case 10: return 27;
    case 11: return 54;
    case 12: return 109;
    case 13: return 218;
    case 14: return 438;
    case 15: return 881;
    case 16: return 1747;
    default: return 0;
    }
}

/* Encoding: "TSHP" | version u8 | 3 reserved zero bytes | log_n u32 |
 * n_primes u32 | n_special u32 | flags u32 | scale f64 | bits u32[n] |
 * primes u64[n] (0 = generate). Little-endian. */
#define PARAMS_MAGIC "TSHP"
#define PARAMS_VERSION 1

tsafe_status tsafe_params_serialize(const tsafe_params *p, uint8_t *buf,
                                    size_t cap, size_t *written)
{
    if (!p || !written || (!buf && cap))
        return TSAFE_E_NULL;
    if (p->n_primes == 0 || p->n_primes > TSAFE_MAX_PRIMES)
        return TSAFE_E_PARAMS;
    size_t need = 4 + 4 + 4 * 4 + 8 + (size_t)p->n_primes * 12;
    *written = need;
    if (cap < need)
        return TSAFE_E_BUFFER_SMALL;
    tsafe_writer w = {buf, cap, 0};
    tsafe_put_bytes(&w, PARAMS_MAGIC, 4);
    tsafe_put_u8(&w, PARAMS_VERSION);
    tsafe_put_u8(&w, 0);
    tsafe_put_u8(&w, 0);
    tsafe_put_u8(&w, 0);
    tsafe_put_u32(&w, p->log_n);
    tsafe_put_u32(&w, p->n_primes);
    tsafe_put_u32(&w, p->n_special);
    tsafe_put_u32(&w, p->flags);
    tsafe_put_f64(&w, p->scale);
    for (uint32_t i = 0; i < p->n_primes; i++)
        tsafe_put_u32(&w, p->prime_bits[i]);
    for (uint32_t i = 0; i < p->n_primes; i++)
        tsafe_put_u64(&w, p->primes[i]);
    return TSAFE_OK;
}

tsafe_status tsafe_params_deserialize(const uint8_t *buf, size_t len,
                                      tsafe_params *out)
{
    if (!buf || !out)
        return TSAFE_E_NULL;
    tsafe_reader r = {buf, len, 0};
    uint8_t magic[4], ver, res[3];
    uint32_t n_primes;
    tsafe_params p;
    memset(&p, 0, sizeof p);
    if (!tsafe_get_bytes(&r, magic, 4))
        return TSAFE_E_TRUNCATED;
    if (memcmp(magic, PARAMS_MAGIC, 4) != 0)
        return memcmp(magic, "TSHE", 4) == 0 ? TSAFE_E_KIND : TSAFE_E_FORMAT;
    if (!tsafe_get_u8(&r, &ver) || !tsafe_get_bytes(&r, res, 3))
        return TSAFE_E_TRUNCATED;
    if (ver != PARAMS_VERSION)
        return TSAFE_E_VERSION;
    if (res[0] | res[1] | res[2])
        return TSAFE_E_FORMAT;
    if (!tsafe_get_u32(&r, &p.log_n) || !tsafe_get_u32(&r, &n_primes) ||
        !tsafe_get_u32(&r, &p.n_special) || !tsafe_get_u32(&r, &p.flags) ||
        !tsafe_get_f64(&r, &p.scale))
        return TSAFE_E_TRUNCATED;
    if (n_primes == 0 || n_primes > TSAFE_MAX_PRIMES)
        return TSAFE_E_FORMAT;
    p.n_primes = n_primes;
    for (uint32_t i = 0; i < n_primes; i++)
        if (!tsafe_get_u32(&r, &p.prime_bits[i]))
            return TSAFE_E_TRUNCATED;
    for (uint32_t i = 0; i < n_primes; i++)
        if (!tsafe_get_u64(&r, &p.primes[i]))
            return TSAFE_E_TRUNCATED;
    if (r.pos != len)
        return TSAFE_E_FORMAT;
    if (p.log_n < TSAFE_MIN_LOG_N || p.log_n > TSAFE_MAX_LOG_N ||
        p.n_special > 1 || p.n_special >= n_primes || !isfinite(p.scale) ||
        p.scale < 1.0 || (p.flags & ~TSAFE_PARAMS_INSECURE_FOR_TESTS))
        return TSAFE_E_FORMAT;
    *out = p;
    return TSAFE_OK;
}
