/* Batched sealing (tsafe_bfv_seal_batch, the backend's seal_batch slot)
 * against one tsafe_bfv_seal_buffer per item on the CPU backend with the
 * same seeds, word for word (c1 and c0 at the reads): on the CPU backend
 * (no slot: item by item), on the host emulation of the CUDA kernels
 * (a CPU backend whose seal_batch slot runs the emulation: the library's
 * host draws, then the kernels' own bodies and stage order), and on a GPU
 * when one is present (else "skipped: no CUDA device"). Items of 0, 1,
 * 32, 300 and N reads, masks and none, several chunks' worth of jobs on
 * the device. Also per-token plaintexts encoded on a buffer that is not
 * host memory (the backend's NTT). Fresh seed per run
 * (TSAFE_TEST_SEED=<n> replays). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/backend.h"
#include "tensafe/backend_impl.h"
#include "tensafe/bfv.h"
#include "tensafe/bfv_backend.h"
#include "support/tsafe_test_rng.h"
#include "../libtensafe-he-core/src/bfv/bfv_internal.h"
#include "../libtensafe-he-core/src/common/prng.h"

#ifdef TSAFE_WITH_CUDA
#include "tensafe/cuda.h"
#include "../libtensafe-he-cuda/src/emulate.h"
#endif

typedef struct {
    tsafe_bfv_context *c;
    tsafe_bfv_public_key *pk;
    tsafe_backend *cpu;
    size_t n, J;
    uint32_t L;
    uint64_t **acc;   /* J x 2 L N words, NTT form */
    uint32_t **pos;
    uint64_t **mask;  /* NULL for some jobs */
    size_t *reads;
    uint8_t (*seed)[32];
} seal_spec;

static void spec_make(seal_spec *s, size_t J)
{
    memset(s, 0, sizeof *s);
    tsafe_bfv_params p = {12, 49, 60, 37, 0}; /* the sealed ring */
    assert_int_equal(tsafe_bfv_context_create(&p, &s->c), TSAFE_OK);
    tsafe_bfv_secret_key *sk = NULL;
    assert_int_equal(tsafe_bfv_secret_key_generate(s->c, NULL, &sk), TSAFE_OK);
    assert_int_equal(tsafe_bfv_public_key_generate(s->c, sk, NULL, &s->pk), TSAFE_OK);
    tsafe_bfv_secret_key_free(sk);
    assert_int_equal(tsafe_backend_cpu_create_bfv(s->c, &s->cpu), TSAFE_OK);
    s->n = tsafe_bfv_context_n(s->c);
    s->L = tsafe_bfv_context_limbs(s->c);
    s->J = J;
    s->acc = calloc(J, sizeof *s->acc);
    s->pos = calloc(J, sizeof *s->pos);
    s->mask = calloc(J, sizeof *s->mask);
    s->reads = calloc(J, sizeof *s->reads);
    s->seed = calloc(J, sizeof *s->seed);
    assert_true(s->acc && s->pos && s->mask && s->reads && s->seed);
    const size_t kinds[] = {32, 0, 1, 300, 32, 4096};
    for (size_t j = 0; j < J; j++) {
        size_t w = 2 * (size_t)s->L * s->n;
        s->acc[j] = malloc(w * sizeof **s->acc);
        assert_non_null(s->acc[j]);
        for (size_t p2 = 0; p2 < 2; p2++)
            for (uint32_t i = 0; i < s->L; i++) {
                uint64_t q = tsafe_backend_prime(s->cpu, i);
                uint64_t *l = s->acc[j] + (p2 * s->L + i) * s->n;
                for (size_t k = 0; k < s->n; k++)
                    l[k] = tsafe_test_below(q);
                l[0] = q - 1; /* edges */
                l[1] = 0;
            }
        size_t nr = kinds[j % 6] > s->n ? s->n : kinds[j % 6];
        s->reads[j] = nr;
        s->pos[j] = malloc((nr ? nr : 1) * sizeof **s->pos);
        /* distinct positions: a random offset and odd stride mod N */
        size_t off = tsafe_test_below(s->n), stride = 2 * tsafe_test_below(s->n / 2) + 1;
        for (size_t k = 0; k < nr; k++)
            s->pos[j][k] = (uint32_t)((off + k * stride) % s->n);
        if (j % 2 == 0) {
            s->mask[j] = malloc((nr ? nr : 1) * sizeof **s->mask);
            for (size_t k = 0; k < nr; k++)
                s->mask[j][k] = tsafe_test_below(1ull << 37);
        }
        tsafe_test_seed32(s->seed[j]);
    }
}

