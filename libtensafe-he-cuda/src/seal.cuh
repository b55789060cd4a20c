/* Batched BFV sealing of the CUDA backend (internal; the seal_batch slot,
 * backend_impl.h API 4): the workspace layout, the per-thread bodies and
 * the order of the stages, shared by the kernels (seal.cu) and the host
 * emulation (emulate.cu), which differ only in how a stage is launched.
 *
 * A call of J jobs with R reads in all works in one device workspace:
 *   upload  acc pointers (J), r bytes (J N), each job's e1 stream key (4
 *           words), offset and nonce, reads (R words: job << 32 | pos),
 *           their additions (R x L, read-major)
 *   e1      J N bytes, expanded here: CBD(21) of the job's ChaCha20 stream
 *   ks      J x KB ChaCha20 blocks (the stream window of each job's e1)
 *   u       J x L x N    NTT(r), the encryption of zero's randomness
 *   w       J x 2 x L x N  acc + u (*) pk, then inverse NTT, e1, reads
 *   s[l]    J x 2 x l x N  after each switch (l = L-1 .. 1)
 *   out     J x N c1 words, then R c0 words (one download)
 * Stages: keystream -> e1 -> expand r -> NTT(u) -> combine -> inverse
 * NTT(w) -> errors (e1
 * on c1, additions at the reads of c0) -> L-1 switches -> gather. Each
 * body computes one output word from its flat index, with the CPU's
 * arithmetic (canonical residues throughout), so the words are those of
 * tsafe_bfv_seal for the same draws. Jobs are independent and each read
 * position of a job is distinct (checked by the caller), so no two
 * threads write one word. */
#ifndef TSAFE_CUDA_SEAL_CUH
#define TSAFE_CUDA_SEAL_CUH

#include "chacha.cuh"
#include "modarith.cuh"
#include "tensafe/backend_impl.h"

#define TSAFE_SEAL_THREADS 256
#define TSAFE_SEAL_MAX_LIMBS 8
/* ChaCha20 blocks of one job's e1 window: 6 N bytes from any offset */
#define TSAFE_SEAL_KB(n) (6 * (uint64_t)(n) / 64 + 2)

typedef struct tsafe_seal_args {
    const tsafe_cuda_prime *primes;
    uint32_t log_n, L;
    uint64_t n_jobs, n_reads;
    const uint64_t *const *acc;  /* J accumulators (2 x L x N each) */
    const uint64_t *pk;          /* 2 x L x N, NTT form */
    const int8_t *r;             /* J x N */
    int8_t *e1;                  /* J x N, expanded on the device */
    const uint32_t *key;         /* J x 8 words: the e1 streams' keys */
    const uint64_t *e1_off, *e1_stream; /* J each */
    uint32_t *ks;                /* J x TSAFE_SEAL_KB(N) blocks of 16 words */
    const uint64_t *reads;       /* R: job << 32 | pos */
    const uint64_t *add;         /* R x L */
    uint64_t *u, *w;
    const uint64_t *last;        /* J x 2 x 1 x N: after the last switch */
    uint64_t *out;               /* J x N, then R */
} tsafe_seal_args;

/* Word offsets of the workspace's parts for J jobs and R reads. */
typedef struct tsafe_seal_layout {
    uint64_t upload_words; /* acc pointers .. additions */
    uint64_t r_off, key_off, eoff_off, estream_off, reads_off, add_off;
    uint64_t e1_off, ks_off;
    uint64_t u_off, w_off;
    uint64_t s_off[TSAFE_SEAL_MAX_LIMBS]; /* s_off[l], 1 <= l < L */
    uint64_t out_off, out_words, total_words;
} tsafe_seal_layout;

static inline void tsafe_seal_layout_make(uint64_t J, uint64_t R, uint32_t L, uint32_t log_n,
                                          tsafe_seal_layout *y)
{
    uint64_t N = 1ull << log_n, o = J;
    y->r_off = o;
    o += J * N / 8;
    y->key_off = o;
    o += 4 * J;
    y->eoff_off = o;
    o += J;
    y->estream_off = o;
    o += J;
    y->reads_off = o;
    o += R;
    y->add_off = o;
    o += R * L;
    y->upload_words = o;
    y->e1_off = o;
    o += J * N / 8;
    o = (o + 1) & ~1ull; /* 16-byte alignment of the blocks and polynomials */
    y->ks_off = o;
    o += J * TSAFE_SEAL_KB(N) * 8;
    y->u_off = o;
    o += J * L * N;
    y->w_off = o;
    o += 2 * J * L * N;
    for (uint32_t l = L - 1; l >= 1; l--) {
        y->s_off[l] = o;
        o += 2 * J * l * N;
    }
    y->out_off = o;
    y->out_words = J * N + R;
    y->total_words = o + y->out_words;
}

