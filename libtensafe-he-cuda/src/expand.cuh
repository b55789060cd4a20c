/* Ciphertext seeds expanded on the device (internal; the ct_read slot,
 * backend_impl.h API 5): c1 limb i of a ciphertext is the uniform
 * sampling of tsafe_bfv_expand_a -- ChaCha20 with key = the 32-byte seed,
 * nonce = stream + i, counter from 0; each candidate the next
 * ceil(bits_i / 8) bytes little-endian, masked to bits_i, kept when below
 * q_i -- so a server need not run the ChaCha20 of every query and share
 * ciphertext on its CPU (a quarter of sealed-private's host side on a
 * device backend, measured with a backend that does no ring work).
 *
 * One thread block per (ciphertext, limb) in rounds of
 * TSAFE_EXPAND_ROUND candidates: the round's keystream blocks into shared
 * memory (phase KEYSTREAM), each thread its TSAFE_EXPAND_PER consecutive
 * candidates (CANDIDATES), thread 0 the prefix of the threads' counts
 * (SCAN), each thread its kept values at their place in c1 (PLACE), thread
 * 0 the round's total (ADVANCE), until N values are kept. The phases are
 * the bodies below, between barriers; the emulation (emulate.cu) runs a
 * block's threads in turn per phase, so both give the host's words. */
#ifndef TSAFE_CUDA_EXPAND_CUH
#define TSAFE_CUDA_EXPAND_CUH

#include "chacha.cuh"
#include "modarith.cuh"

#define TSAFE_EXPAND_THREADS 256
#define TSAFE_EXPAND_PER 4
#define TSAFE_EXPAND_ROUND (TSAFE_EXPAND_THREADS * TSAFE_EXPAND_PER)
/* keystream blocks of a round: 8 bytes a candidate at most, from any offset */
#define TSAFE_EXPAND_KS_BLOCKS (TSAFE_EXPAND_ROUND * 8 / 64 + 2)
/* ciphertexts per launch (their pointers and keys travel as arguments) */
#define TSAFE_EXPAND_MAX_JOBS 64 /* 3.2 KB of launch arguments (4 KB limit) */
#define TSAFE_EXPAND_MAX_LIMBS 8

typedef struct tsafe_expand_shared {
    uint32_t ks[TSAFE_EXPAND_KS_BLOCKS * 16];
    uint64_t val[TSAFE_EXPAND_ROUND];
    uint8_t keep[TSAFE_EXPAND_ROUND];
    uint32_t count[TSAFE_EXPAND_THREADS]; /* kept per thread, then their prefix */
    uint64_t cand;                        /* the round's first candidate */
    uint64_t kept;                        /* values placed before the round */
    uint32_t total;                       /* kept in the round */
} tsafe_expand_shared;

/* One (ciphertext, limb): its key, nonce, prime and output limb, and the
 * prime's bit length (ts_expand_block_make). */
typedef struct tsafe_expand_block {
    const uint32_t *key;
    uint64_t nonce, q;
    uint64_t *out; /* N words */
    uint64_t n;
    uint32_t bits; /* of q: a candidate is ceil(bits / 8) bytes masked to bits */
} tsafe_expand_block;

TSAFE_HD tsafe_expand_block ts_expand_block_make(const uint32_t *key, uint64_t nonce, uint64_t q,
                                                 uint64_t *out, uint64_t n)
{
    uint32_t bits = 0;
    while (bits < 64 && (q >> bits) != 0)
        bits++;
    return tsafe_expand_block{key, nonce, q, out, n, bits};
}

/* The round's keystream: blocks from the one holding its first byte. */
TSAFE_HD void ts_expand_keystream(const tsafe_expand_block &b, tsafe_expand_shared &sh,
                                  uint32_t t)
{
    uint64_t nb = (b.bits + 7) / 8, first = sh.cand * nb / 64;
    uint64_t last = ((sh.cand + TSAFE_EXPAND_ROUND) * nb + 63) / 64; /* exclusive */
    for (uint64_t k = t; first + k < last; k += TSAFE_EXPAND_THREADS)
        ts_chacha20_block(b.key, first + k, b.nonce, sh.ks + 16 * k);
}

/* Thread t's candidates 4t .. 4t + 3 of the round. */
TSAFE_HD void ts_expand_candidates(const tsafe_expand_block &b, tsafe_expand_shared &sh,
                                   uint32_t t)
{
    uint64_t nb = (b.bits + 7) / 8, base = (sh.cand * nb / 64) * 64;
    uint64_t mask = b.bits >= 64 ? ~0ull : (1ull << b.bits) - 1;
    const uint8_t *w = (const uint8_t *)sh.ks;
    uint32_t kept = 0;
    for (uint32_t m = 0; m < TSAFE_EXPAND_PER; m++) {
        uint64_t c = (uint64_t)t * TSAFE_EXPAND_PER + m, off = (sh.cand + c) * nb - base, v = 0;
        for (uint64_t i = 0; i < nb; i++)
            v |= (uint64_t)w[off + i] << (8 * i);
        v &= mask;
        sh.val[c] = v;
        sh.keep[c] = v < b.q;
        kept += sh.keep[c];
    }
    sh.count[t] = kept;
}

/* Thread 0: count[t] becomes the values kept before thread t's. */
TSAFE_HD void ts_expand_scan(tsafe_expand_shared &sh)
{
    uint32_t run = 0;
    for (uint32_t t = 0; t < TSAFE_EXPAND_THREADS; t++) {
        uint32_t c = sh.count[t];
        sh.count[t] = run;
        run += c;
    }
    sh.total = run;
}

/* Thread t's kept values at their places (the first N in all). */
TSAFE_HD void ts_expand_place(const tsafe_expand_block &b, tsafe_expand_shared &sh, uint32_t t)
{
    uint64_t at = sh.kept + sh.count[t];
    for (uint32_t m = 0; m < TSAFE_EXPAND_PER; m++) {
        uint64_t c = (uint64_t)t * TSAFE_EXPAND_PER + m;
        if (sh.keep[c]) {
            if (at < b.n)
                b.out[at] = sh.val[c];
            at++;
        }
    }
}

/* Thread 0, after the round. */
TSAFE_HD void ts_expand_advance(tsafe_expand_shared &sh)
{
    sh.kept += sh.total;
    sh.cand += TSAFE_EXPAND_ROUND;
}

#endif