static void spec_free(seal_spec *s)
{
    for (size_t j = 0; j < s->J; j++) {
        free(s->acc[j]);
        free(s->pos[j]);
        free(s->mask[j]);
    }
    free(s->acc);
    free(s->pos);
    free(s->mask);
    free(s->reads);
    free(s->seed);
    tsafe_backend_free(s->cpu);
    tsafe_bfv_public_key_free(s->pk);
    tsafe_bfv_context_free(s->c);
}

/* Every job sealed on backend b by one tsafe_bfv_seal_batch call (batch)
 * or by one tsafe_bfv_seal_buffer each (the reference); the results. */
static tsafe_bfv_sealed **seal_on(const seal_spec *s, tsafe_backend *b, int batch)
{
    tsafe_bfv_sealer *sl = NULL;
    tsafe_buffer *pk = NULL;
    assert_int_equal(tsafe_bfv_sealer_create(s->c, b, &sl), TSAFE_OK);
    assert_int_equal(tsafe_bfv_public_key_operand(s->pk, b, &pk), TSAFE_OK);
    tsafe_bfv_sealed **out = calloc(s->J, sizeof *out);
    tsafe_buffer **acc = calloc(s->J, sizeof *acc);
    tsafe_bfv_seal_item *it = calloc(s->J, sizeof *it);
    assert_true(out && acc && it);
    for (size_t j = 0; j < s->J; j++) {
        assert_int_equal(tsafe_bfv_sealed_create(s->c, s->n, &out[j]), TSAFE_OK);
        assert_int_equal(tsafe_buffer_alloc(b, 2, s->L, &acc[j]), TSAFE_OK);
        assert_int_equal(tsafe_buffer_upload(acc[j], s->acc[j], 2 * s->L * s->n), TSAFE_OK);
        it[j] = (tsafe_bfv_seal_item){acc[j], s->pos[j], s->mask[j], s->reads[j],
                                      s->seed[j], out[j]};
        if (!batch)
            assert_int_equal(tsafe_bfv_seal_buffer(sl, acc[j], pk, s->pos[j], s->mask[j],
                                                   s->reads[j], 30, s->seed[j], out[j]),
                             TSAFE_OK);
    }
    if (batch) {
        tsafe_status st = tsafe_bfv_seal_batch(sl, pk, it, s->J, 30);
        if (st != TSAFE_OK)
            print_error("seal batch on %s: %s\n", tsafe_backend_name(b), tsafe_strerror(st));
        assert_int_equal(st, TSAFE_OK);
    }
    for (size_t j = 0; j < s->J; j++)
        tsafe_buffer_free(acc[j]);
    free(acc);
    free(it);
    tsafe_buffer_free(pk);
    tsafe_bfv_sealer_free(sl);
    return out;
}

static void expect_same_seals(const seal_spec *s, tsafe_bfv_sealed **got,
                              tsafe_bfv_sealed **want, const char *what)
{
    for (size_t j = 0; j < s->J; j++) {
        const uint64_t *g1 = tsafe_bfv_sealed_c1(got[j]), *w1 = tsafe_bfv_sealed_c1(want[j]);
        const uint64_t *g0 = tsafe_bfv_sealed_c0(got[j]), *w0 = tsafe_bfv_sealed_c0(want[j]);
        for (size_t k = 0; k < s->n; k++)
            if (g1[k] != w1[k]) {
                print_error("%s: job %zu c1[%zu] %llu != %llu\n", what, j, k,
                            (unsigned long long)g1[k], (unsigned long long)w1[k]);
                fail();
            }
        for (size_t k = 0; k < s->reads[j]; k++)
            if (g0[k] != w0[k]) {
                print_error("%s: job %zu c0[%zu] %llu != %llu\n", what, j, k,
                            (unsigned long long)g0[k], (unsigned long long)w0[k]);
                fail();
            }
    }
}