/* The stages that are plain bodies (the NTTs and switches are the
 * backend's own launches). */
enum { TSAFE_SEAL_KEYSTREAM, TSAFE_SEAL_CBD, TSAFE_SEAL_EXPAND, TSAFE_SEAL_COMBINE,
       TSAFE_SEAL_E1, TSAFE_SEAL_READS, TSAFE_SEAL_GATHER };

/* Threads a body stage needs. */
TSAFE_HD uint64_t tsafe_seal_count(const tsafe_seal_args &g, int stage)
{
    uint64_t N = 1ull << g.log_n;
    switch (stage) {
    case TSAFE_SEAL_KEYSTREAM: return g.n_jobs * TSAFE_SEAL_KB(N);
    case TSAFE_SEAL_CBD: return g.n_jobs * N;
    case TSAFE_SEAL_EXPAND: return g.n_jobs * g.L * N;
    case TSAFE_SEAL_COMBINE: return 2 * g.n_jobs * g.L * N;
    case TSAFE_SEAL_E1: return g.n_jobs * g.L * N;
    case TSAFE_SEAL_READS: return g.n_reads * g.L;
    default: return g.n_jobs * N + g.n_reads;
    }
}

/* Launch geometry of a body stage, the device's and the emulation's:
 * blocks of TSAFE_SEAL_THREADS threads, thread x = block * threads + t;
 * TSAFE_E_RANGE beyond one launch's grid. */
static inline tsafe_status tsafe_seal_blocks(const tsafe_seal_args &g, int stage,
                                             uint64_t *blocks)
{
    *blocks = (tsafe_seal_count(g, stage) + TSAFE_SEAL_THREADS - 1) / TSAFE_SEAL_THREADS;
    return *blocks > 0x7fffffffull ? TSAFE_E_RANGE : TSAFE_OK;
}

TSAFE_HD uint64_t ts_from_i8(int8_t v, uint64_t q)
{
    return v < 0 ? q - (uint64_t)(-(int64_t)v) : (uint64_t)v;
}

TSAFE_HD int ts_popc64(uint64_t v)
{
#if defined(__CUDA_ARCH__)
    return __popcll(v);
#else
    return __builtin_popcountll(v);
#endif
}

/* block b of job j's e1 window (from the block holding its offset) */
TSAFE_HD void tsafe_seal_keystream(const tsafe_seal_args &g, uint64_t x)
{
    uint64_t kb = TSAFE_SEAL_KB(1ull << g.log_n), j = x / kb, b = x % kb;
    ts_chacha20_block(g.key + 8 * j, g.e1_off[j] / 64 + b, g.e1_stream[j], g.ks + 16 * x);
}

/* e1[j][k]: the binomial sample of the 6 bytes at e1_off + 6 k (low 42
 * bits: popcount of 21 minus popcount of the next 21), as tsafe_prng_cbd_tight */
TSAFE_HD void tsafe_seal_cbd(const tsafe_seal_args &g, uint64_t x)
{
    uint64_t kb = TSAFE_SEAL_KB(1ull << g.log_n), j = x >> g.log_n, k = x & ((1ull << g.log_n) - 1);
    const uint8_t *w = (const uint8_t *)(g.ks + 16 * kb * j) + g.e1_off[j] % 64 + 6 * k;
    uint64_t v = 0;
    for (int i = 0; i < 6; i++)
        v |= (uint64_t)w[i] << (8 * i);
    g.e1[x] = (int8_t)(ts_popc64(v & 0x1FFFFFull) - ts_popc64((v >> 21) & 0x1FFFFFull));
}

