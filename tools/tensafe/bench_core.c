/* `tensafe bench core`: medians (µs) of the CKKS core operations at the
 * seeds' presets and the <=50-bit (IFMA) presets, plus ciphertext sizes.
 *
 * The "SEAL 4.4.3" figures in the note column are SEAL's medians from the
 * same-run comparison recorded in docs/PERFORMANCE.md §1 (2026-11-23,
 * scripts/bench-vs-seal.sh: SEAL 4.4.3 without HEXL, seed-n16384, one
 * core); this tool does NOT measure them, so the ratio SEAL / ours (> 1
 * means faster) compares against another run: for a same-run ratio use
 * scripts/bench-vs-seal.sh. */
#include "bench.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "commands.h"
#include "init.h"
#include "tensafe/ckks.h"
/* internal ring/context layout: the tool links the static libraries, so the
 * hidden NTT entry points resolve */
#include "../../libtensafe-he-core/src/ckks/ckks_internal.h"
#include "../../libtensafe-he-core/src/ring/ring.h"

#define GROUP "core"

/* SEAL 4.4.3 medians (µs) at seed-n16384 from docs/PERFORMANCE.md §1
 * (60-bit scalar NTT rows); 0 = none recorded. */
enum { REF_NTT_FWD, REF_NTT_INV, REF_ENC_SK, REF_MUL_PLAIN, REF_RESCALE,
       REF_DECODE, REF_NONE };
static const double k_ref_us[] = {192.2, 140.6, 2045.6, 245.2, 954.8, 1439.6, 0};

typedef struct {
    const tsafe_context *c;
    const tsafe_ntt_table *t;
    uint64_t *limb;
    tsafe_secret_key *sk;
    tsafe_public_key *pk;
    tsafe_plaintext *pt, *pt_mul, *dec;
    tsafe_ciphertext *ct, *ct_low, *out, *prod;
    double *values, *decoded;
    size_t slots;
    uint32_t top;
    double scale;
    tsafe_status st; /* first failure inside a timed call */
} bench_state;

static void note_status(bench_state *s, tsafe_status st)
{
    if (st != TSAFE_OK && s->st == TSAFE_OK)
        s->st = st;
}

static void f_ntt_fwd_scalar(void *a) { bench_state *s = a; tsafe_ntt_forward_scalar(s->t, s->limb); }
static void f_ntt_inv_scalar(void *a) { bench_state *s = a; tsafe_ntt_inverse_scalar(s->t, s->limb); }
static void f_ntt_fwd_ifma(void *a) { bench_state *s = a; tsafe_ntt_forward_ifma(s->t, s->limb); }
static void f_ntt_inv_ifma(void *a) { bench_state *s = a; tsafe_ntt_inverse_ifma(s->t, s->limb); }
static void f_ntt_fwd_avx2(void *a) { bench_state *s = a; tsafe_ntt_forward_avx2(s->t, s->limb); }
static void f_ntt_inv_avx2(void *a) { bench_state *s = a; tsafe_ntt_inverse_avx2(s->t, s->limb); }
static void f_ntt_fwd_fp(void *a) { bench_state *s = a; tsafe_ntt_forward_avx2_fp(s->t, s->limb); }
static void f_ntt_inv_fp(void *a) { bench_state *s = a; tsafe_ntt_inverse_avx2_fp(s->t, s->limb); }

static void f_encode(void *a)
{
    bench_state *s = a;
    note_status(s, tsafe_ckks_encode(s->c, s->values, s->slots, s->scale, s->top, s->pt));
}

static void f_decode(void *a)
{
    bench_state *s = a;
    note_status(s, tsafe_ckks_decode(s->c, s->pt, s->decoded, s->slots));
}

static void f_enc_sk(void *a)
{
    bench_state *s = a;
    note_status(s, tsafe_ckks_encrypt_symmetric(s->c, s->sk, s->pt, NULL, s->out));
}

static void f_enc_pk(void *a)
{
    bench_state *s = a;
    note_status(s, tsafe_ckks_encrypt_public(s->c, s->pk, s->pt, NULL, s->out));
}