static void seals_free(const seal_spec *s, tsafe_bfv_sealed **r)
{
    for (size_t j = 0; j < s->J; j++)
        tsafe_bfv_sealed_free(r[j]);
    free(r);
}

/* No slot: tsafe_bfv_seal_batch is one seal_buffer per item. */
static void test_batch_cpu(void **state)
{
    (void)state;
    seal_spec s;
    spec_make(&s, 7);
    assert_int_equal(tsafe_bfv_sealer_batches(NULL), 0);
    tsafe_bfv_sealed **want = seal_on(&s, s.cpu, 0), **got = seal_on(&s, s.cpu, 1);
    expect_same_seals(&s, got, want, "cpu batch");
    seals_free(&s, want);
    seals_free(&s, got);
    spec_free(&s);
}

/* The batch's host draws (tsafe_bfv_seal_draw_lean) are tsafe_bfv_seal's
 * with e1 left in the stream at the offset they return: r and the read
 * additions equal, and the stream read from (key, offset) gives e1. */
static void test_lean_draws(void **state)
{
    (void)state;
    seal_spec s;
    spec_make(&s, 6);
    size_t n = s.n;
    int8_t *r0 = malloc(n), *e10 = malloc(n), *e00 = malloc(n), *r1 = malloc(n),
           *e01 = malloc(n), *e1s = malloc(n);
    uint64_t *a0 = malloc(3 * n * sizeof *a0), *a1 = malloc(3 * n * sizeof *a1);
    assert_true(r0 && e10 && e00 && r1 && e01 && e1s && a0 && a1);
    for (size_t j = 0; j < s.J; j++) {
        seal_draw d0 = {r0, e10, e00, a0}, d1 = {r1, NULL, e01, a1};
        uint8_t key[32];
        uint64_t off = 0;
        assert_int_equal(tsafe_bfv_seal_draw(s.c, s.seed[j], s.mask[j], s.reads[j], 30, 1, &d0),
                         TSAFE_OK);
        assert_int_equal(tsafe_bfv_seal_draw_lean(s.c, s.seed[j], s.mask[j], s.reads[j], 30,
                                                  &d1, key, &off),
                         TSAFE_OK);
        assert_memory_equal(r0, r1, n);
        assert_memory_equal(a0, a1, s.L * s.reads[j] * sizeof *a0);
        assert_memory_equal(key, s.seed[j], 32); /* the master seed is the stream's key */
        tsafe_prng g;
        tsafe_prng_init(&g, key, TSAFE_BFV_STREAM_SEAL);
        tsafe_prng_seek(&g, off);
        assert_int_equal(tsafe_prng_offset(&g), off);
        tsafe_prng_cbd_tight(&g, e1s, n);
        assert_memory_equal(e1s, e10, n);
#ifdef TSAFE_WITH_CUDA
        /* and the device's expansion (its kernels' bodies, emulated) */
        memset(e1s, 0x55, n);
        assert_int_equal(tsafe_cuda_emu_seal_e1(key, off, TSAFE_BFV_STREAM_SEAL, 12, e1s),
                         TSAFE_OK);
        assert_memory_equal(e1s, e10, n);
#endif
    }
    free(r0);
    free(e10);
    free(e00);
    free(r1);
    free(e01);
    free(e1s);
    free(a0);
    free(a1);
    spec_free(&s);
}

