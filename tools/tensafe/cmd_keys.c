/* `tensafe keygen | encrypt | decrypt`: the two-party client's key handling
 * on files.
 *
 * A key directory holds
 *   params.bin   tsafe_params_serialize of the context's validated params
 *   secret.key   tsafe_secret_key_serialize (mode 0600)
 *   public.key   tsafe_public_key_serialize
 * A ciphertext file (encrypt's output) is
 *   "TSCV" u8 version=1, 3 zero bytes, u32 count, u64 length, then a
 *   serialized ciphertext (core format) of `length` bytes
 * where count is the number of values that were encrypted. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "commands.h"
#include "bytes.h"
#include "io.h"

#define PARAMS_FILE "params.bin"
#define SECRET_FILE "secret.key"
#define PUBLIC_FILE "public.key"
#define CT_MAGIC "TSCV"
#define CT_HEADER 20

static const char k_keygen_help[] =
    "usage: tensafe keygen (--params PRESET | --plan-dim D --plan-rank R [--max-abs X]\n"
    "                      [--max-abs-a A] [--precision P]) --out DIR\n"
    "\n"
    "Generates a client's CKKS keys and writes DIR/params.bin, DIR/secret.key\n"
    "(mode 0600) and DIR/public.key. DIR is created (mode 0700) if missing.\n"
    "  --params PRESET  a core preset (see 'tensafe params presets')\n"
    "  --plan-dim D, --plan-rank R, --max-abs X, --max-abs-a A, --precision P\n"
    "                   the parameters 'tensafe params plan' picks for that shape\n";

static const char k_encrypt_help[] =
    "usage: tensafe encrypt --keys DIR --input X.f32 --output CT.bin\n"
    "\n"
    "Encodes the float32 little-endian values of X.f32 (at most N/2) at the\n"
    "parameter set's scale and top level, and encrypts them with the secret key.\n";

static const char k_decrypt_help[] =
    "usage: tensafe decrypt --keys DIR --input CT.bin --output X.f32 [--count N]\n"
    "\n"
    "Decrypts and decodes a ciphertext file written by 'tensafe encrypt' into\n"
    "float32 little-endian values (as many as were encrypted, or N).\n";

/* ------------------------------------------------------------ keygen */

static int write_keys(const char *out, tsafe_context *ctx)
{
    char path[4096], what[4200];
    tsafe_secret_key *sk = NULL;
    tsafe_public_key *pk = NULL;
    uint8_t *skb = NULL, *pkb = NULL, pb[1024];
    size_t skn = 0, pkn = 0, pn = 0;
    int rc = 1;
    tsafe_status st;
    if ((st = tsafe_secret_key_generate(ctx, NULL, &sk)) != TSAFE_OK ||
        (st = tsafe_public_key_generate(ctx, sk, NULL, &pk)) != TSAFE_OK) {
        tool_fail("generate keys", st);
        goto out;
    }
    if ((st = tsafe_secret_key_serialized_size(ctx, sk, &skn)) != TSAFE_OK ||
        (st = tsafe_public_key_serialized_size(ctx, pk, &pkn)) != TSAFE_OK ||
        (st = (skb = malloc(skn)) && (pkb = malloc(pkn)) ? TSAFE_OK : TSAFE_E_NOMEM) != TSAFE_OK ||
        (st = tsafe_secret_key_serialize(ctx, sk, skb, skn, &skn)) != TSAFE_OK ||
        (st = tsafe_public_key_serialize(ctx, pk, pkb, pkn, &pkn)) != TSAFE_OK ||
        (st = tsafe_params_serialize(tsafe_context_params(ctx), pb, sizeof pb, &pn)) != TSAFE_OK) {
        tool_fail("serialize keys", st);
        goto out;
    }
    if ((st = io_mkdir(out, 0700)) != TSAFE_OK) {
        snprintf(what, sizeof what, "create key directory '%s'", out);
        tool_fail(what, st);
        goto out;
    }
    static const char *names[3] = {PARAMS_FILE, SECRET_FILE, PUBLIC_FILE};
    const uint8_t *bufs[3] = {pb, skb, pkb};
    size_t lens[3] = {pn, skn, pkn};
    unsigned modes[3] = {0644, 0600, 0644};
    for (int i = 0; i < 3; i++) {
        if ((st = io_join(path, sizeof path, out, names[i])) != TSAFE_OK ||
            (st = io_write_file(path, bufs[i], lens[i], modes[i])) != TSAFE_OK) {
            snprintf(what, sizeof what, "write '%s'", path);
            tool_fail(what, st);
            goto out;
        }
    }
    printf("keys written to %s/: %s (%zu bytes), %s (%zu bytes, mode 0600), %s (%zu bytes)\n",
           out, PARAMS_FILE, pn, SECRET_FILE, skn, PUBLIC_FILE, pkn);
    rc = 0;
out:
    if (skb)
        sodium_memzero(skb, skn);
    free(skb);
    free(pkb);
    tsafe_public_key_free(pk);
    tsafe_secret_key_free(sk);
    return rc;
}