static void f_add(void *a)
{
    bench_state *s = a;
    note_status(s, tsafe_ckks_add(s->c, s->ct, s->ct, s->out));
}

static void f_mul_plain(void *a)
{
    bench_state *s = a;
    note_status(s, tsafe_ckks_mul_plain(s->c, s->ct, s->pt_mul, s->out));
}

static void f_mul_plain_unprepared(void *a)
{
    bench_state *s = a;
    note_status(s, tsafe_ckks_mul_plain(s->c, s->ct, s->pt, s->out));
}

static void f_rescale(void *a)
{
    bench_state *s = a;
    note_status(s, tsafe_ckks_rescale(s->c, s->prod, s->out));
}

static void f_decrypt_top(void *a)
{
    bench_state *s = a;
    note_status(s, tsafe_ckks_decrypt(s->c, s->sk, s->ct, s->dec));
}

static void f_decrypt_decode_top(void *a)
{
    bench_state *s = a;
    note_status(s, tsafe_ckks_decrypt(s->c, s->sk, s->ct, s->dec));
    note_status(s, tsafe_ckks_decode(s->c, s->dec, s->decoded, s->slots));
}

static void f_decrypt_low(void *a)
{
    bench_state *s = a;
    note_status(s, tsafe_ckks_decrypt(s->c, s->sk, s->ct_low, s->dec));
}

static void f_decrypt_decode_low(void *a)
{
    bench_state *s = a;
    note_status(s, tsafe_ckks_decrypt(s->c, s->sk, s->ct_low, s->dec));
    note_status(s, tsafe_ckks_decode(s->c, s->dec, s->decoded, s->slots));
}

/* Median with a repetition count sized to a time budget per row. */
static double timed(bench_fn fn, void *arg, int quick)
{
    double t0 = bench_now_us();
    fn(arg);
    double one = bench_now_us() - t0;
    double budget = quick ? 20e3 : 250e3;
    int lo = quick ? 3 : 11, hi = quick ? 25 : 2001;
    int reps = one > 0 ? (int)(budget / one) : hi;
    reps = reps < lo ? lo : reps > hi ? hi : reps;
    return bench_median_us(fn, arg, quick ? 1 : 2, reps);
}

static void row(bench_report *r, const char *name, const char *params,
                bench_fn fn, bench_state *s, int quick, int ref, int n16384,
                const char *ref_extra)
{
    double us = timed(fn, s, quick);
    char note[160] = "";
    if (n16384 && k_ref_us[ref] > 0)
        snprintf(note, sizeof note,
                 "SEAL 4.4.3 %.0f us (docs/PERFORMANCE.md §1, 2026-11-23%s; not this run): "
                 "%.2fx",
                 k_ref_us[ref], ref_extra, k_ref_us[ref] / us);
    bench_report_add(r, GROUP, name, params, us, note[0] ? note : NULL);
}

/* Uniform enough for timing input (modulo bias irrelevant here). */
static uint64_t rand_below(uint64_t q)
{
    uint64_t x;
    randombytes_buf(&x, sizeof x);
    return x % q;
}

static size_t ct_bytes(const tsafe_context *c, const tsafe_ciphertext *ct)
{
    size_t n = 0;
    if (tsafe_ciphertext_serialized_size(c, ct, &n) != TSAFE_OK)
        return 0;
    return n;
}

/* Where a row's figure goes: the preset's name and N, and whether the SEAL
 * figure applies (it was taken at N=16384). */
typedef struct {
    bench_report *r;
    const char *preset;
    size_t n;
    int quick, n16384;
    const char *ref_extra;
} row_ctx;

static void op_row(const row_ctx *x, const char *name, const char *params, bench_fn fn,
                   bench_state *s, int ref)
{
    row(x->r, name, params, fn, s, x->quick, ref, x->n16384, x->ref_extra);
}

