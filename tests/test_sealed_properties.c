/* What the sealed path promises, each pinned by a test that fails when the
 * promise breaks (issue 24; `make mutants` checks that they do):
 *  - the flooding noise actually drawn has the spread the plan states
 *    (both sealing paths), and the plan's flood covers its noise bound;
 *  - key rotation: a hello is required after rotate_after tokens, the
 *    epoch advances, the old epoch's hello and query are refused;
 *  - inputs at the bound |u| = U (where the wrap band of plan versions
 *    before 7 had to decide), fixed seeds, exact deltas;
 *  - shares carry nothing of A, and a client choosing its shares gets
 *    nothing of B's columns back (enough samples to fail);
 *  - DP: the session's sigma is the calibration formula's (recomputed
 *    here), the budget's release count is the accountant's, and the noise
 *    the sealed server sees has that sigma. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/bfv_backend.h"
#include "tensafe/lora_dp.h"
#include "tensafe/lora_sealed.h"
#include "support/tsafe_test_lora.h"
#include "support/tsafe_test_rng.h"
#include "../libtensafe-lora/src/sealed/sealed_internal.h"
#include "../libtensafe-lora/src/sealed/server_internal.h"

/* ------------------------------------------------------------- helpers */

typedef struct {
    tsafe_sealed_plan plan;
    tsafe_sealed_client *c;
    tsafe_sealed_server *s;
    tsafe_sealed_site *site;
    uint32_t d_in, rank, d_out;
    float *A, *B; /* rank x d_in, d_out x rank */
} world;

static void world_open(world *w, tsafe_sealed_mode mode, uint32_t d_in, uint32_t rank,
                       uint32_t d_out, const tsafe_sealed_opts *o, const uint8_t *cseed)
{
    memset(w, 0, sizeof *w);
    w->d_in = d_in, w->rank = rank, w->d_out = d_out;
    assert_int_equal(tsafe_sealed_plan_derive(mode, d_in, rank, d_out, o, &w->plan), TSAFE_OK);
    w->A = malloc((size_t)rank * d_in * sizeof *w->A);
    w->B = malloc((size_t)d_out * rank * sizeof *w->B);
    assert_non_null(w->A);
    assert_non_null(w->B);
    for (size_t i = 0; i < (size_t)rank * d_in; i++)
        w->A[i] = tsafe_test_uniform_float(-1, 1);
    for (size_t i = 0; i < (size_t)d_out * rank; i++)
        w->B[i] = tsafe_test_uniform_float(-1, 1);
    assert_int_equal(tsafe_sealed_client_create(&w->plan, cseed, &w->c), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_create(&w->plan, &w->s), TSAFE_OK);
}

static void world_site(world *w, float scale)
{
    tsafe_sealed_site_free(w->site);
    assert_int_equal(tsafe_sealed_site_create(&w->plan, w->A, w->B, w->rank, w->d_out, scale,
                                              &w->site), TSAFE_OK);
}

static void world_hello(world *w)
{
    uint8_t *h;
    size_t hl;
    assert_int_equal(tsafe_sealed_client_hello(w->c, &h, &hl), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_accept(w->s, h, hl), TSAFE_OK);
    tsafe_lora_bytes_free(h);
}

static void world_close(world *w)
{
    tsafe_sealed_client_free(w->c);
    tsafe_sealed_server_free(w->s);
    tsafe_sealed_site_free(w->site);
    free(w->A);
    free(w->B);
}

/* One whole token; dp NULL = no noise (sealed mode needs allow_no_dp).
 * share/slen: the client's second message is handed back when non-NULL. */