/* Bad items are refused before any work, on every backend. */
static void test_batch_refuses(void **state)
{
    (void)state;
    seal_spec s;
    spec_make(&s, 2);
    tsafe_bfv_sealer *sl = NULL;
    tsafe_buffer *pk = NULL, *acc = NULL, *small = NULL;
    tsafe_bfv_sealed *out = NULL;
    assert_int_equal(tsafe_bfv_sealer_create(s.c, s.cpu, &sl), TSAFE_OK);
    assert_int_equal(tsafe_bfv_public_key_operand(s.pk, s.cpu, &pk), TSAFE_OK);
    assert_int_equal(tsafe_buffer_alloc(s.cpu, 2, s.L, &acc), TSAFE_OK);
    assert_int_equal(tsafe_buffer_alloc(s.cpu, 1, s.L, &small), TSAFE_OK);
    assert_int_equal(tsafe_bfv_sealed_create(s.c, 4, &out), TSAFE_OK);
    uint32_t pos[5] = {1, 2, 3, 4, 5}, twice[2] = {7, 7};
    tsafe_bfv_seal_item it = {acc, pos, NULL, 4, NULL, out};
    assert_int_equal(tsafe_bfv_seal_batch(sl, pk, &it, 1, 30), TSAFE_OK);
    assert_int_equal(tsafe_bfv_seal_batch(sl, pk, NULL, 0, 30), TSAFE_OK);
    assert_int_equal(tsafe_bfv_seal_batch(NULL, pk, &it, 1, 30), TSAFE_E_NULL);
    assert_int_equal(tsafe_bfv_seal_batch(sl, acc, &it, 1, 30), TSAFE_E_RANGE); /* not a key */
    it.n_reads = 5; /* beyond out's capacity */
    assert_int_equal(tsafe_bfv_seal_batch(sl, pk, &it, 1, 30), TSAFE_E_RANGE);
    it = (tsafe_bfv_seal_item){acc, twice, NULL, 2, NULL, out};
    assert_int_equal(tsafe_bfv_seal_batch(sl, pk, &it, 1, 30), TSAFE_E_ARG);
    it = (tsafe_bfv_seal_item){small, pos, NULL, 1, NULL, out};
    assert_int_equal(tsafe_bfv_seal_batch(sl, pk, &it, 1, 30), TSAFE_E_RANGE);
    it = (tsafe_bfv_seal_item){acc, pos, NULL, 1, NULL, NULL};
    assert_int_equal(tsafe_bfv_seal_batch(sl, pk, &it, 1, 30), TSAFE_E_NULL);
    it = (tsafe_bfv_seal_item){acc, pos, NULL, 1, NULL, out};
    assert_int_equal(tsafe_bfv_seal_batch(sl, pk, &it, 1, 101), TSAFE_E_RANGE);
    tsafe_bfv_sealed_free(out);
    tsafe_buffer_free(small);
    tsafe_buffer_free(acc);
    tsafe_buffer_free(pk);
    tsafe_bfv_sealer_free(sl);
    spec_free(&s);
}

/* tsafe_bfv_plain_encode_buffer on a buffer that is not host memory
 * (residues uploaded, the backend's own NTT) gives the words of the host
 * path: a CPU backend that hides its host words stands in for a device. */
static void nohost_destroy(tsafe_backend *b) { (void)b; }

static void encode_words(const seal_spec *s, tsafe_backend *b, const int64_t *co, size_t n,
                         uint64_t *out)
{
    tsafe_buffer *buf = NULL;
    assert_int_equal(tsafe_buffer_alloc(b, 1, s->L, &buf), TSAFE_OK);
    assert_int_equal(tsafe_bfv_plain_encode_buffer(s->c, co, n, buf), TSAFE_OK);
    assert_int_equal(tsafe_buffer_download(buf, out, (size_t)s->L * s->n), TSAFE_OK);
    tsafe_buffer_free(buf);
}

/* s's CPU backend with its host words hidden (every move an upload or a
 * download, as a device's), through iface (static: it outlives b), with
 * the ct_read slot given (NULL: none). */