/* Both NTT directions of one limb with table t, on random residues. */
static void ntt_rows(const row_ctx *x, bench_state *s, const tsafe_ntt_table *t, uint32_t i,
                     int ifma)
{
    char prm[96];
    s->t = t;
    for (size_t k = 0; k < x->n; k++)
        s->limb[k] = rand_below(t->mod.q);
    snprintf(prm, sizeof prm, "%s N=%zu q%u %ub %s", x->preset, x->n, i, t->mod.bits,
             ifma ? "ifma" : "scalar");
    op_row(x, "ntt forward (1 limb)", prm, ifma ? f_ntt_fwd_ifma : f_ntt_fwd_scalar, s,
           REF_NTT_FWD);
    op_row(x, "ntt inverse (1 limb)", prm, ifma ? f_ntt_inv_ifma : f_ntt_inv_scalar, s,
           REF_NTT_INV);
}

/* NTT of one limb: scalar path on limb 0, IFMA on the first limb that has
 * IFMA tables (prime < 2^50, CPU support), and the scalar path on that
 * same prime for the comparison. */
static void ntt_section(const row_ctx *x, bench_state *s)
{
    const tsafe_context *c = s->c;
    ntt_rows(x, s, &c->ntt[0], 0, 0);
    for (uint32_t i = 0; i <= s->top; i++) {
        const tsafe_ntt_table *ti = &c->ntt[i];
        if (!(tsafe_cpu_has_ifma() && ti->use_ifma && ti->ifma))
            continue;
        ntt_rows(x, s, ti, i, 1);
        if (i != 0) /* limb 0's scalar rows above are the comparison */
            ntt_rows(x, s, ti, i, 0);
        return;
    }
    char prm[96];
    snprintf(prm, sizeof prm, "%s N=%zu", x->preset, x->n);
    bench_report_add(x->r, GROUP, "ntt ifma path", prm, 0.0,
                     tsafe_cpu_has_ifma() ? "skipped: no prime below 2^50"
                                          : "skipped: CPU lacks AVX-512 IFMA");
}

/* The AVX2 NTTs beside the scalar one on the same table, at this N: the
 * 32-bit lanes on a 30-bit prime (the sealed modes' gap limbs) and the
 * double-precision one (AVX2 + FMA) on a 49-bit prime (their q0). Timed
 * on any CPU that has them, also where the dispatch would take IFMA. */
static void ntt_avx2_rows(const row_ctx *x, bench_state *s, uint32_t bits, int fp)
{
    char prm[96];
    snprintf(prm, sizeof prm, "%s N=%zu %ub", x->preset, x->n, bits);
    const char *name = fp ? "ntt avx2 fp path" : "ntt avx2 path";
    if (!(fp ? tsafe_cpu_has_avx2_fma() : tsafe_cpu_has_avx2())) {
        bench_report_add(x->r, GROUP, name, prm, 0.0,
                         fp ? "skipped: CPU lacks AVX2 or FMA" : "skipped: CPU lacks AVX2");
        return;
    }
    const uint32_t log_n = s->c->log_n;
    uint64_t q;
    tsafe_ntt_table t;
    if (tsafe_primes_generate(log_n, 1, &bits, &q) != TSAFE_OK ||
        tsafe_ntt_table_init(&t, log_n, q, 1) != TSAFE_OK) {
        bench_report_add(x->r, GROUP, name, prm, 0.0, "skipped: no such prime");
        return;
    }
    if (fp && !t.fp && !(t.fp = tsafe_ntt_fp_build(&t))) {
        tsafe_ntt_table_free(&t);
        bench_report_add(x->r, GROUP, name, prm, 0.0, "skipped: out of memory");
        return;
    }
    s->t = &t;
    for (int vec = 1; vec >= 0; vec--) {
        for (size_t k = 0; k < x->n; k++)
            s->limb[k] = rand_below(q);
        snprintf(prm, sizeof prm, "%s N=%zu %ub %s", x->preset, x->n, bits,
                 !vec ? "scalar" : fp ? "avx2-fp" : "avx2");
        op_row(x, "ntt forward (1 limb)", prm,
               !vec ? f_ntt_fwd_scalar : fp ? f_ntt_fwd_fp : f_ntt_fwd_avx2, s, REF_NONE);
        op_row(x, "ntt inverse (1 limb)", prm,
               !vec ? f_ntt_inv_scalar : fp ? f_ntt_inv_fp : f_ntt_inv_avx2, s, REF_NONE);
    }
    tsafe_ntt_table_free(&t);
}