int cmd_keygen(int argc, char **argv)
{
    const char *preset = NULL, *out = NULL;
    uint32_t dim = 0, rank = 0;
    double max_abs = 8.0, max_abs_a = 0.05, precision = 1e-6;
    tool_opt o[] = {{"--params", OPT_STR, &preset, 0},      {"--plan-dim", OPT_U32, &dim, 0},
                    {"--plan-rank", OPT_U32, &rank, 0},     {"--max-abs", OPT_DOUBLE, &max_abs, 0},
                    {"--max-abs-a", OPT_DOUBLE, &max_abs_a, 0},
                    {"--precision", OPT_DOUBLE, &precision, 0},
                    {"--out", OPT_STR, &out, 0}};
    int rc = opts_parse("keygen", argc, argv, 1, o, sizeof o / sizeof o[0], NULL, 0, NULL);
    if (rc == OPTS_HELP) {
        fputs(k_keygen_help, stdout);
        return 0;
    }
    if (rc)
        return rc;
    if (!out)
        return tool_usage("keygen: --out DIR is required");
    if (!!preset == (o[1].seen || o[2].seen))
        return tool_usage("keygen: give either --params PRESET or --plan-dim D --plan-rank R");
    tsafe_params params;
    tsafe_status st;
    if (preset) {
        if ((st = tsafe_params_preset(preset, &params)) != TSAFE_OK) {
            char what[256];
            snprintf(what, sizeof what, "parameter preset '%s' (see 'tensafe params presets')",
                     preset);
            return tool_fail(what, st);
        }
    } else {
        if (!o[1].seen || !o[2].seen || dim == 0 || rank == 0)
            return tool_usage("keygen: --plan-dim and --plan-rank must both be given (>= 1)");
        tsafe_lora_plan plan;
        if ((st = tsafe_lora_plan_auto(dim, rank, max_abs, max_abs_a, precision, &plan)) !=
            TSAFE_OK)
            return tool_fail("keygen: plan parameters", st);
        params = plan.params;
    }
    tsafe_context *ctx = NULL;
    if ((st = tsafe_context_create(&params, &ctx)) != TSAFE_OK)
        return tool_fail("keygen: build context", st);
    rc = write_keys(out, ctx);
    tsafe_context_free(ctx);
    return rc;
}

/* ------------------------------------------------------- key loading */

typedef struct {
    tsafe_context *ctx;
    tsafe_secret_key *sk;
} keyset;

static void keyset_free(keyset *k)
{
    tsafe_secret_key_free(k->sk);
    tsafe_context_free(k->ctx);
}