static tsafe_backend *nohost_make(const seal_spec *s, struct tsafe_backend_i *iface,
                                  tsafe_status (*ct_read)(tsafe_backend *,
                                                          const tsafe_backend_ct_job *, size_t,
                                                          uint64_t))
{
    *iface = *s->cpu->iface;
    iface->destroy = nohost_destroy;
    iface->host_words = NULL;
    iface->ct_read = ct_read;
    tsafe_backend *b = NULL;
    assert_int_equal(tsafe_backend_init_bfv(&b, TSAFE_BACKEND_API_VERSION, iface, s->cpu->ctx,
                                            s->c),
                     TSAFE_OK);
    return b;
}

static void test_encode_not_host(void **state)
{
    (void)state;
    seal_spec s;
    spec_make(&s, 1);
    static struct tsafe_backend_i iface;
    tsafe_backend *b = nohost_make(&s, &iface, NULL);
    size_t words = (size_t)s.L * s.n;
    int64_t *co = malloc(s.n * sizeof *co);
    uint64_t *want = malloc(words * sizeof *want), *got = malloc(words * sizeof *got);
    assert_true(co && want && got);
    for (size_t k = 0; k < s.n; k++) /* weights of either sign, some large */
        co[k] = (int64_t)tsafe_test_below(1ull << 40) - ((int64_t)1 << 39);
    for (size_t n = 1; n <= s.n; n *= 8) {
        encode_words(&s, s.cpu, co, n, want);
        encode_words(&s, b, co, n, got);
        assert_memory_equal(got, want, words * sizeof *got);
    }
    free(co);
    free(want);
    free(got);
    tsafe_backend_free(b);
    spec_free(&s);
}

#ifdef TSAFE_WITH_CUDA
/* ------------------------------------------------ emulated slot */

/* A CPU backend whose seal_batch slot runs the emulation: its state is
 * the CPU backend's (borrowed), its operands plain host words. */
static tsafe_cuda_emu *g_emu;
static struct tsafe_backend_i g_emu_iface;

static void emu_destroy(tsafe_backend *b) { (void)b; }

static tsafe_status emu_slot(tsafe_backend *b, const void *pk,
                             const tsafe_backend_seal_job *jobs, size_t n)
{
    (void)b;
    return tsafe_cuda_emu_seal_batch(g_emu, pk, jobs, n);
}

/* A sealer on b seals in batches (b has the seal_batch slot). */
static void expect_batches(const seal_spec *s, tsafe_backend *b)
{
    tsafe_bfv_sealer *sl = NULL;
    assert_int_equal(tsafe_bfv_sealer_create(s->c, b, &sl), TSAFE_OK);
    assert_int_equal(tsafe_bfv_sealer_batches(sl), 1);
    tsafe_bfv_sealer_free(sl);
}

static void test_batch_emulated(void **state)
{
    (void)state;
    seal_spec s;
    spec_make(&s, 13);
    assert_int_equal(tsafe_cuda_emu_create_ring(s.cpu, 14, &g_emu), TSAFE_OK);
    g_emu_iface = *s.cpu->iface;
    g_emu_iface.destroy = emu_destroy;
    g_emu_iface.operand_alloc = NULL;
    g_emu_iface.operand_upload = NULL;
    g_emu_iface.operand_free = NULL;
    g_emu_iface.seal_batch = emu_slot;
    tsafe_backend *b = NULL;
    assert_int_equal(tsafe_backend_init_bfv(&b, TSAFE_BACKEND_API_VERSION, &g_emu_iface,
                                            s.cpu->ctx, s.c),
                     TSAFE_OK);
    expect_batches(&s, b);
    tsafe_bfv_sealed **want = seal_on(&s, s.cpu, 0), **got = seal_on(&s, b, 1);
    expect_same_seals(&s, got, want, "emulated batch");
    seals_free(&s, got);
    /* a batch is a function of its draws: other seeds, other words */
    s.seed[0][0] ^= 1;
    got = seal_on(&s, b, 1);
    assert_memory_not_equal(tsafe_bfv_sealed_c1(got[0]), tsafe_bfv_sealed_c1(want[0]),
                            s.n * sizeof(uint64_t));
    seals_free(&s, got);
    seals_free(&s, want);
    tsafe_backend_free(b);
    tsafe_cuda_emu_free(g_emu);
    spec_free(&s);
}