static void ntt_avx2_section(const row_ctx *x, bench_state *s)
{
    ntt_avx2_rows(x, s, 30, 0);
    ntt_avx2_rows(x, s, 49, 1);
}

/* Keys, plaintexts and ciphertexts the timed operations read. */
static tsafe_status make_objects(bench_state *s)
{
    const tsafe_context *c = s->c;
    tsafe_status st;
    if ((st = tsafe_secret_key_generate(c, NULL, &s->sk)) ||
        (st = tsafe_public_key_generate(c, s->sk, NULL, &s->pk)) ||
        (st = tsafe_plaintext_create(c, &s->pt)) ||
        (st = tsafe_plaintext_create(c, &s->pt_mul)) ||
        (st = tsafe_plaintext_create(c, &s->dec)) ||
        (st = tsafe_ciphertext_create(c, &s->ct)) ||
        (st = tsafe_ciphertext_create(c, &s->ct_low)) ||
        (st = tsafe_ciphertext_create(c, &s->out)) ||
        (st = tsafe_ciphertext_create(c, &s->prod)) ||
        (st = tsafe_ckks_encode(c, s->values, s->slots, s->scale, s->top, s->pt)) ||
        (st = tsafe_ckks_encode(c, s->values, s->slots, s->scale, s->top, s->pt_mul)) ||
        (st = tsafe_plaintext_prepare_mul(c, s->pt_mul)) ||
        (st = tsafe_ckks_encrypt_public(c, s->pk, s->pt, NULL, s->ct)) ||
        (st = tsafe_ckks_drop_to_level(c, s->ct, 0, s->ct_low)) ||
        (st = tsafe_ckks_mul_plain(c, s->ct, s->pt_mul, s->prod)))
        return st;
    return TSAFE_OK;
}

/* The CKKS operations at the top level and decryption at the lowest. */
static void op_section(const row_ctx *x, bench_state *s)
{
    char prm[96];
    snprintf(prm, sizeof prm, "%s N=%zu L=%u (top)", x->preset, x->n, s->top + 1);
    op_row(x, "encode", prm, f_encode, s, REF_NONE);
    op_row(x, "decode", prm, f_decode, s, REF_DECODE);
    op_row(x, "encrypt (secret key, seeded)", prm, f_enc_sk, s, REF_ENC_SK);
    op_row(x, "encrypt (public key)", prm, f_enc_pk, s, REF_NONE);
    op_row(x, "add (ct + ct)", prm, f_add, s, REF_NONE);
    op_row(x, "ct x pt (prepared plaintext)", prm, f_mul_plain, s, REF_MUL_PLAIN);
    op_row(x, "ct x pt (unprepared plaintext)", prm, f_mul_plain_unprepared, s, REF_NONE);
    if (s->top > 0)
        op_row(x, "rescale", prm, f_rescale, s, REF_RESCALE);
    op_row(x, "decrypt + decode", prm, f_decrypt_decode_top, s, REF_NONE);
    op_row(x, "decrypt only", prm, f_decrypt_top, s, REF_NONE);
    snprintf(prm, sizeof prm, "%s N=%zu L=1 (lowest)", x->preset, x->n);
    op_row(x, "decrypt + decode", prm, f_decrypt_decode_low, s, REF_NONE);
    op_row(x, "decrypt only", prm, f_decrypt_low, s, REF_NONE);
}

/* Ciphertext sizes: unseeded (public-key / evaluated) and seeded (fresh
 * secret-key encryption) at the top and the lowest level. */