/* Context from DIR/params.bin and secret key from DIR/secret.key. */
static int load_keys(const char *dir, keyset *k)
{
    char path[4096], what[4200];
    uint8_t *b = NULL;
    size_t n = 0;
    tsafe_params p;
    tsafe_status st;
    memset(k, 0, sizeof *k);
    if ((st = io_join(path, sizeof path, dir, PARAMS_FILE)) != TSAFE_OK ||
        (st = io_read_file(path, 1 << 20, &b, &n)) != TSAFE_OK) {
        snprintf(what, sizeof what, "read '%s' (a key directory from 'tensafe keygen')", path);
        return tool_fail(what, st);
    }
    st = tsafe_params_deserialize(b, n, &p);
    free(b);
    if (st == TSAFE_OK && (p.flags & TSAFE_PARAMS_INSECURE_FOR_TESTS))
        st = TSAFE_E_INSECURE;
    if (st != TSAFE_OK || (st = tsafe_context_create(&p, &k->ctx)) != TSAFE_OK) {
        snprintf(what, sizeof what, "parameters in '%s'", path);
        return tool_fail(what, st);
    }
    if ((st = io_join(path, sizeof path, dir, SECRET_FILE)) != TSAFE_OK ||
        (st = io_read_file(path, (size_t)1 << 30, &b, &n)) != TSAFE_OK) {
        snprintf(what, sizeof what, "read secret key '%s'", path);
        keyset_free(k);
        return tool_fail(what, st);
    }
    st = tsafe_secret_key_deserialize(k->ctx, b, n, &k->sk);
    sodium_memzero(b, n);
    free(b);
    if (st != TSAFE_OK) {
        snprintf(what, sizeof what, "secret key '%s'", path);
        keyset_free(k);
        return tool_fail(what, st);
    }
    return 0;
}

/* ----------------------------------------------------------- encrypt */

/* 1..slots finite values. 0, or 1 after saying why. */
static int check_values(const char *in, const float *v, size_t count, size_t slots)
{
    char what[4200];
    if (count == 0 || count > slots) {
        snprintf(what, sizeof what, "input '%s': %zu values, expected 1..%zu (N/2 slots)", in,
                 count, slots);
        return tool_fail(what, TSAFE_E_RANGE);
    }
    for (size_t i = 0; i < count; i++)
        if (!isfinite(v[i])) {
            snprintf(what, sizeof what, "input '%s': value %zu is not finite", in, i);
            return tool_fail(what, TSAFE_E_VALUE_RANGE);
        }
    return 0;
}

/* The ciphertext file: CT_MAGIC, version 1, three zero bytes, the value
 * count (u32 LE), the ciphertext's length (u64 LE), the ciphertext. *len:
 * the file's size. 0, or 1 after saying why. */
static int write_ct_file(const tsafe_context *ctx, const tsafe_ciphertext *ct, size_t count,
                         const char *outp, size_t *len)
{
    char what[4200];
    uint8_t *buf = NULL;
    size_t ctn;
    tsafe_status st;
    if ((st = tsafe_ciphertext_serialized_size(ctx, ct, &ctn)) != TSAFE_OK ||
        (st = (buf = malloc(CT_HEADER + ctn)) ? TSAFE_OK : TSAFE_E_NOMEM) != TSAFE_OK ||
        (st = tsafe_ciphertext_serialize(ctx, ct, buf + CT_HEADER, ctn, &ctn)) != TSAFE_OK) {
        free(buf);
        return tool_fail("serialize ciphertext", st);
    }
    memcpy(buf, CT_MAGIC, 4);
    buf[4] = 1;
    buf[5] = buf[6] = buf[7] = 0;
    tsafe_store_le32(buf + 8, (uint32_t)count);
    tsafe_store_le64(buf + 12, ctn);
    *len = CT_HEADER + ctn;
    st = io_write_file(outp, buf, *len, 0644);
    free(buf);
    if (st != TSAFE_OK) {
        snprintf(what, sizeof what, "write '%s'", outp);
        return tool_fail(what, st);
    }
    return 0;
}