/* ------------------------------------------------ ct_read (API 5) */

enum { CT_N = 70 }; /* more than one launch's 64 */

/* CT_N ciphertexts' bytes, one after the other (*ctl bytes each). */
static uint8_t *ct_bytes(const seal_spec *s, size_t *ctl)
{
    tsafe_bfv_secret_key *sk = NULL;
    tsafe_bfv_ct *ct = NULL;
    assert_int_equal(tsafe_bfv_secret_key_generate(s->c, NULL, &sk), TSAFE_OK);
    assert_int_equal(tsafe_bfv_ct_create(s->c, &ct), TSAFE_OK);
    *ctl = tsafe_bfv_ct_bytes(s->c);
    uint8_t *buf = malloc(CT_N * *ctl);
    int64_t *m = malloc(s->n * sizeof *m);
    assert_true(buf && m);
    for (size_t j = 0; j < CT_N; j++) {
        for (size_t k = 0; k < s->n; k++)
            m[k] = (int64_t)tsafe_test_below(1u << 20) - (1 << 19);
        assert_int_equal(tsafe_bfv_encrypt(s->c, sk, m, s->n, NULL, ct), TSAFE_OK);
        assert_int_equal(tsafe_bfv_ct_write(s->c, ct, buf + j * *ctl, *ctl), TSAFE_OK);
    }
    free(m);
    tsafe_bfv_ct_free(ct);
    tsafe_bfv_secret_key_free(sk);
    return buf;
}

/* The words tsafe_bfv_ct_read_buffers gives on backend b. */
static uint64_t *ct_words(const seal_spec *s, tsafe_backend *b, const uint8_t *buf, size_t ctl)
{
    size_t words = 2 * (size_t)s->L * s->n;
    uint64_t *out = malloc(CT_N * words * sizeof *out);
    tsafe_buffer *dst[CT_N];
    for (size_t j = 0; j < CT_N; j++)
        assert_int_equal(tsafe_buffer_alloc(b, 2, s->L, &dst[j]), TSAFE_OK);
    assert_int_equal(tsafe_bfv_ct_read_buffers(s->c, buf, ctl, CT_N, dst), TSAFE_OK);
    for (size_t j = 0; j < CT_N; j++) {
        assert_int_equal(tsafe_buffer_download(dst[j], out + j * words, words), TSAFE_OK);
        tsafe_buffer_free(dst[j]);
    }
    return out;
}

/* A CPU backend that hides its host words and reads ciphertexts through
 * the emulated slot: what the library does with a device's ct_read. */
static tsafe_backend *g_ct_inner;
static int g_ct_calls;

static tsafe_status emu_ct_read(tsafe_backend *b, const tsafe_backend_ct_job *jobs, size_t n,
                                uint64_t stream)
{
    g_ct_calls++;
    uint32_t L = tsafe_backend_max_limbs(b), log_n = tsafe_backend_log_n(b);
    size_t words = (size_t)L << log_n;
    uint64_t q[8];
    for (uint32_t i = 0; i < L; i++)
        q[i] = tsafe_backend_prime(b, i);
    for (size_t j = 0; j < n; j++) {
        uint64_t *w = g_ct_inner->iface->host_words(g_ct_inner, jobs[j].mem);
        memcpy(w, jobs[j].c0, words * sizeof *w);
        tsafe_status st = tsafe_cuda_emu_expand(jobs[j].seed, stream, q, L, log_n, w + words);
        if (st != TSAFE_OK)
            return st;
    }
    return TSAFE_OK;
}