static tsafe_status size_section(const row_ctx *x, bench_state *s)
{
    const tsafe_context *c = s->c;
    tsafe_ciphertext *seeded = NULL, *seeded_low = NULL;
    tsafe_status st;
    if ((st = tsafe_ciphertext_create(c, &seeded)) ||
        (st = tsafe_ciphertext_create(c, &seeded_low)) ||
        (st = tsafe_ckks_encrypt_symmetric(c, s->sk, s->pt, NULL, seeded)) ||
        (st = tsafe_ckks_drop_to_level(c, seeded, 0, seeded_low)))
        goto done;
    char prm[96];
    snprintf(prm, sizeof prm, "%s N=%zu L=%u", x->preset, x->n, s->top + 1);
    bench_report_add_value(x->r, GROUP, "ciphertext bytes (top)", prm,
                           (double)ct_bytes(c, s->ct), "bytes");
    bench_report_add_value(x->r, GROUP, "ciphertext bytes (top, seeded)", prm,
                           (double)ct_bytes(c, seeded), "bytes");
    snprintf(prm, sizeof prm, "%s N=%zu L=1", x->preset, x->n);
    bench_report_add_value(x->r, GROUP, "ciphertext bytes (lowest)", prm,
                           (double)ct_bytes(c, s->ct_low), "bytes");
    bench_report_add_value(x->r, GROUP, "ciphertext bytes (lowest, seeded)", prm,
                           (double)ct_bytes(c, seeded_low), "bytes");
done:
    tsafe_ciphertext_free(seeded);
    tsafe_ciphertext_free(seeded_low);
    return st;
}

static void state_free(bench_state *s)
{
    tsafe_ciphertext_free(s->prod);
    tsafe_ciphertext_free(s->out);
    tsafe_ciphertext_free(s->ct_low);
    tsafe_ciphertext_free(s->ct);
    tsafe_plaintext_free(s->dec);
    tsafe_plaintext_free(s->pt_mul);
    tsafe_plaintext_free(s->pt);
    tsafe_public_key_free(s->pk);
    tsafe_secret_key_free(s->sk);
    free(s->limb);
    free(s->values);
    free(s->decoded);
}

static int bench_preset(bench_report *r, const char *preset, int quick)
{
    tsafe_params p;
    tsafe_context *c = NULL;
    bench_state s;
    memset(&s, 0, sizeof s);
    tsafe_status st = tsafe_params_preset(preset, &p);
    if (st == TSAFE_OK)
        st = tsafe_context_create(&p, &c);
    if (st != TSAFE_OK)
        return tool_fail(preset, st);
    s.c = c;
    s.slots = tsafe_context_slots(c);
    s.top = tsafe_context_max_level(c);
    s.scale = p.scale;
    /* the SEAL figures were taken at seed-n16384's parameters */
    row_ctx x = {r, preset, tsafe_context_n(c), quick, tsafe_context_n(c) == 16384,
                 strcmp(preset, "seed-n16384") == 0 ? "" : ", at seed-n16384 params"};
    int rc = 1;
    s.limb = malloc(x.n * sizeof *s.limb);
    s.values = malloc(s.slots * sizeof *s.values);
    s.decoded = malloc(s.slots * sizeof *s.decoded);
    if (!s.limb || !s.values || !s.decoded) {
        tool_fail(preset, TSAFE_E_NOMEM);
        goto done;
    }
    for (size_t i = 0; i < s.slots; i++)
        s.values[i] = (double)randombytes_uniform(2000001) / 1e6 - 1.0;
    ntt_section(&x, &s);
    ntt_avx2_section(&x, &s);
    if ((st = make_objects(&s)) != TSAFE_OK) {
        tool_fail(preset, st);
        goto done;
    }
    op_section(&x, &s);
    if (s.st != TSAFE_OK) {
        tool_fail(preset, s.st);
        goto done;
    }
    if ((st = size_section(&x, &s)) != TSAFE_OK) {
        tool_fail(preset, st);
        goto done;
    }
    rc = 0;
done:
    state_free(&s);
    tsafe_context_free(c);
    return rc;
}

int bench_core(bench_report *r, int quick)
{
    static const char *presets[] = {"seed-n16384", "seed-n32768", "ifma-n16384",
                                    "ifma-n4096"};
    if (tsafe_sodium_ready() != TSAFE_OK)
        return tool_fail("bench core", TSAFE_E_CRYPTO);
    bench_report_add_value(r, GROUP, "cpu has AVX-512 IFMA", "runtime detection",
                           (double)tsafe_cpu_has_ifma(), "bool");
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
        int rc = bench_preset(r, presets[i], quick);
        if (rc)
            return rc;
    }
    return 0;
}