static void run_token(world *w, const float *x, tsafe_dp_session *dp, float *delta,
                      uint8_t **share, size_t *slen)
{
    uint8_t *q, *r1, *sh, *r2;
    size_t ql, r1l, shl, r2l;
    const tsafe_sealed_site *ss = w->site;
    assert_int_equal(tsafe_sealed_client_query(w->c, x, &q, &ql, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_round1(w->s, &ss, 1, q, ql, &r1, &r1l, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_respond(w->c, r1, r1l, 1, &w->rank, &w->d_out, dp,
                                                 dp == NULL, &sh, &shl, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_round2(w->s, &ss, 1, sh, shl, &r2, &r2l, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_finish(w->c, r2, r2l, 1, &w->d_out, &delta, NULL),
                     TSAFE_OK);
    tsafe_lora_bytes_free(q);
    tsafe_lora_bytes_free(r1);
    tsafe_lora_bytes_free(r2);
    if (share) {
        *share = sh;
        *slen = shl;
    } else {
        tsafe_lora_bytes_free(sh);
    }
}

/* delta = scale B A x in doubles (the plaintext reference). */
static void plain_delta(const world *w, const float *x, float scale, double *out)
{
    double *u = calloc(w->rank, sizeof *u);
    for (uint32_t k = 0; k < w->rank; k++)
        for (uint32_t j = 0; j < w->d_in; j++)
            u[k] += (double)w->A[(size_t)k * w->d_in + j] * x[j];
    for (uint32_t o = 0; o < w->d_out; o++) {
        out[o] = 0;
        for (uint32_t k = 0; k < w->rank; k++)
            out[o] += (double)scale * w->B[(size_t)o * w->rank + k] * u[k];
    }
    free(u);
}

static double corr(const double *a, const double *b, size_t n)
{
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < n; i++)
        ma += a[i], mb += b[i];
    ma /= n, mb /= n;
    for (size_t i = 0; i < n; i++) {
        sab += (a[i] - ma) * (b[i] - mb);
        saa += (a[i] - ma) * (a[i] - ma);
        sbb += (b[i] - mb) * (b[i] - mb);
    }
    return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : 0;
}

/* The last `rank` u64 of a sealed-mode share message: the site's values
 * (read from the end, so fields before them may change). */
static void share_values(const uint8_t *sh, size_t len, uint32_t rank, uint64_t *v)
{
    assert_true(len >= 8u * rank);
    const uint8_t *p = sh + len - 8u * rank;
    for (uint32_t k = 0; k < rank; k++) {
        v[k] = 0;
        for (int b = 7; b >= 0; b--)
            v[k] = v[k] << 8 | p[8 * k + b];
    }
}

/* ------------------------------------------------------------ flooding */

/* log2 of the gap Q/q0 the switch divides by. */
static double log2_gap(const tsafe_bfv_context *c)
{
    double g = 0;
    for (uint32_t i = 1; i < tsafe_bfv_context_limbs(c); i++)
        g += log2((double)tsafe_bfv_context_prime(c, i));
    return g;
}

/* The sd of the decrypted noise after sealing a zero accumulator with a
 * flood of 2^f: the flood divided by the gap (uniform on [-F, F]: F^2/3)
 * plus the switch's rounding of c1 times the ternary key (N * 2/3 / 12)
 * and of c0 (1/12). The encryption of zero's noise, divided by the gap,
 * is far below 1. */
static double predicted_sd(const tsafe_bfv_context *c, uint32_t flood)
{
    double F = exp2((double)flood - log2_gap(c));
    double n = (double)tsafe_bfv_context_n(c);
    return sqrt(F * F / 3 + n / 18 + 1.0 / 12);
}

static double measured_sd(const tsafe_bfv_context *c, const tsafe_bfv_secret_key *sk,
                          const tsafe_bfv_sealed *res, const uint32_t *pos, size_t reads)
{
    double *noise = malloc(reads * sizeof *noise), s2 = 0, m = 0;
    assert_int_equal(tsafe_bfv_decrypt_noise(c, sk, res, pos, reads, noise), TSAFE_OK);
    for (size_t k = 0; k < reads; k++)
        m += noise[k] / reads;
    for (size_t k = 0; k < reads; k++)
        s2 += (noise[k] - m) * (noise[k] - m);
    free(noise);
    return sqrt(s2 / (reads - 1));
}

/* Seal a zero accumulator at every coefficient with a flood of 2^f on
 * both paths (direct and the CPU backend's sealer); each path's noise sd
 * within 15 % of predicted_sd (4096 reads: the sample sd of a uniform
 * errs by 0.7 % rms). */
static void check_flood(const tsafe_bfv_context *c, uint32_t flood, const char *what)
{
    tsafe_bfv_secret_key *sk;
    tsafe_bfv_public_key *pk;
    uint8_t seed[32];
    tsafe_test_seed32(seed);
    assert_int_equal(tsafe_bfv_secret_key_generate(c, seed, &sk), TSAFE_OK);
    assert_int_equal(tsafe_bfv_public_key_generate(c, sk, NULL, &pk), TSAFE_OK);
    size_t n = tsafe_bfv_context_n(c);
    uint32_t *pos = malloc(n * sizeof *pos);
    for (size_t k = 0; k < n; k++)
        pos[k] = (uint32_t)k;
    tsafe_bfv_sealed *res;
    assert_int_equal(tsafe_bfv_sealed_create(c, n, &res), TSAFE_OK);
    double want = predicted_sd(c, flood);

    tsafe_bfv_acc *acc;
    assert_int_equal(tsafe_bfv_acc_create(c, &acc), TSAFE_OK);
    tsafe_bfv_acc_zero(acc);
    assert_int_equal(tsafe_bfv_seal(c, acc, pk, pos, NULL, n, flood, NULL, res), TSAFE_OK);
    double direct = measured_sd(c, sk, res, pos, n);

    tsafe_backend *b;
    tsafe_bfv_sealer *sl;
    tsafe_buffer *accb, *pkb;
    uint32_t L = tsafe_bfv_context_limbs(c);
    assert_int_equal(tsafe_backend_cpu_create_bfv(c, &b), TSAFE_OK);
    assert_int_equal(tsafe_bfv_sealer_create(c, b, &sl), TSAFE_OK);
    assert_int_equal(tsafe_buffer_alloc(b, 2, L, &accb), TSAFE_OK);
    uint64_t *zero = calloc(2 * (size_t)L * n, sizeof *zero);
    assert_int_equal(tsafe_buffer_upload(accb, zero, 2 * (size_t)L * n), TSAFE_OK);
    assert_int_equal(tsafe_bfv_public_key_operand(pk, b, &pkb), TSAFE_OK);
    assert_int_equal(tsafe_bfv_seal_buffer(sl, accb, pkb, pos, NULL, n, flood, NULL, res),
                     TSAFE_OK);
    double backend = measured_sd(c, sk, res, pos, n);
    printf("# flood %u bits (%s, gap 2^%.2f): noise sd %.2f direct, %.2f backend, "
           "predicted %.2f\n", flood, what, log2_gap(c), direct, backend, want);
    assert_true(fabs(direct / want - 1) < 0.15);
    assert_true(fabs(backend / want - 1) < 0.15);

    free(zero);
    tsafe_buffer_free(accb);
    tsafe_buffer_free(pkb);
    tsafe_bfv_sealer_free(sl);
    tsafe_backend_free(b);
    tsafe_bfv_acc_free(acc);
    tsafe_bfv_sealed_free(res);
    tsafe_bfv_public_key_free(pk);
    tsafe_bfv_secret_key_free(sk);
    free(pos);
}

/* The plan's own round-1 ring and flood (an input wide enough that the
 * flood stands above the gap and so shows after the switch), then a flood
 * 6 bits above the gap on the same ring (its rounding share is larger). */
static void flooding_noise_matches_plan(void **state)
{
    (void)state;
    tsafe_sealed_plan p;
    assert_int_equal(tsafe_sealed_plan_derive(TSAFE_SEALED_PRIVATE, 4096, 8, 64, NULL, &p),
                     TSAFE_OK);
    tsafe_bfv_context *c1, *c2;
    assert_int_equal(tsafe_sealed_contexts(&p, &c1, &c2), TSAFE_OK);
    double gap = log2_gap(c1);
    assert_true(p.flood1 >= gap + 4); /* else the flood would not show */
    check_flood(c1, p.flood1, "plan flood1");
    check_flood(c1, (uint32_t)ceil(gap) + 6, "gap + 6");
    tsafe_bfv_context_free(c1);
    tsafe_bfv_context_free(c2);
}

/* The flood covers the noise bound it hides (plan.c's header, recomputed
 * here from the plan's public fields): statistical distance reads * B /
 * flood <= 2^-40 per response. */
static void plan_flood_covers_noise(void **state)
{
    (void)state;
    const uint32_t shapes[][3] = {{64, 4, 16}, {256, 8, 64}, {2048, 32, 2048}, {4096, 16, 512}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        for (int mode = TSAFE_SEALED; mode <= TSAFE_SEALED_PRIVATE; mode++) {
            tsafe_sealed_plan p;
            assert_int_equal(tsafe_sealed_plan_derive((tsafe_sealed_mode)mode, shapes[i][0],
                                                      shapes[i][1], shapes[i][2], &(tsafe_sealed_opts){.semi_honest = 1}, &p),
                             TSAFE_OK);
            double a_max = exp2(p.a_bits - 1) - 1;
            uint32_t rows = (1u << p.r1.log_n) / p.chunk1;
            double nnz = (double)p.n_chunks1 * p.chunk1 * rows;
            /* sealed-private holds A's rows to rms <= a_max / 4 (site.c),
             * and its error term is 8 sigma times their L2 norm; the
             * rounding term, half a row's L1 norm <= sqrt(n) L2 <= n a_max
             * / 4, stays within n a_max / 2 although entries may pass
             * a_max */
            double a_rms = mode == TSAFE_SEALED_PRIVATE ? a_max / 4 : a_max;
            double b1 = p.n_chunks1 * (double)p.chunk1 * a_max / 2 +
                        8 * sqrt(21.0 / 2) * a_rms * sqrt(nnz);
            uint32_t reads = p.rank < rows ? p.rank : rows;
            double sd = log2((double)reads * b1) - p.flood1;
            assert_true(sd <= -40);
            assert_true(p.log2_sd1 <= -40 && p.log2_sd1 >= sd - 2);
        }
    }
}

/* ------------------------------------------------------------ rotation */

static uint32_t hello_epoch(const uint8_t *h, size_t len)
{
    size_t off = 8 + 32 + TSAFE_SEALED_SESSION_BYTES; /* header, plan fp, session */
    assert_true(len >= off + 4);
    return (uint32_t)h[off] | (uint32_t)h[off + 1] << 8 | (uint32_t)h[off + 2] << 16 |
           (uint32_t)h[off + 3] << 24;
}

static void key_rotation_pinned(void **state)
{
    (void)state;
    enum { ROT = 3 };
    tsafe_sealed_opts o = {.rotate_after = ROT};
    world w;
    world_open(&w, TSAFE_SEALED_PRIVATE, 64, 4, 16, &o, NULL);
    world_site(&w, 0.5f);
    float x[64], d[16];
    double ref[16];
    uint8_t *h0, *h1;
    size_t h0l, h1l;
    assert_int_equal(tsafe_sealed_client_needs_hello(w.c), 1);
    assert_int_equal(tsafe_sealed_client_hello(w.c, &h0, &h0l), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_accept(w.s, h0, h0l), TSAFE_OK);
    uint32_t e0 = hello_epoch(h0, h0l);
    uint8_t *old_q = NULL;
    size_t old_ql = 0;
    for (int tok = 0; tok < ROT; tok++) {
        assert_int_equal(tsafe_sealed_client_needs_hello(w.c), 0);
        for (int j = 0; j < 64; j++)
            x[j] = tsafe_test_uniform_float(-1, 1);
        if (tok == 0) /* keep the epoch's first query for a replay */
            assert_int_equal(tsafe_sealed_client_query(w.c, x, &old_q, &old_ql, NULL), TSAFE_OK);
        else {
            run_token(&w, x, NULL, d, NULL, NULL);
            continue;
        }
        uint8_t *r1, *sh, *r2;
        size_t r1l, shl, r2l;
        const tsafe_sealed_site *ss = w.site;
        float *dp = d;
        assert_int_equal(tsafe_sealed_server_round1(w.s, &ss, 1, old_q, old_ql, &r1, &r1l, NULL),
                         TSAFE_OK);
        assert_int_equal(tsafe_sealed_client_respond(w.c, r1, r1l, 1, &w.rank, &w.d_out, NULL, 0,
                                                     &sh, &shl, NULL), TSAFE_OK);
        assert_int_equal(tsafe_sealed_server_round2(w.s, &ss, 1, sh, shl, &r2, &r2l, NULL),
                         TSAFE_OK);
        assert_int_equal(tsafe_sealed_client_finish(w.c, r2, r2l, 1, &w.d_out, &dp, NULL),
                         TSAFE_OK);
        tsafe_lora_bytes_free(r1);
        tsafe_lora_bytes_free(sh);
        tsafe_lora_bytes_free(r2);
    }
    /* rotate_after tokens done: a new key, and nothing before its hello */
    assert_int_equal(tsafe_sealed_client_needs_hello(w.c), 1);
    uint8_t *q;
    size_t ql;
    assert_int_equal(tsafe_sealed_client_query(w.c, x, &q, &ql, NULL), TSAFE_E_STATE);
    assert_int_equal(tsafe_sealed_client_hello(w.c, &h1, &h1l), TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_needs_hello(w.c), 0);
    assert_int_equal(hello_epoch(h1, h1l), e0 + 1);
    assert_int_equal(h1l, h0l);
    /* new public keys: the bytes after the epoch differ */
    size_t keys = 8 + 32 + TSAFE_SEALED_SESSION_BYTES + 4;
    assert_true(memcmp(h0 + keys, h1 + keys, h0l - keys) != 0);
    /* a query of the new epoch before the server re-keys: refused */
    assert_int_equal(tsafe_sealed_client_query(w.c, x, &q, &ql, NULL), TSAFE_OK);
    uint8_t *r1;
    size_t r1l;
    const tsafe_sealed_site *ss = w.site;
    assert_int_equal(tsafe_sealed_server_round1(w.s, &ss, 1, q, ql, &r1, &r1l, NULL),
                     TSAFE_E_REPLAY);
    /* the old epoch's hello again: refused, before and after the re-key */
    assert_int_equal(tsafe_sealed_server_accept(w.s, h0, h0l), TSAFE_E_REPLAY);
    assert_int_equal(tsafe_sealed_server_accept(w.s, h1, h1l), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_accept(w.s, h0, h0l), TSAFE_E_REPLAY);
    assert_int_equal(tsafe_sealed_server_accept(w.s, h1, h1l), TSAFE_E_REPLAY);
    /* the old epoch's first query (seq 0, as the new epoch's): refused */
    assert_int_equal(tsafe_sealed_server_round1(w.s, &ss, 1, old_q, old_ql, &r1, &r1l, NULL),
                     TSAFE_E_REPLAY);
    /* the new epoch's query goes through and the token is right */
    assert_int_equal(tsafe_sealed_server_round1(w.s, &ss, 1, q, ql, &r1, &r1l, NULL), TSAFE_OK);
    uint8_t *sh, *r2;
    size_t shl, r2l;
    float *dp = d;
    assert_int_equal(tsafe_sealed_client_respond(w.c, r1, r1l, 1, &w.rank, &w.d_out, NULL, 0,
                                                 &sh, &shl, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_server_round2(w.s, &ss, 1, sh, shl, &r2, &r2l, NULL), TSAFE_OK);
    assert_int_equal(tsafe_sealed_client_finish(w.c, r2, r2l, 1, &w.d_out, &dp, NULL), TSAFE_OK);
    plain_delta(&w, x, 0.5f, ref);
    assert_true(tsafe_test_rel_l2(d, ref, 16) < 1e-2);
    /* and the next rotation comes after rotate_after tokens again */
    for (int tok = 1; tok < ROT; tok++) {
        assert_int_equal(tsafe_sealed_client_needs_hello(w.c), 0);
        run_token(&w, x, NULL, d, NULL, NULL);
    }
    assert_int_equal(tsafe_sealed_client_needs_hello(w.c), 1);
    uint8_t *h2;
    size_t h2l;
    assert_int_equal(tsafe_sealed_client_hello(w.c, &h2, &h2l), TSAFE_OK);
    assert_int_equal(hello_epoch(h2, h2l), e0 + 2);
    tsafe_lora_bytes_free(h0);
    tsafe_lora_bytes_free(h1);
    tsafe_lora_bytes_free(h2);
    tsafe_lora_bytes_free(q);
    tsafe_lora_bytes_free(old_q);
    tsafe_lora_bytes_free(r1);
    tsafe_lora_bytes_free(sh);
    tsafe_lora_bytes_free(r2);
    world_close(&w);
}

/* ------------------------------------------------------- at the bound */

/* splitmix64: the bound test's own deterministic stream (fixed seeds, the
 * same on every run whatever TSAFE_TEST_SEED says). */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Rows of A with one sign each (row k: sign (-1)^k, magnitudes in
 * [0.5, 1]) and x = 1: x quantizes to x_max everywhere, so u_k = +-U_k
 * exactly, the edge of what round 1 allows. Until plan version 7 a server
 * whose wrap band missed part of the ambiguity (|R - t/2| <= U) then
 * reconstructed a wrong u~ for about one coordinate in ten; since, round 1
 * reads u / 2^k + M mod t2 and round 2 works mod t2, and a wrong lift or
 * read scale (a site's 2^(K - k)) shows here too: over 6 seeds x 4
 * tokens x 32 coordinates that cannot go unseen, and the seeds are
 * fixed. */
static void inputs_at_u_bound(void **state)
{
    (void)state;
    enum { D_IN = 64, RANK = 32, D_OUT = 16, TOKENS = 4 };
    const uint64_t seeds[] = {1, 2, 3, 0x5eed, 0xc0ffee, 0xdeadbeef};
    float x[D_IN];
    for (int j = 0; j < D_IN; j++)
        x[j] = 1.0f;
    for (size_t si = 0; si < sizeof seeds / sizeof *seeds; si++) {
        uint64_t g = seeds[si];
        uint8_t cseed[32], sseed[32];
        for (int i = 0; i < 32; i++) {
            cseed[i] = (uint8_t)mix(&g);
            sseed[i] = (uint8_t)mix(&g);
        }
        world w;
        world_open(&w, TSAFE_SEALED_PRIVATE, D_IN, RANK, D_OUT, NULL, cseed);
        for (uint32_t k = 0; k < RANK; k++)
            for (uint32_t j = 0; j < D_IN; j++) {
                double m = 0.5 + 0.5 * (double)(mix(&g) >> 11) * 0x1p-53;
                w.A[(size_t)k * D_IN + j] = (float)(k % 2 ? -m : m);
            }
        for (size_t i = 0; i < (size_t)D_OUT * RANK; i++)
            w.B[i] = (float)((double)(mix(&g) >> 11) * 0x1p-52 - 1.0);
        world_site(&w, 1.0f);
        tsafe_sealed_server_debug_seed(w.s, sseed);
        world_hello(&w);
        double ref[D_OUT];
        plain_delta(&w, x, 1.0f, ref);
        for (int tok = 0; tok < TOKENS; tok++) {
            float d[D_OUT];
            run_token(&w, x, NULL, d, NULL, NULL);
            double e = tsafe_test_rel_l2(d, ref, D_OUT);
            if (e >= 1e-2)
                printf("# bound: seed %zu token %d: relative error %.3g\n", si, tok, e);
            assert_true(e < 1e-2);
        }
        world_close(&w);
    }
}

/* ---------------------------------------------------------- statistics */

/* Shares carry nothing of A: sealed mode, x = e_j (the plain mode's
 * decrypted slots would be A's column j), shares read from the client's
 * second message without noise, over TOKENS * RANK samples: |corr| stays
 * below 6 standard errors, where an unmasked (or weakly masked) share
 * correlates 1. The top bit of the shares is also balanced. */
static void shares_uncorrelated_with_A(void **state)
{
    (void)state;
    enum { D_IN = 64, RANK = 16, D_OUT = 16, TOKENS = 64 };
    world w;
    world_open(&w, TSAFE_SEALED, D_IN, RANK, D_OUT, &(tsafe_sealed_opts){.semi_honest = 1}, NULL);
    world_site(&w, 1.0f);
    world_hello(&w);
    uint64_t t = 1ull << w.plan.r1.t_bits;
    double *share = malloc(TOKENS * RANK * sizeof *share);
    double *col = malloc(TOKENS * RANK * sizeof *col);
    size_t top = 0;
    for (int tok = 0; tok < TOKENS; tok++) {
        float x[D_IN] = {0}, d[D_OUT];
        uint32_t j = (uint32_t)tsafe_test_below(D_IN);
        x[j] = 1.0f;
        uint8_t *sh;
        size_t shl;
        run_token(&w, x, NULL, d, &sh, &shl);
        uint64_t v[RANK];
        share_values(sh, shl, RANK, v);
        tsafe_lora_bytes_free(sh);
        for (uint32_t k = 0; k < RANK; k++) {
            assert_true(v[k] < t);
            share[tok * RANK + k] = (double)v[k];
            col[tok * RANK + k] = w.A[(size_t)k * D_IN + j];
            top += v[k] >= t / 2;
        }
    }
    double n = TOKENS * RANK, cr = corr(share, col, TOKENS * RANK);
    printf("# shares: corr(share, A[:,j]) = %.3f over %.0f samples (6 se = %.3f), "
           "top bit set %zu\n", cr, n, 6 / sqrt(n), top);
    assert_true(fabs(cr) < 6 / sqrt(n));
    assert_true(fabs((double)top - n / 2) < 6 * sqrt(n / 4));
    free(share);
    free(col);
    world_close(&w);
}

/* Solve the rank x rank system M y = r (Gaussian elimination, partial
 * pivoting; M and r are overwritten). */
static void solve(double *M, double *r, uint32_t n)
{
    for (uint32_t c = 0; c < n; c++) {
        uint32_t piv = c;
        for (uint32_t i = c + 1; i < n; i++)
            if (fabs(M[i * n + c]) > fabs(M[piv * n + c]))
                piv = i;
        for (uint32_t k = 0; k < n; k++) {
            double tmp = M[c * n + k];
            M[c * n + k] = M[piv * n + k];
            M[piv * n + k] = tmp;
        }
        double tmp = r[c];
        r[c] = r[piv];
        r[piv] = tmp;
        for (uint32_t i = c + 1; i < n; i++) {
            double f = M[i * n + c] / M[c * n + c];
            for (uint32_t k = c; k < n; k++)
                M[i * n + k] -= f * M[c * n + k];
            r[i] -= f * r[c];
        }
    }
    for (uint32_t c = n; c-- > 0;) {
        for (uint32_t k = c + 1; k < n; k++)
            r[c] -= M[c * n + k] * r[k];
        r[c] /= M[c * n + c];
    }
}

/* A client that sends the unit vector e_3 as its share: sealed mode adds
 * the server's mask, so the delta it gets back is B times a vector that is
 * uniform mod t, never B's column 3 (what plain mode returns). The vector
 * is recovered exactly from each delta (least squares on B, known to the
 * test); its correlation with e_3 over TOKENS * RANK samples stays below
 * 6 standard errors. */
static void chosen_shares_reveal_no_column(void **state)
{
    (void)state;
    enum { D_IN = 64, RANK = 8, D_OUT = 64, TOKENS = 64 };
    world w;
    world_open(&w, TSAFE_SEALED, D_IN, RANK, D_OUT, &(tsafe_sealed_opts){.semi_honest = 1}, NULL);
    world_site(&w, 1.0f);
    world_hello(&w);
    double *y = malloc(TOKENS * RANK * sizeof *y), *e3 = malloc(TOKENS * RANK * sizeof *e3);
    double BtB[RANK * RANK];
    for (int a = 0; a < RANK; a++)
        for (int b = 0; b < RANK; b++) {
            BtB[a * RANK + b] = 0;
            for (int o = 0; o < D_OUT; o++)
                BtB[a * RANK + b] += (double)w.B[o * RANK + a] * w.B[o * RANK + b];
        }
    for (int tok = 0; tok < TOKENS; tok++) {
        float x[D_IN], d[D_OUT], *dp = d;
        for (int j = 0; j < D_IN; j++)
            x[j] = tsafe_test_uniform_float(-1, 1);
        uint8_t *q, *r1, *sh, *r2;
        size_t ql, r1l, shl, r2l;
        const tsafe_sealed_site *ss = w.site;
        assert_int_equal(tsafe_sealed_client_query(w.c, x, &q, &ql, NULL), TSAFE_OK);
        assert_int_equal(tsafe_sealed_server_round1(w.s, &ss, 1, q, ql, &r1, &r1l, NULL),
                         TSAFE_OK);
        assert_int_equal(tsafe_sealed_client_respond(w.c, r1, r1l, 1, &w.rank, &w.d_out, NULL, 1,
                                                     &sh, &shl, NULL), TSAFE_OK);
        /* the shares are the message's last RANK u64: e_3 instead */
        memset(sh + shl - 8 * RANK, 0, 8 * RANK);
        sh[shl - 8 * RANK + 8 * 3] = 1;
        assert_int_equal(tsafe_sealed_server_round2(w.s, &ss, 1, sh, shl, &r2, &r2l, NULL),
                         TSAFE_OK);
        assert_int_equal(tsafe_sealed_client_finish(w.c, r2, r2l, 1, &w.d_out, &dp, NULL),
                         TSAFE_OK);
        double M[RANK * RANK], r[RANK] = {0};
        memcpy(M, BtB, sizeof M);
        for (int a = 0; a < RANK; a++)
            for (int o = 0; o < D_OUT; o++)
                r[a] += (double)w.B[o * RANK + a] * d[o];
        solve(M, r, RANK);
        for (int k = 0; k < RANK; k++) {
            y[tok * RANK + k] = r[k];
            e3[tok * RANK + k] = k == 3;
        }
        tsafe_lora_bytes_free(q);
        tsafe_lora_bytes_free(r1);
        tsafe_lora_bytes_free(sh);
        tsafe_lora_bytes_free(r2);
    }
    double n = TOKENS * RANK, cr = corr(y, e3, TOKENS * RANK);
    printf("# chosen shares: corr(recovered vector, e_3) = %.3f over %.0f samples "
           "(6 se = %.3f)\n", cr, n, 6 / sqrt(n));
    assert_true(fabs(cr) < 6 / sqrt(n));
    free(y);
    free(e3);
    world_close(&w);
}

/* ------------------------------------------------------------------ DP */

/* Phi(x) in long double. */
static long double Phi(long double x)
{
    return 0.5L * erfcl(-x / sqrtl(2.0L));
}

/* delta of the Gaussian mechanism at eps for mu = Delta / sigma (Balle &
 * Wang 2018, Thm. 8), straight from the formula in long double (fine for
 * the moderate eps, delta used here). */
static long double bw_delta(long double eps, long double mu)
{
    return Phi(mu / 2 - eps / mu) - expl(eps) * Phi(-mu / 2 - eps / mu);
}

/* The smallest sigma meeting (eps, delta), by bisection on sigma. */
static double bw_sigma(double eps, double delta, double sens)
{
    long double lo = 1e-6L * sens, hi = 1e6L * sens;
    for (int i = 0; i < 400; i++) {
        long double mid = sqrtl(lo * hi);
        if (bw_delta(eps, sens / mid) > delta)
            lo = mid;
        else
            hi = mid;
    }
    return (double)hi;
}

/* GDP: T releases of sigma compose to mu = sqrt(T) Delta / sigma; the
 * largest T with delta(eps_total, mu) <= delta_total. */
static uint64_t gdp_releases(double sens, double sigma, double eps_total, double delta_total)
{
    uint64_t lo = 0, hi = 1;
    while (bw_delta(eps_total, sqrtl((long double)hi) * sens / sigma) <= delta_total)
        hi *= 2;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (bw_delta(eps_total, sqrtl((long double)mid) * sens / sigma) <= delta_total)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* The session calibrates sigma from (eps, delta) and Delta = 2 C (the
 * default neighbouring relation) as the formula does, and its budget
 * allows the accountant's number of releases (GDP, recomputed here); the
 * sealed server then sees noise of that sigma: u + n against u from the
 * same x without noise, n in real units (times the client's x scale and
 * the site's A scale), over enough samples for a 10 % band (2048: the
 * sample sd errs by 1.6 % rms). */
static void dp_sigma_pinned(void **state)
{
    (void)state;
    const double C = 1.0, eps = 1.0, delta = 1e-6;
    tsafe_dp_params dpp = {.clip_norm = C, .eps = eps, .delta = delta, .eps_total = 64.0,
                           .delta_total = 1e-5, .accountant = TSAFE_DP_ACCOUNTANT_GDP};
    tsafe_dp_session *dp;
    assert_int_equal(tsafe_dp_session_create(&dpp, &dp), TSAFE_OK);
    tsafe_dp_stats ds;
    assert_int_equal(tsafe_dp_session_stats(dp, &ds), TSAFE_OK);
    double want = bw_sigma(eps, delta, 2 * C);
    uint64_t tmax = gdp_releases(2 * C, ds.sigma, dpp.eps_total, dpp.delta_total);
    printf("# DP: sigma %.6f (formula %.6f), releases_max %llu (GDP formula %llu)\n", ds.sigma,
           want, (unsigned long long)ds.releases_max, (unsigned long long)tmax);
    assert_true(fabs(ds.sensitivity - 2 * C) < 1e-12);
    assert_true(fabs(ds.sigma / want - 1) < 1e-6);
    assert_true(ds.releases_max + 1 >= tmax && ds.releases_max <= tmax + 1);
    assert_true(ds.releases_max >= 64); /* enough for the sample below */

    enum { D_IN = 64, RANK = 32, D_OUT = 16, TOKENS = 64 };
    world w;
    world_open(&w, TSAFE_SEALED, D_IN, RANK, D_OUT, &(tsafe_sealed_opts){.semi_honest = 1}, NULL);
    world_site(&w, 1.0f);
    world_hello(&w);
    double s2 = 0;
    size_t cnt = 0;
    for (int tok = 0; tok < TOKENS; tok++) {
        float x[D_IN], d[D_OUT];
        for (int j = 0; j < D_IN; j++)
            x[j] = tsafe_test_uniform_float(-1, 1);
        int64_t u[RANK], un[RANK];
        run_token(&w, x, NULL, d, NULL, NULL);
        assert_int_equal(tsafe_sealed_server_last_u(w.s, 0, u, RANK), TSAFE_OK);
        run_token(&w, x, dp, d, NULL, NULL);
        assert_int_equal(tsafe_sealed_server_last_u(w.s, 0, un, RANK), TSAFE_OK);
        double unit = w.c->sx * w.site->scale_a; /* same x: same sx both times */
        for (int k = 0; k < RANK; k++, cnt++) {
            double nk = (double)(un[k] - u[k]) * unit;
            s2 += nk * nk;
        }
    }
    double sd = sqrt(s2 / (double)cnt);
    printf("# sealed DP: noise sd %.4f over %zu samples, session sigma %.4f\n", sd, cnt,
           ds.sigma);
    assert_true(fabs(sd / want - 1) < 0.10);
    assert_int_equal(tsafe_dp_session_stats(dp, &ds), TSAFE_OK);
    assert_int_equal(ds.releases, TOKENS);
    tsafe_dp_session_free(dp);
    world_close(&w);
}

/* Round 2's masks with their output noise in one pass (the server's
 * path, AVX-512 where the CPU has it) give the bits of the two-pass
 * reference (tsafe_sealed_out_noise, tsafe_sealed_round2_masks, which
 * tests/reference/sealed_ref.c uses): ties of the rounding, sums of mixed
 * magnitudes (an order of summation other than tsafe_sealed_row_dot's
 * changes their bits) and sums past 2^53, over blocks with a short last
 * one. */
static void round2_noise_masks_paths(void **state)
{
    (void)state;
    world w;
    world_open(&w, TSAFE_SEALED_PRIVATE, 64, 32, 203, NULL, NULL);
    world_site(&w, 1.0f);
    const tsafe_sealed_site *ss = w.site;
    uint32_t rank = ss->rank, d_out = ss->d_out, rows = ss->l2.rows;
    uint64_t t = 1ull << w.plan.r1.t_bits;
    int64_t *noise = malloc(d_out * sizeof *noise), C[64];
    uint64_t *want = malloc(rows * sizeof *want), *got = malloc(rows * sizeof *got);
    double z[64];
    assert_true(noise && want && got);
    int ties = 0;
    for (int trial = 0; trial < 12; trial++) {
        for (uint32_t q = 0; q < rank; q++) {
            C[q] = (int64_t)(tsafe_test_u64() & (t - 1));
            /* trials 0-3: halves (ties wherever a row's sum is odd); 4-7:
             * Gaussian-like; 8-11: sums far past 2^53 */
            z[q] = trial < 4   ? (q == (uint32_t)trial ? 0.5 : q == 7 ? -1.5 : 0)
                   : trial < 8 ? tsafe_test_uniform_float(-1, 1) * pow(10, (int)(q % 7) - 2)
                               : tsafe_test_uniform_float(-1, 1) * 1e15;
        }
        tsafe_sealed_out_noise(ss, z, noise);
        for (uint32_t j = 0; j < d_out; j++) {
            double acc = tsafe_sealed_row_dot(ss->bq + (size_t)j * rank, z, rank);
            ties += trial < 4 && acc != floor(acc);
        }
        for (uint32_t b = 0; b < ss->l2.n_blocks; b++) {
            uint32_t n = tsafe_sealed_round2_masks(&w.plan, ss, b, C, noise, want);
            for (int vector = 0; vector < 2; vector++) {
                memset(got, 0xA5, rows * sizeof *got);
                assert_int_equal(tsafe_sealed_round2_noise_masks(&w.plan, ss, b, C, z, got,
                                                                 vector), n);
                assert_memory_equal(got, want, n * sizeof *got);
            }
        }
    }
    assert_true(ties > 100); /* the ties were there to round */
    free(noise);
    free(want);
    free(got);
    world_close(&w);
}

int main(void)
{
    tsafe_test_rng_init("sealed_properties");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(flooding_noise_matches_plan),
        cmocka_unit_test(round2_noise_masks_paths),
        cmocka_unit_test(plan_flood_covers_noise),
        cmocka_unit_test(key_rotation_pinned),
        cmocka_unit_test(inputs_at_u_bound),
        cmocka_unit_test(shares_uncorrelated_with_A),
        cmocka_unit_test(chosen_shares_reveal_no_column),
        cmocka_unit_test(dp_sigma_pinned),
    };
    return cmocka_run_group_tests_name("sealed_properties", tests, NULL, NULL);
}