/* u[j][i][k] = r_j[k] mod q_i */
TSAFE_HD void tsafe_seal_expand(const tsafe_seal_args &g, uint64_t x)
{
    uint64_t N = 1ull << g.log_n, k = x & (N - 1), row = x >> g.log_n;
    uint64_t j = row / g.L;
    uint32_t i = (uint32_t)(row % g.L);
    g.u[x] = ts_from_i8(g.r[(j << g.log_n) + k], g.primes[i].q);
}

/* w[j][p][i][k] = acc_j[p][i][k] + u[j][i][k] pk[p][i][k] */
TSAFE_HD void tsafe_seal_combine(const tsafe_seal_args &g, uint64_t x)
{
    uint64_t N = 1ull << g.log_n, LN = (uint64_t)g.L << g.log_n;
    uint64_t j = x / (2 * LN), rem = x % (2 * LN), k = rem & (N - 1);
    uint32_t i = (uint32_t)((rem >> g.log_n) % g.L);
    const tsafe_cuda_prime &p = g.primes[i];
    uint64_t prod = ts_mul_mod(g.u[j * LN + ((uint64_t)i << g.log_n) + k], g.pk[rem], p);
    g.w[x] = ts_add_mod(g.acc[j][rem], prod, p.q);
}

/* c1 of w (coefficient form) += e1 */
TSAFE_HD void tsafe_seal_e1(const tsafe_seal_args &g, uint64_t x)
{
    uint64_t N = 1ull << g.log_n, LN = (uint64_t)g.L << g.log_n;
    uint64_t j = x / LN, rem = x % LN, k = rem & (N - 1);
    uint32_t i = (uint32_t)(rem >> g.log_n);
    uint64_t q = g.primes[i].q, *y = g.w + j * 2 * LN + LN + rem;
    *y = ts_add_mod(*y, ts_from_i8(g.e1[(j << g.log_n) + k], q), q);
}

/* c0 of w at read m, limb i += its addition */
TSAFE_HD void tsafe_seal_read(const tsafe_seal_args &g, uint64_t x)
{
    uint64_t m = x / g.L, LN = (uint64_t)g.L << g.log_n;
    uint32_t i = (uint32_t)(x % g.L);
    uint64_t j = g.reads[m] >> 32, pos = g.reads[m] & 0xffffffffull;
    uint64_t q = g.primes[i].q, *y = g.w + j * 2 * LN + ((uint64_t)i << g.log_n) + pos;
    *y = ts_add_mod(*y, g.add[m * g.L + i], q);
}

/* out: c1 of every job, then c0 at every read (q0: one limb left) */
TSAFE_HD void tsafe_seal_gather(const tsafe_seal_args &g, uint64_t x)
{
    uint64_t N = 1ull << g.log_n, JN = g.n_jobs << g.log_n;
    if (x < JN) {
        uint64_t j = x >> g.log_n, k = x & (N - 1);
        g.out[x] = g.last[((2 * j + 1) << g.log_n) + k];
    } else {
        uint64_t m = x - JN, j = g.reads[m] >> 32, pos = g.reads[m] & 0xffffffffull;
        g.out[x] = g.last[((2 * j) << g.log_n) + pos];
    }
}

TSAFE_HD void tsafe_seal_body(const tsafe_seal_args &g, int stage, uint64_t x)
{
    if (x >= tsafe_seal_count(g, stage))
        return;
    switch (stage) {
    case TSAFE_SEAL_KEYSTREAM: tsafe_seal_keystream(g, x); break;
    case TSAFE_SEAL_CBD: tsafe_seal_cbd(g, x); break;
    case TSAFE_SEAL_EXPAND: tsafe_seal_expand(g, x); break;
    case TSAFE_SEAL_COMBINE: tsafe_seal_combine(g, x); break;
    case TSAFE_SEAL_E1: tsafe_seal_e1(g, x); break;
    case TSAFE_SEAL_READS: tsafe_seal_read(g, x); break;
    default: tsafe_seal_gather(g, x); break;
    }
}

/* The host side of a call: the upload area (ws: the workspace as the host
 * writes it; accp: each job's accumulator address as the stages read it)
 * and the arguments over the workspace at dev (the device's, or the same
 * host memory in the emulation). */
