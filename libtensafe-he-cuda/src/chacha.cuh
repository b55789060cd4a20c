/* ChaCha20 on the device (internal), shared by the sealing's e1 stream
 * (seal.cuh) and the expansion of ciphertext seeds (expand.cuh): the
 * library PRNG's stream (common/prng.c), computed by one thread a block. */
#ifndef TSAFE_CUDA_CHACHA_CUH
#define TSAFE_CUDA_CHACHA_CUH

#include "modarith.cuh"

/* ChaCha20 (DJB's: 64-bit block counter, 64-bit nonce), the stream of
 * the library's PRNG (common/prng.c): block `ctr` of key k into out. */
TSAFE_HD uint32_t ts_rotl(uint32_t v, int c) { return (v << c) | (v >> (32 - c)); }

#define TS_QR(a, b, c, d)                                                       \
    do {                                                                        \
        a += b; d = ts_rotl(d ^ a, 16);                                         \
        c += d; b = ts_rotl(b ^ c, 12);                                         \
        a += b; d = ts_rotl(d ^ a, 8);                                          \
        c += d; b = ts_rotl(b ^ c, 7);                                          \
    } while (0)

TSAFE_HD void ts_chacha20_block(const uint32_t *k, uint64_t ctr, uint64_t nonce, uint32_t *out)
{
    uint32_t x[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u,
                      k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7],
                      (uint32_t)ctr, (uint32_t)(ctr >> 32),
                      (uint32_t)nonce, (uint32_t)(nonce >> 32)};
    uint32_t s[16];
    for (int i = 0; i < 16; i++)
        s[i] = x[i];
    for (int r = 0; r < 10; r++) {
        TS_QR(x[0], x[4], x[8], x[12]);
        TS_QR(x[1], x[5], x[9], x[13]);
        TS_QR(x[2], x[6], x[10], x[14]);
        TS_QR(x[3], x[7], x[11], x[15]);
        TS_QR(x[0], x[5], x[10], x[15]);
        TS_QR(x[1], x[6], x[11], x[12]);
        TS_QR(x[2], x[7], x[8], x[13]);
        TS_QR(x[3], x[4], x[9], x[14]);
    }
    for (int i = 0; i < 16; i++)
        out[i] = x[i] + s[i];
}

#endif