static void test_ct_read_emulated(void **state)
{
    (void)state;
    seal_spec s;
    spec_make(&s, 1);
    static struct tsafe_backend_i iface;
    g_ct_inner = s.cpu;
    tsafe_backend *b = nohost_make(&s, &iface, emu_ct_read);
    size_t ctl, words = 2 * (size_t)s.L * s.n;
    uint8_t *buf = ct_bytes(&s, &ctl);
    uint64_t *want = ct_words(&s, s.cpu, buf, ctl);
    g_ct_calls = 0;
    uint64_t *got = ct_words(&s, b, buf, ctl);
    assert_int_equal(g_ct_calls, 1); /* the whole group in one slot call */
    assert_memory_equal(got, want, CT_N * words * sizeof *got);
    free(got);
    /* spread ciphertexts (tsafe_bfv_ct_read_buffers_at), in reverse order:
     * one slot call, each buffer the words of the ciphertext it was given */
    {
        const uint8_t *at[CT_N];
        tsafe_buffer *dst[CT_N];
        uint64_t *w = malloc(words * sizeof *w);
        assert_non_null(w);
        for (size_t j = 0; j < CT_N; j++) {
            at[j] = buf + (CT_N - 1 - j) * ctl;
            assert_int_equal(tsafe_buffer_alloc(b, 2, s.L, &dst[j]), TSAFE_OK);
        }
        g_ct_calls = 0;
        assert_int_equal(tsafe_bfv_ct_read_buffers_at(s.c, at, ctl, CT_N, dst), TSAFE_OK);
        assert_int_equal(g_ct_calls, 1);
        for (size_t j = 0; j < CT_N; j++) {
            assert_int_equal(tsafe_buffer_download(dst[j], w, words), TSAFE_OK);
            assert_memory_equal(w, want + (CT_N - 1 - j) * words, words * sizeof *w);
            tsafe_buffer_free(dst[j]);
        }
        free(w);
    }
    /* one at a time, and a refused ciphertext (a residue >= q) refused */
    tsafe_buffer *one = NULL;
    assert_int_equal(tsafe_buffer_alloc(b, 2, s.L, &one), TSAFE_OK);
    assert_int_equal(tsafe_bfv_ct_read_buffer(s.c, buf, ctl, one), TSAFE_OK);
    memset(buf + 32, 0xFF, 7);
    g_ct_calls = 0;
    assert_int_not_equal(tsafe_bfv_ct_read_buffer(s.c, buf, ctl, one), TSAFE_OK);
    assert_int_equal(g_ct_calls, 0); /* refused before the slot */
    tsafe_buffer_free(one);
    free(want);
    free(buf);
    tsafe_backend_free(b);
    spec_free(&s);
}

/* The expansion's bodies against the host sampler on primes that reject
 * often (just above a power of two: about half the candidates), small and
 * large, and on ones that almost never do. */
static void test_expand_rejections(void **state)
{
    (void)state;
    const uint64_t q[] = {(1ull << 40) + 27, (1ull << 30) + 3, (1ull << 49) - 81,
                          (1ull << 16) + 1, (1ull << 61) + 1};
    enum { LOGN = 12, L = sizeof q / sizeof q[0] };
    size_t n = 1u << LOGN;
    uint64_t *got = malloc(L * n * sizeof *got), *want = malloc(n * sizeof *want);
    assert_true(got && want);
    for (int rep = 0; rep < 4; rep++) {
        uint8_t seed[32];
        tsafe_test_seed32(seed);
        assert_int_equal(tsafe_cuda_emu_expand(seed, 0xBF00, q, L, LOGN, got), TSAFE_OK);
        for (uint32_t i = 0; i < L; i++) {
            tsafe_prng g;
            tsafe_prng_init(&g, seed, 0xBF00 + i);
            tsafe_prng_uniform_mod_tight(&g, q[i], want, n);
            tsafe_prng_clear(&g);
            assert_memory_equal(got + i * n, want, n * sizeof *want);
        }
    }
    free(got);
    free(want);
}

/* ------------------------------------------------------- on a GPU */