static inline void tsafe_seal_pack(const tsafe_backend_seal_job *jobs, size_t J, uint32_t L,
                                   uint32_t log_n, const tsafe_seal_layout &y,
                                   uint64_t *ws)
{
    uint64_t N = 1ull << log_n, m = 0;
    for (size_t j = 0; j < J; j++) {
        ws[j] = (uint64_t)(uintptr_t)jobs[j].acc;
        memcpy((uint8_t *)(ws + y.r_off) + j * N, jobs[j].r, N);
        memcpy(ws + y.key_off + 4 * j, jobs[j].e1_key, 32);
        ws[y.eoff_off + j] = jobs[j].e1_off;
        ws[y.estream_off + j] = jobs[j].e1_stream;
        for (size_t k = 0; k < jobs[j].n_reads; k++, m++) {
            ws[y.reads_off + m] = (uint64_t)j << 32 | jobs[j].pos[k];
            for (uint32_t i = 0; i < L; i++) /* limb-major in, read-major here */
                ws[y.add_off + m * L + i] = jobs[j].add[i * jobs[j].n_reads + k];
        }
    }
}

static inline tsafe_seal_args tsafe_seal_args_make(const tsafe_seal_layout &y, uint64_t *dev,
                                                   const tsafe_cuda_prime *primes,
                                                   uint32_t L, uint32_t log_n, uint64_t J,
                                                   uint64_t R, const uint64_t *pk)
{
    tsafe_seal_args g;
    g.primes = primes;
    g.log_n = log_n;
    g.L = L;
    g.n_jobs = J;
    g.n_reads = R;
    g.acc = (const uint64_t *const *)dev;
    g.pk = pk;
    g.r = (const int8_t *)(dev + y.r_off);
    g.e1 = (int8_t *)(dev + y.e1_off);
    g.key = (const uint32_t *)(dev + y.key_off);
    g.e1_off = dev + y.eoff_off;
    g.e1_stream = dev + y.estream_off;
    g.ks = (uint32_t *)(dev + y.ks_off);
    g.reads = dev + y.reads_off;
    g.add = dev + y.add_off;
    g.u = dev + y.u_off;
    g.w = dev + y.w_off;
    g.last = L > 1 ? dev + y.s_off[1] : g.w;
    g.out = dev + y.out_off;
    return g;
}

/* The stages in order on executor X: X::body(g, stage) runs a body stage
 * over tsafe_seal_count threads; X::ntt(forward, data, polys, limbs) and
 * X::mod_switch(out, in, polys, limbs_in) are the backend's. */
template <class X>
tsafe_status tsafe_seal_stages(X &x, const tsafe_seal_args &g, const tsafe_seal_layout &y,
                               uint64_t *dev)
{
    tsafe_status st;
    if ((st = x.body(g, TSAFE_SEAL_KEYSTREAM)) != TSAFE_OK ||
        (st = x.body(g, TSAFE_SEAL_CBD)) != TSAFE_OK ||
        (st = x.body(g, TSAFE_SEAL_EXPAND)) != TSAFE_OK ||
        (st = x.ntt(1, g.u, g.n_jobs, g.L)) != TSAFE_OK ||
        (st = x.body(g, TSAFE_SEAL_COMBINE)) != TSAFE_OK ||
        (st = x.ntt(0, g.w, 2 * g.n_jobs, g.L)) != TSAFE_OK ||
        (st = x.body(g, TSAFE_SEAL_E1)) != TSAFE_OK ||
        (g.n_reads && (st = x.body(g, TSAFE_SEAL_READS)) != TSAFE_OK))
        return st;
    const uint64_t *from = g.w;
    for (uint32_t l = g.L - 1; l >= 1; l--) {
        if ((st = x.mod_switch(dev + y.s_off[l], from, 2 * g.n_jobs, l + 1)) != TSAFE_OK)
            return st;
        from = dev + y.s_off[l];
    }
    return x.body(g, TSAFE_SEAL_GATHER);
}

/* The downloaded out area into the jobs' host arrays. */
static inline void tsafe_seal_unpack(const uint64_t *out, const tsafe_backend_seal_job *jobs,
                                     size_t J, uint32_t log_n)
{
    uint64_t N = 1ull << log_n;
    const uint64_t *c0 = out + J * N;
    for (size_t j = 0; j < J; j++) {
        memcpy(jobs[j].c1, out + j * N, N * sizeof *out);
        memcpy(jobs[j].c0, c0, jobs[j].n_reads * sizeof *out);
        c0 += jobs[j].n_reads;
    }
}

#endif