int cmd_encrypt(int argc, char **argv)
{
    const char *keys = NULL, *in = NULL, *outp = NULL;
    tool_opt o[] = {{"--keys", OPT_STR, &keys, 0},
                    {"--input", OPT_STR, &in, 0},
                    {"--output", OPT_STR, &outp, 0}};
    int rc = opts_parse("encrypt", argc, argv, 1, o, sizeof o / sizeof o[0], NULL, 0, NULL);
    if (rc == OPTS_HELP) {
        fputs(k_encrypt_help, stdout);
        return 0;
    }
    if (rc)
        return rc;
    if (!keys || !in || !outp)
        return tool_usage("encrypt: --keys, --input and --output are required");
    char what[4200];
    float *v = NULL;
    size_t count = 0;
    tsafe_status st = io_read_f32(in, &v, &count);
    if (st != TSAFE_OK) {
        snprintf(what, sizeof what, "input '%s'%s", in,
                 st == TSAFE_E_SHAPE ? ": size is not a multiple of 4 bytes (float32)" : "");
        return tool_fail(what, st);
    }
    keyset k;
    if ((rc = load_keys(keys, &k)) != 0) {
        free(v);
        return rc;
    }
    size_t slots = tsafe_context_slots(k.ctx);
    double *d = NULL;
    size_t len = 0;
    tsafe_ciphertext *ct = NULL;
    rc = 1;
    if (check_values(in, v, count, slots))
        goto out;
    if (!(d = malloc(count * sizeof *d))) {
        tool_fail("encrypt", TSAFE_E_NOMEM);
        goto out;
    }
    for (size_t i = 0; i < count; i++)
        d[i] = v[i];
    const tsafe_params *p = tsafe_context_params(k.ctx);
    if ((st = tsafe_ciphertext_create(k.ctx, &ct)) != TSAFE_OK ||
        (st = tsafe_ckks_encrypt_values_symmetric(k.ctx, k.sk, d, NULL, count, p->scale,
                                                  tsafe_context_max_level(k.ctx), NULL, ct)) !=
            TSAFE_OK) {
        snprintf(what, sizeof what, "encrypt '%s'", in);
        tool_fail(what, st);
        goto out;
    }
    if (write_ct_file(k.ctx, ct, count, outp, &len))
        goto out;
    printf("encrypted %zu values (N=%zu, level %u, scale 2^%.0f) into %s (%zu bytes)\n", count,
           tsafe_context_n(k.ctx), tsafe_context_max_level(k.ctx), log2(p->scale), outp, len);
    rc = 0;
out:
    if (d)
        sodium_memzero(d, count * sizeof *d);
    sodium_memzero(v, count * sizeof *v);
    free(d);
    free(v);
    tsafe_ciphertext_free(ct);
    keyset_free(&k);
    return rc;
}

/* ----------------------------------------------------------- decrypt */

/* A file written by cmd_encrypt: header checked, *count read from it. 0, or
 * 1 after saying why. */
static int read_ct_file(const char *in, uint8_t **b, size_t *n, size_t *count)
{
    char what[4200];
    tsafe_status st = io_read_file(in, IO_MAX_FILE, b, n);
    if (st != TSAFE_OK) {
        snprintf(what, sizeof what, "read ciphertext '%s'", in);
        return tool_fail(what, st);
    }
    const uint8_t *h = *b;
    if (*n < CT_HEADER || memcmp(h, CT_MAGIC, 4) || h[4] != 1 || h[5] || h[6] || h[7] ||
        tsafe_load_le64(h + 12) != *n - CT_HEADER) {
        free(*b);
        *b = NULL;
        snprintf(what, sizeof what, "ciphertext file '%s' (not written by 'tensafe encrypt')", in);
        return tool_fail(what, *n < CT_HEADER ? TSAFE_E_TRUNCATED : TSAFE_E_FORMAT);
    }
    *count = tsafe_load_le32(h + 8);
    return 0;
}