static void test_batch_gpu(void **state)
{
    (void)state;
    int devices = 0;
    if (tsafe_cuda_device_count(&devices) != TSAFE_OK || devices == 0) {
        print_message("skipped: no CUDA device\n");
        skip();
        return;
    }
    /* 300 jobs: one chunk, then (TSAFE_CUDA_SEAL_MAX_JOBS) chunks of 64 */
    seal_spec s;
    spec_make(&s, 300);
    tsafe_backend *b = NULL;
    tsafe_status st = tsafe_backend_cuda_create_bfv(s.c, 0, &b);
    if (st != TSAFE_OK)
        print_error("cuda create: %s\n", tsafe_cuda_last_error());
    assert_int_equal(st, TSAFE_OK);
    expect_batches(&s, b);
    tsafe_bfv_sealed **want = seal_on(&s, s.cpu, 0), **got = seal_on(&s, b, 1);
    expect_same_seals(&s, got, want, "GPU batch");
    seals_free(&s, got);
    /* the same shape again: the replay of the graph the first call
     * captured (unless TSAFE_CUDA_SEAL_GRAPH=0) */
    got = seal_on(&s, b, 1);
    expect_same_seals(&s, got, want, "GPU batch, same shape again");
    seals_free(&s, got);
    setenv("TSAFE_CUDA_SEAL_MAX_JOBS", "64", 1);
    got = seal_on(&s, b, 1);
    unsetenv("TSAFE_CUDA_SEAL_MAX_JOBS");
    expect_same_seals(&s, got, want, "GPU batch in chunks of 64");
    seals_free(&s, got);
    /* per-token plaintexts encoded on the device (its NTT) */
    {
        size_t words = (size_t)s.L * s.n;
        int64_t *co = malloc(s.n * sizeof *co);
        uint64_t *w1 = malloc(words * sizeof *w1), *w2 = malloc(words * sizeof *w2);
        assert_true(co && w1 && w2);
        for (size_t k = 0; k < s.n; k++)
            co[k] = (int64_t)tsafe_test_below(1ull << 40) - ((int64_t)1 << 39);
        encode_words(&s, s.cpu, co, s.n, w1);
        encode_words(&s, b, co, s.n, w2);
        assert_memory_equal(w2, w1, words * sizeof *w1);
        free(co);
        free(w1);
        free(w2);
    }
    /* and item by item on the device (the slot unused) agrees too */
    got = seal_on(&s, b, 0);
    expect_same_seals(&s, got, want, "GPU one at a time");
    seals_free(&s, got);
    seals_free(&s, want);
    /* query and share ciphertexts: c1 expanded from the seeds on the
     * device, CT_N of them (two launches) */
    {
        size_t ctl, words = 2 * (size_t)s.L * s.n;
        uint8_t *buf = ct_bytes(&s, &ctl);
        uint64_t *host = ct_words(&s, s.cpu, buf, ctl), *dev = ct_words(&s, b, buf, ctl);
        assert_memory_equal(dev, host, CT_N * words * sizeof *dev);
        free(dev);
        /* the c0 words in several uploads of 7 (the last one short) */
        setenv("TSAFE_CUDA_READ_MAX_JOBS", "7", 1);
        dev = ct_words(&s, b, buf, ctl);
        unsetenv("TSAFE_CUDA_READ_MAX_JOBS");
        assert_memory_equal(dev, host, CT_N * words * sizeof *dev);
        free(host);
        free(dev);
        free(buf);
    }
    tsafe_backend_free(b);
    spec_free(&s);
}

#else /* built without CUDA: the CPU half runs */

static void test_no_cuda_build(void **state)
{
    (void)state;
    print_message("skipped: built without CUDA (the emulated and GPU seal "
                  "batches need the CUDA library)\n");
    skip();
}
#endif /* TSAFE_WITH_CUDA */

int main(void)
{
    tsafe_test_rng_init("test_cuda_seal");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_cpu),
        cmocka_unit_test(test_lean_draws),
        cmocka_unit_test(test_batch_refuses),
        cmocka_unit_test(test_encode_not_host),
#ifdef TSAFE_WITH_CUDA
        cmocka_unit_test(test_batch_emulated),
        cmocka_unit_test(test_ct_read_emulated),
        cmocka_unit_test(test_expand_rejections),
        cmocka_unit_test(test_batch_gpu),
#else
        cmocka_unit_test(test_no_cuda_build),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