/* The first count slots of the serialized ciphertext ct (len bytes) into
 * f. 0, or 1 after saying why. */
static int decrypt_values(const keyset *k, const char *in, const uint8_t *ctb, size_t len,
                          size_t count, float *f)
{
    char what[4200];
    tsafe_ciphertext *ct = NULL;
    tsafe_plaintext *pt = NULL;
    double *d = malloc(count * sizeof *d);
    int rc = 1;
    tsafe_status st;
    if (!d) {
        tool_fail("decrypt", TSAFE_E_NOMEM);
        goto out;
    }
    if ((st = tsafe_ciphertext_deserialize(k->ctx, ctb, len, &ct)) != TSAFE_OK) {
        snprintf(what, sizeof what, "ciphertext '%s' (wrong keys or corrupt file)", in);
        tool_fail(what, st);
        goto out;
    }
    if ((st = tsafe_plaintext_create(k->ctx, &pt)) != TSAFE_OK ||
        (st = tsafe_ckks_decrypt(k->ctx, k->sk, ct, pt)) != TSAFE_OK ||
        (st = tsafe_ckks_decode(k->ctx, pt, d, count)) != TSAFE_OK) {
        snprintf(what, sizeof what, "decrypt '%s'", in);
        tool_fail(what, st);
        goto out;
    }
    for (size_t i = 0; i < count; i++)
        f[i] = (float)d[i];
    rc = 0;
out:
    if (d)
        sodium_memzero(d, count * sizeof *d);
    free(d);
    tsafe_plaintext_free(pt);
    tsafe_ciphertext_free(ct);
    return rc;
}

int cmd_decrypt(int argc, char **argv)
{
    const char *keys = NULL, *in = NULL, *outp = NULL;
    uint32_t want = 0;
    tool_opt o[] = {{"--keys", OPT_STR, &keys, 0},
                    {"--input", OPT_STR, &in, 0},
                    {"--output", OPT_STR, &outp, 0},
                    {"--count", OPT_U32, &want, 0}};
    int rc = opts_parse("decrypt", argc, argv, 1, o, sizeof o / sizeof o[0], NULL, 0, NULL);
    if (rc == OPTS_HELP) {
        fputs(k_decrypt_help, stdout);
        return 0;
    }
    if (rc)
        return rc;
    if (!keys || !in || !outp)
        return tool_usage("decrypt: --keys, --input and --output are required");
    char what[4200];
    uint8_t *b = NULL;
    size_t n = 0, count = 0;
    if ((rc = read_ct_file(in, &b, &n, &count)) != 0)
        return rc;
    keyset k;
    if ((rc = load_keys(keys, &k)) != 0) {
        free(b);
        return rc;
    }
    rc = 1;
    tsafe_status st;
    float *f = NULL;
    size_t slots = tsafe_context_slots(k.ctx);
    if (o[3].seen)
        count = want;
    if (count == 0 || count > slots) {
        snprintf(what, sizeof what, "decrypt '%s': count %zu, expected 1..%zu", in, count, slots);
        tool_fail(what, TSAFE_E_RANGE);
        goto out;
    }
    if (!(f = malloc(count * sizeof *f))) {
        tool_fail("decrypt", TSAFE_E_NOMEM);
        goto out;
    }
    if (decrypt_values(&k, in, b + CT_HEADER, n - CT_HEADER, count, f))
        goto out;
    if ((st = io_write_f32(outp, f, count)) != TSAFE_OK) {
        snprintf(what, sizeof what, "write '%s'", outp);
        tool_fail(what, st);
        goto out;
    }
    printf("decrypted %zu values into %s\n", count, outp);
    rc = 0;
out:
    if (f)
        sodium_memzero(f, count * sizeof *f);
    free(f);
    free(b);
    keyset_free(&k);
    return rc;
}
