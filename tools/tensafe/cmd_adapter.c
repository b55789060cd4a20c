/* `tensafe adapter inspect | reduce | pack | keygen | verify | make-random`
 * (make-random: a generator of test adapters). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "commands.h"
#include "io.h"

static const char k_help[] =
    "usage: tensafe adapter inspect DIR|PKG [--trusted-key HEX|FILE] [--json]\n"
    "       tensafe adapter reduce DIR|PKG (--rank K | --energy E [--max-rank K]) --out DIR2\n"
    "                              [--dtype F32|F16|BF16] [--trusted-key HEX|FILE]\n"
    "       tensafe adapter keygen --out PREFIX\n"
    "       tensafe adapter pack DIR --key SK_FILE --id ID --out PKG [--domain D]\n"
    "                            [--price P] [--creator C]\n"
    "       tensafe adapter verify PKG --trusted-key HEX|FILE [--json]\n"
    "       tensafe adapter make-random --out DIR [--dim D] [--out-dim D2] [--rank R]\n"
    "                              [--alpha A] [--modules M[,M...]] [--seed S] [--amp-a X]\n"
    "                              [--rank-pattern M=R,...] [--alpha-pattern M=A,...]\n"
    "                              [--dtype F32|F16|BF16] [--dist uniform|gaussian|heavy]\n"
    "\n"
    "inspect  modules, ranks, in/out dimensions, dtypes, alpha and scale of a PEFT\n"
    "         directory or of a signed package (verified with --trusted-key first)\n"
    "reduce   SVD rank reduction (Eckart-Young) of every module to a new PEFT directory,\n"
    "         keeping each module's scale; prints the energy kept and the relative\n"
    "         Frobenius error per module\n"
    "keygen   Ed25519 signing key pair: PREFIX.pub (32 bytes, hex) and PREFIX.key\n"
    "         (64 bytes, hex, mode 0600)\n"
    "pack     signed package of a PEFT directory: payload = adapter_model.safetensors,\n"
    "         manifest r, lora_alpha, use_rslora, rank_pattern and alpha_pattern from\n"
    "         adapter_config.json, targets = module projections; refused unless the\n"
    "         package reloads as the same modules\n"
    "verify   verify a package against a trusted public key and print its manifest\n"
    "make-random  a random test adapter (PEFT directory; not secret, --seed reproduces it)\n"
    "\n"
    "A package path of '-' reads it from standard input.\n";

static const char k_make_random_help[] =
    "usage: tensafe adapter make-random --out DIR [--dim D] [--out-dim D2] [--rank R]\n"
    "                                   [--alpha A] [--modules M[,M...]] [--seed S]\n"
    "                                   [--amp-a X] [--rank-pattern M=R,...]\n"
    "                                   [--alpha-pattern M=A,...] [--dtype F32|F16|BF16]\n"
    "                                   [--dist uniform|gaussian|heavy]\n"
    "\n"
    "Writes a PEFT directory (adapter_config.json + adapter_model.safetensors) with\n"
    "one module per name in --modules (default q_proj,v_proj; a bare projection name\n"
    "becomes layers.0.self_attn.NAME, or layers.0.mlp.NAME for gate/up/down), A\n"
    "uniform in [-X, X] (--amp-a, default 0.05) and B in [-0.05, 0.05]: D -> D2\n"
    "(default 64 -> D), rank R (default 4), alpha A (default 2R). --rank-pattern\n"
    "and --alpha-pattern give the named modules another rank or alpha, written as\n"
    "PEFT's rank_pattern / alpha_pattern. --seed S reproduces an adapter (default:\n"
    "a fresh random seed). Test data, not secret.\n"
    "--dist: how A and B are drawn, each at the root mean square of its uniform\n"
    "draw (X / sqrt 3, 0.05 / sqrt 3):\n"
    "  uniform   (default) as above\n"
    "  gaussian  normal, mean 0\n"
    "  heavy     Student t with 3 degrees of freedom (heavy tails: a few entries\n"
    "            many times the rest), and in each matrix one planted outlier of\n"
    "            50 times the t's scale, random sign and place (as trained\n"
    "            adapters with outlier weights; the sealed modes' hard case)\n";

/* ------------------------------------------------------------ inspect */

static json_t *module_json(const tsafe_lora_module_info *m)
{
    return json_pack("{s:s, s:s, s:i, s:i, s:I, s:I, s:I, s:s, s:f, s:f, s:f}", "name", m->name,
                     "proj", m->proj, "layer", m->layer, "expert", m->expert, "rank",
                     (json_int_t)m->rank, "in_dim", (json_int_t)m->in_dim, "out_dim",
                     (json_int_t)m->out_dim, "dtype", tsafe_dtype_name(m->source_dtype), "alpha",
                     m->alpha, "scale", m->scale, "max_abs_a", io_module_max_abs_a(m));
}

/* Prints j (taken: NULL after a failed build) indented on stdout; 0, or 1
 * after saying what failed. */
static int print_json(json_t *j, const char *what)
{
    char *s = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
    json_decref(j);
    int rc = s ? 0 : tool_fail(what, TSAFE_E_NOMEM);
    if (s)
        printf("%s\n", s);
    free(s);
    return rc;
}

static int inspect(const char *path, const char *key, int json)
{
    tsafe_lora_adapter *ad = NULL;
    char what[4200];
    tsafe_status st = io_load_adapter(path, key, &ad, what, sizeof what);
    if (st != TSAFE_OK)
        return tool_fail(what, st);
    tsafe_lora_config cfg;
    if ((st = tsafe_lora_adapter_config(ad, &cfg)) != TSAFE_OK) {
        tsafe_lora_adapter_free(ad);
        return tool_fail("adapter config", st);
    }
    size_t n = tsafe_lora_adapter_module_count(ad);
    int rc = 0;
    if (json) {
        json_t *mods = json_array(), *targets = json_array();
        for (size_t i = 0; i < tsafe_lora_adapter_target_count(ad); i++)
            json_array_append_new(targets, json_string(tsafe_lora_adapter_target(ad, i)));
        for (size_t i = 0; i < n; i++) {
            tsafe_lora_module_info m;
            if (tsafe_lora_adapter_module(ad, i, &m) == TSAFE_OK)
                json_array_append_new(mods, module_json(&m));
        }
        json_t *j = json_pack("{s:s, s:s, s:I, s:f, s:b, s:o, s:o}", "path", path, "kind",
                              io_is_dir(path) == 1 ? "peft" : "package", "r", (json_int_t)cfg.r,
                              "lora_alpha", cfg.lora_alpha, "use_rslora", cfg.use_rslora,
                              "target_modules", targets, "modules", mods);
        rc = print_json(j, "adapter inspect: JSON output");
    } else {
        printf("adapter %s (%s): %zu modules, r=%zu, lora_alpha=%g%s\n", path,
               io_is_dir(path) == 1 ? "PEFT directory" : "verified package", n, cfg.r,
               cfg.lora_alpha, cfg.use_rslora ? ", rsLoRA" : "");
        printf("target_modules:");
        for (size_t i = 0; i < tsafe_lora_adapter_target_count(ad); i++)
            printf(" %s", tsafe_lora_adapter_target(ad, i));
        printf("\n%-44s %5s %7s %7s %5s %9s %9s %9s\n", "module", "rank", "in", "out", "dtype",
               "alpha", "scale", "max|A|");
        for (size_t i = 0; i < n; i++) {
            tsafe_lora_module_info m;
            if (tsafe_lora_adapter_module(ad, i, &m) != TSAFE_OK)
                continue;
            printf("%-44s %5zu %7zu %7zu %5s %9g %9g %9.3g\n", m.name, m.rank, m.in_dim,
                   m.out_dim, tsafe_dtype_name(m.source_dtype), m.alpha, m.scale,
                   io_module_max_abs_a(&m));
        }
    }
    tsafe_lora_adapter_free(ad);
    return rc;
}

/* ------------------------------------------------------------- reduce */

static tsafe_dtype parse_dtype(const char *s)
{
    tsafe_dtype d = tsafe_dtype_from_name(s);
    return d == TSAFE_DTYPE_F32 || d == TSAFE_DTYPE_F16 || d == TSAFE_DTYPE_BF16
               ? d
               : TSAFE_DTYPE_INVALID;
}

static int reduce(const char *path, const char *key, tsafe_svd_options *opt, const char *out,
                  tsafe_dtype dtype)
{
    tsafe_lora_adapter *ad = NULL, *red = NULL;
    char what[4200];
    tsafe_status st = io_load_adapter(path, key, &ad, what, sizeof what);
    if (st != TSAFE_OK)
        return tool_fail(what, st);
    tsafe_lora_config cfg;
    size_t n = tsafe_lora_adapter_module_count(ad);
    int rc = 1;
    if ((st = tsafe_lora_adapter_config(ad, &cfg)) != TSAFE_OK) {
        tool_fail("adapter config", st);
        goto out;
    }
    printf("%-44s %5s %5s %10s %12s\n", "module", "rank", "kept", "energy", "rel_frob_err");
    for (size_t i = 0; i < n; i++) {
        tsafe_lora_module_info m;
        tsafe_svd_result *r = NULL;
        if ((st = tsafe_lora_adapter_module(ad, i, &m)) != TSAFE_OK)
            break;
        tsafe_svd_options o = *opt;
        if (o.select == TSAFE_SVD_FIXED_RANK) {
            size_t cap = m.rank < m.in_dim ? m.rank : m.in_dim;
            cap = cap < m.out_dim ? cap : m.out_dim;
            if (o.rank > cap)
                o.rank = cap; /* a module already below the target keeps its rank */
        }
        if ((st = tsafe_svd_reduce(m.A, m.B, m.rank, m.in_dim, m.out_dim, &o, &r)) != TSAFE_OK) {
            snprintf(what, sizeof what, "SVD of module '%s'", m.name);
            tool_fail(what, st);
            goto out;
        }
        /* keep the runtime scale: alpha' = s k (s sqrt(k) with rsLoRA) */
        double k = (double)r->rank;
        double alpha = m.scale * (cfg.use_rslora ? sqrt(k) : k);
        if (!red) {
            tsafe_lora_config rc_cfg = cfg;
            rc_cfg.r = r->rank;
            rc_cfg.lora_alpha = alpha;
            if ((st = tsafe_lora_adapter_create(&rc_cfg, &red)) != TSAFE_OK) {
                tsafe_svd_result_free(r);
                tool_fail("create reduced adapter", st);
                goto out;
            }
        }
        st = tsafe_lora_adapter_add_module(red, m.name, r->rank, m.in_dim, m.out_dim, r->A, r->B,
                                           alpha);
        printf("%-44s %5zu %5zu %10.6f %12.3e\n", m.name, m.rank, r->rank, r->energy_retained,
               r->rel_frobenius_error);
        tsafe_svd_result_free(r);
        if (st != TSAFE_OK) {
            snprintf(what, sizeof what, "add reduced module '%s'", m.name);
            tool_fail(what, st);
            goto out;
        }
        io_progress("reduce", i + 1, n);
    }
    if (st != TSAFE_OK) {
        tool_fail("adapter module", st);
        goto out;
    }
    if ((st = tsafe_lora_adapter_save_peft(red, out, dtype)) != TSAFE_OK) {
        snprintf(what, sizeof what, "write PEFT directory '%s'", out);
        tool_fail(what, st);
        goto out;
    }
    printf("reduced adapter written to %s (%s)\n", out, tsafe_dtype_name(dtype));
    rc = 0;
out:
    tsafe_lora_adapter_free(red);
    tsafe_lora_adapter_free(ad);
    return rc;
}

/* ------------------------------------------------------------- keygen */

static int keygen(const char *prefix)
{
    uint8_t pk[32], sk[64];
    char hex[129], path[4096], what[4200];
    tsafe_status st = tsafe_package_keypair(pk, sk);
    if (st != TSAFE_OK)
        return tool_fail("adapter keygen", st);
    int rc = 0;
    snprintf(path, sizeof path, "%s.key", prefix);
    io_hex_encode(sk, 64, hex);
    hex[128] = '\n';
    if ((st = io_write_file(path, hex, 129, 0600)) != TSAFE_OK) {
        snprintf(what, sizeof what, "write '%s'", path);
        rc = tool_fail(what, st);
    }
    sodium_memzero(hex, sizeof hex);
    sodium_memzero(sk, sizeof sk);
    if (rc)
        return rc;
    printf("signing key: %s (mode 0600)\n", path);
    snprintf(path, sizeof path, "%s.pub", prefix);
    io_hex_encode(pk, 32, hex);
    printf("public key:  %s  %s\n", path, hex);
    hex[64] = '\n';
    if ((st = io_write_file(path, hex, 65, 0644)) != TSAFE_OK) {
        snprintf(what, sizeof what, "write '%s'", path);
        return tool_fail(what, st);
    }
    return 0;
}

/* --------------------------------------------------------------- pack */

/* PEFT's rank_pattern / alpha_pattern of DIR/adapter_config.json in file
 * order (the loader already validated them); keys borrowed from *root. */
static tsafe_status config_patterns(const char *dir, json_t **root, tsafe_package_pattern **pat,
                                    size_t *n_pat)
{
    char path[4096];
    tsafe_status st = io_join(path, sizeof path, dir, "adapter_config.json");
    if (st != TSAFE_OK)
        return st;
    *root = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
    if (!*root)
        return TSAFE_E_JSON;
    static const char *const names[2] = {"rank_pattern", "alpha_pattern"};
    for (int k = 0; k < 2; k++) {
        json_t *o = json_object_get(*root, names[k]);
        size_t n = json_is_object(o) ? json_object_size(o) : 0;
        if (!(pat[k] = calloc(n ? n : 1, sizeof *pat[k])))
            return TSAFE_E_NOMEM;
        const char *key;
        json_t *v;
        n_pat[k] = 0;
        if (n)
            json_object_foreach(o, key, v) {
                pat[k][n_pat[k]].key = key;
                pat[k][n_pat[k]++].value = json_number_value(v);
            }
    }
    return TSAFE_OK;
}

/* Same modules (names, shapes, rank, alpha, scale, factors bit for bit)? */
static int same_adapter(const tsafe_lora_adapter *a, const tsafe_lora_adapter *b, char *what,
                        size_t cap)
{
    size_t n = tsafe_lora_adapter_module_count(a);
    if (tsafe_lora_adapter_module_count(b) != n) {
        snprintf(what, cap, "%zu modules instead of %zu", tsafe_lora_adapter_module_count(b), n);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        tsafe_lora_module_info x, y;
        if (tsafe_lora_adapter_module(a, i, &x) != TSAFE_OK ||
            tsafe_lora_adapter_module(b, i, &y) != TSAFE_OK || strcmp(x.name, y.name) ||
            x.rank != y.rank || x.in_dim != y.in_dim || x.out_dim != y.out_dim ||
            x.alpha != y.alpha || x.scale != y.scale ||
            memcmp(x.A, y.A, x.rank * x.in_dim * sizeof *x.A) ||
            memcmp(x.B, y.B, x.out_dim * x.rank * sizeof *x.B)) {
            snprintf(what, cap, "module %zu ('%s'): rank %zu / alpha %g / scale %g came back as "
                     "'%s' rank %zu / alpha %g / scale %g (or other factors)",
                     i, x.name, x.rank, x.alpha, x.scale, y.name, y.rank, y.alpha, y.scale);
            return 0;
        }
    }
    return 1;
}

/* Borrowed by the manifest while it is packed; freed by pack_parts_free. */
typedef struct {
    json_t *cfg_json;                 /* owns the pattern keys */
    tsafe_package_pattern *pat[2];    /* rank_pattern, alpha_pattern */
    const char **targets;             /* module projections, borrowed from the adapter */
} pack_parts;

static void pack_parts_free(pack_parts *pp)
{
    json_decref(pp->cfg_json);
    free(pp->pat[0]);
    free(pp->pat[1]);
    free(pp->targets);
}

/* The manifest carries PEFT's r, lora_alpha, use_rslora and patterns as
 * the config has them, and each projection the adapter targets once: the
 * package reloads as the same adapter (checked before anything is
 * written). 0, or 1 after saying why. */
static int fill_manifest(const char *dir, const tsafe_lora_adapter *ad,
                         tsafe_package_manifest *m, pack_parts *pp)
{
    char what[4200];
    tsafe_lora_config cfg;
    size_t n = tsafe_lora_adapter_module_count(ad), n_pat[2] = {0, 0};
    tsafe_status st;
    if ((st = tsafe_lora_adapter_config(ad, &cfg)) != TSAFE_OK)
        return tool_fail("adapter config", st);
    if ((st = config_patterns(dir, &pp->cfg_json, pp->pat, n_pat)) != TSAFE_OK) {
        snprintf(what, sizeof what, "pack '%s': rank_pattern / alpha_pattern of its "
                 "adapter_config.json", dir);
        return tool_fail(what, st);
    }
    m->rank_pattern = pp->pat[0];
    m->n_rank_pattern = n_pat[0];
    m->alpha_pattern = pp->pat[1];
    m->n_alpha_pattern = n_pat[1];
    m->use_rslora = cfg.use_rslora != 0;
    if (!(pp->targets = calloc(n ? n : 1, sizeof *pp->targets)))
        return tool_fail("pack", TSAFE_E_NOMEM);
    m->n_targets = 0;
    for (size_t i = 0; i < n; i++) {
        tsafe_lora_module_info mi;
        if ((st = tsafe_lora_adapter_module(ad, i, &mi)) != TSAFE_OK)
            return tool_fail("adapter module", st);
        size_t k = 0;
        while (k < m->n_targets && strcmp(pp->targets[k], mi.proj))
            k++;
        if (k == m->n_targets)
            pp->targets[m->n_targets++] = mi.proj;
    }
    m->targets = pp->targets;
    m->rank = (uint32_t)cfg.r;
    m->alpha = cfg.lora_alpha;
    return 0;
}

/* The Ed25519 signing key: 64 raw bytes or 128 hex characters. kb (the
 * file's bytes, wiped and freed by the caller) and sk hold secrets. 0, or 1
 * after saying why. */
static int read_signing_key(const char *key_file, uint8_t sk[64], uint8_t **kb, size_t *kn)
{
    char what[4200];
    tsafe_status st = io_read_file(key_file, 4096, kb, kn);
    if (st != TSAFE_OK) {
        snprintf(what, sizeof what, "read signing key '%s'", key_file);
        return tool_fail(what, st);
    }
    if (*kn == 64)
        memcpy(sk, *kb, 64);
    else if (io_hex_decode((const char *)*kb, sk, 64) != TSAFE_OK) {
        snprintf(what, sizeof what, "signing key '%s' (128 hex characters from 'adapter keygen')",
                 key_file);
        return tool_fail(what, TSAFE_E_KEY);
    }
    return 0;
}

/* Reloads the package through the verified path: it must give back the
 * same modules. 0, or 1 after saying why. */
static int check_reload(const char *dir, const tsafe_lora_adapter *ad, const uint8_t *pkg,
                        size_t pkg_len, const uint8_t pk[32])
{
    char what[4200];
    tsafe_lora_adapter *back = NULL;
    tsafe_error_info err = {0};
    tsafe_lora_load_options lo = {TSAFE_LORA_FUSED_IN_OUT, &err};
    char diff[1024] = "";
    tsafe_status st = tsafe_lora_adapter_load_package(pkg, pkg_len, pk, &lo, &back);
    int same = st == TSAFE_OK && same_adapter(ad, back, diff, sizeof diff);
    tsafe_lora_adapter_free(back);
    if (same)
        return 0;
    snprintf(what, sizeof what, "pack '%s': the package does not reload as the same adapter: %s",
             dir, st ? err.detail : diff);
    return tool_fail(what, st ? st : TSAFE_E_ADAPTER);
}

static int pack(const char *dir, const char *key_file, tsafe_package_manifest *m,
                const char *out)
{
    char path[4096], what[4200];
    tsafe_lora_adapter *ad = NULL;
    uint8_t *st_bytes = NULL, *kb = NULL, *pkg = NULL, sk[64];
    size_t st_len = 0, kn = 0, pkg_len = 0;
    pack_parts pp = {NULL, {NULL, NULL}, NULL};
    int rc = 1;
    tsafe_status st;
    int have_sk = 0;
    if (io_is_dir(dir) != 1) {
        snprintf(what, sizeof what, "'%s' is not a PEFT directory", dir);
        return tool_fail(what, TSAFE_E_NOT_FOUND);
    }
    if ((st = io_load_adapter(dir, NULL, &ad, what, sizeof what)) != TSAFE_OK)
        return tool_fail(what, st);
    size_t n = tsafe_lora_adapter_module_count(ad);
    if (fill_manifest(dir, ad, m, &pp))
        goto out;
    if ((st = io_join(path, sizeof path, dir, "adapter_model.safetensors")) != TSAFE_OK ||
        (st = io_read_file(path, IO_MAX_FILE, &st_bytes, &st_len)) != TSAFE_OK) {
        snprintf(what, sizeof what, "read '%s'", path);
        tool_fail(what, st);
        goto out;
    }
    have_sk = 1;
    if (read_signing_key(key_file, sk, &kb, &kn))
        goto out;
    if ((st = tsafe_package_create(m, st_bytes, st_len, sk, &pkg, &pkg_len)) != TSAFE_OK) {
        snprintf(what, sizeof what, "pack '%s': create package (manifest: id, rank %u, alpha %g, "
                 "%zu targets, %zu rank / %zu alpha patterns, price %g)", dir, m->rank, m->alpha,
                 m->n_targets, m->n_rank_pattern, m->n_alpha_pattern, m->price_per_1k_tokens);
        tool_fail(what, st);
        goto out;
    }
    if (check_reload(dir, ad, pkg, pkg_len, sk + 32))
        goto out;
    if ((st = io_write_file(out, pkg, pkg_len, 0644)) != TSAFE_OK) {
        snprintf(what, sizeof what, "write '%s'", out);
        tool_fail(what, st);
        goto out;
    }
    char hex[65];
    io_hex_encode(sk + 32, 32, hex);
    printf("package %s: %zu bytes, %zu modules, rank %u, alpha %g%s, %zu rank / %zu alpha "
           "patterns, payload %zu bytes, signed by %s\n",
           out, pkg_len, n, m->rank, m->alpha, m->use_rslora ? " (rsLoRA)" : "", m->n_rank_pattern,
           m->n_alpha_pattern, st_len, hex);
    rc = 0;
out:
    if (have_sk)
        sodium_memzero(sk, sizeof sk);
    if (kb)
        sodium_memzero(kb, kn);
    free(kb);
    free(st_bytes);
    pack_parts_free(&pp);
    tsafe_package_bytes_free(pkg);
    tsafe_lora_adapter_free(ad);
    return rc;
}

/* ------------------------------------------------------------- verify */

/* The verified manifest as one JSON object on stdout. 0, or 1 after saying
 * why. */
static int print_manifest_json(const tsafe_package_manifest *m, const char *khex, size_t plen,
                               const char *dhex)
{
    json_t *t = json_array();
    for (size_t i = 0; i < m->n_targets; i++)
        json_array_append_new(t, json_string(m->targets[i]));
    json_t *j = json_pack("{s:b, s:s, s:s, s:s, s:I, s:f, s:o, s:f, s:s, s:I, s:s}",
                          "verified", 1, "signer", khex, "adapter_id", m->adapter_id, "domain",
                          m->domain, "rank", (json_int_t)m->rank, "alpha", m->alpha, "targets",
                          t, "price_per_1k_tokens", m->price_per_1k_tokens, "creator",
                          m->creator, "payload_bytes", (json_int_t)plen, "payload_blake2b",
                          dhex);
    json_t *rp = json_object(), *ap = json_object();
    for (size_t i = 0; rp && i < m->n_rank_pattern; i++)
        json_object_set_new(rp, m->rank_pattern[i].key,
                            json_integer((json_int_t)m->rank_pattern[i].value));
    for (size_t i = 0; ap && i < m->n_alpha_pattern; i++)
        json_object_set_new(ap, m->alpha_pattern[i].key, json_real(m->alpha_pattern[i].value));
    if (!j) { /* set_new below takes rp and ap, even when it fails */
        json_decref(rp);
        json_decref(ap);
    } else { /* each set_new takes its value, so all three are tried */
        int bad = json_object_set_new(j, "rank_pattern", rp);
        bad |= json_object_set_new(j, "alpha_pattern", ap);
        bad |= json_object_set_new(j, "use_rslora", json_boolean(m->use_rslora));
        if (bad) {
            json_decref(j);
            j = NULL;
        }
    }
    return print_json(j, "adapter verify: JSON output");
}

/* The verified manifest as text on stdout. */
static void print_manifest_text(const char *path, const tsafe_package_manifest *m,
                                const char *khex, size_t plen, const char *dhex)
{
    printf("package %s: signature OK (trusted key %s)\n", path, khex);
    printf("  adapter_id  %s\n  domain      %s\n  rank        %u\n  alpha       %g\n",
           m->adapter_id, m->domain, m->rank, m->alpha);
    printf("  targets    ");
    for (size_t i = 0; i < m->n_targets; i++)
        printf(" %s", m->targets[i]);
    printf("\n");
    if (m->use_rslora)
        printf("  use_rslora  true\n");
    for (int k = 0; k < 2; k++) {
        const tsafe_package_pattern *pt = k ? m->alpha_pattern : m->rank_pattern;
        size_t np = k ? m->n_alpha_pattern : m->n_rank_pattern;
        if (np)
            printf("  %s", k ? "alpha_pattern" : "rank_pattern ");
        for (size_t i = 0; i < np; i++)
            printf(" %s=%g", pt[i].key, pt[i].value);
        if (np)
            printf("\n");
    }
    printf("  price       %g per 1k tokens\n  creator     %s\n", m->price_per_1k_tokens,
           m->creator);
    printf("  payload     %zu bytes, BLAKE2b-256 %s\n", plen, dhex);
}

static int verify(const char *path, const char *key, int json)
{
    char what[4200];
    uint8_t pk[32], *b = NULL;
    size_t n = 0;
    tsafe_status st = io_load_trusted_key(key, pk);
    if (st != TSAFE_OK) {
        snprintf(what, sizeof what, "trusted key '%s' (64 hex characters or a file of them)", key);
        return tool_fail(what, st);
    }
    if ((st = io_read_file(path, IO_MAX_FILE, &b, &n)) != TSAFE_OK) {
        snprintf(what, sizeof what, "read package '%s'", path);
        return tool_fail(what, st);
    }
    tsafe_package *p = NULL;
    st = tsafe_package_open(b, n, pk, &p);
    free(b);
    if (st != TSAFE_OK) {
        snprintf(what, sizeof what, "verify package '%s'", path);
        return tool_fail(what, st);
    }
    tsafe_package_manifest m;
    const uint8_t *payload;
    size_t plen;
    uint8_t dig[32];
    char dhex[65], khex[65];
    if ((st = tsafe_package_manifest_get(p, &m)) != TSAFE_OK ||
        (st = tsafe_package_payload(p, &payload, &plen)) != TSAFE_OK ||
        (st = tsafe_package_payload_digest(p, dig)) != TSAFE_OK) {
        tsafe_package_free(p);
        return tool_fail("read verified package", st);
    }
    io_hex_encode(dig, 32, dhex);
    io_hex_encode(pk, 32, khex);
    int rc = json ? print_manifest_json(&m, khex, plen, dhex) : 0;
    if (!json)
        print_manifest_text(path, &m, khex, plen, dhex);
    tsafe_package_free(p);
    return rc;
}

/* -------------------------------------------------------- make-random */

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef enum { DIST_UNIFORM, DIST_GAUSSIAN, DIST_HEAVY } dist_kind;

/* Uniform in [-1, 1). */
static double unit(uint64_t *s)
{
    return (double)(mix(s) >> 11) * 0x1p-52 - 1.0;
}

/* Standard normal (Box-Muller; the first uniform in (0, 1]). */
static double normal(uint64_t *s)
{
    double a = ((double)(mix(s) >> 11) + 1) * 0x1p-53, b = (double)(mix(s) >> 11) * 0x1p-53;
    return sqrt(-2 * log(a)) * cos(2 * M_PI * b);
}

/* n values at root mean square amp / sqrt(3) (that of uniform [-amp, amp]):
 * uniform, normal, or Student t3 (normal / sqrt(chi2_3 / 3), rms sqrt 3:
 * scale amp / 3) with one entry set to +-50 times that scale. */
static void fill(float *v, size_t n, double amp, dist_kind d, uint64_t *s)
{
    for (size_t i = 0; i < n; i++) {
        double x = unit(s) * amp;
        if (d == DIST_GAUSSIAN) {
            x = normal(s) * amp / sqrt(3.0);
        } else if (d == DIST_HEAVY) {
            double g = normal(s), c = 0;
            for (int k = 0; k < 3; k++) {
                double h = normal(s);
                c += h * h;
            }
            x = g / sqrt(c / 3) * amp / 3;
        }
        v[i] = (float)x;
    }
    if (d == DIST_HEAVY && n) {
        size_t at = (size_t)(mix(s) % n);
        v[at] = (float)((mix(s) & 1 ? 50 : -50) * amp / 3);
    }
}

/* --rank-pattern / --alpha-pattern "NAME=V,...": the value for module item
 * `item` (its name as given to --modules), else dflt; -1 when malformed. */
static int pattern_for(const char *list, const char *item, double dflt, double *v)
{
    *v = dflt;
    if (!list)
        return 0;
    size_t il = strlen(item);
    for (const char *p = list; *p;) {
        const char *eq = strchr(p, '='), *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        if (!eq || eq > end || eq == p)
            return -1;
        char *e = NULL;
        double x = strtod(eq + 1, &e);
        if (e != end || !isfinite(x) || !(x > 0))
            return -1;
        if ((size_t)(eq - p) == il && !strncmp(p, item, il))
            *v = x;
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* Test adapters: layer-0 attention modules with random A and B drawn from
 * dist (not secret; a fixed --seed reproduces them). rank_pat / alpha_pat
 * give some modules another rank / alpha (written as PEFT patterns). */
static int make_random(const char *out, uint32_t dim, uint32_t out_dim, uint32_t rank,
                       double alpha, const char *modules, uint64_t seed, double amp_a,
                       tsafe_dtype dtype, const char *rank_pat, const char *alpha_pat,
                       dist_kind dist)
{
    char *store = NULL, name[256], what[512];
    const char *items[64];
    size_t nm = opts_split(modules, &store, items, 64);
    if (!nm) {
        free(store);
        return tool_usage("adapter make-random: --modules needs 1..64 comma-separated names");
    }
    uint32_t max_rank = rank;
    for (size_t i = 0; i < nm; i++) {
        double r, a;
        if (pattern_for(rank_pat, items[i], rank, &r) || r != (double)(uint32_t)r || r > 4096 ||
            pattern_for(alpha_pat, items[i], alpha, &a)) {
            free(store);
            return tool_usage("adapter make-random: --rank-pattern / --alpha-pattern take "
                              "NAME=VALUE,... (ranks whole, 1..4096; alphas positive)");
        }
        max_rank = r > max_rank ? (uint32_t)r : max_rank;
    }
    tsafe_lora_config cfg = {rank, alpha, 0, 0};
    tsafe_lora_adapter *ad = NULL;
    float *A = malloc((size_t)max_rank * dim * sizeof *A),
          *B = malloc((size_t)out_dim * max_rank * sizeof *B);
    tsafe_status st = A && B ? tsafe_lora_adapter_create(&cfg, &ad) : TSAFE_E_NOMEM;
    int rc = 1;
    if (st != TSAFE_OK) {
        tool_fail("adapter make-random", st);
        goto out;
    }
    for (size_t i = 0; i < nm; i++) {
        double r_i, a_i;
        (void)pattern_for(rank_pat, items[i], rank, &r_i); /* checked above */
        (void)pattern_for(alpha_pat, items[i], alpha, &a_i);
        uint32_t rk = (uint32_t)r_i;
        if (strchr(items[i], '.'))
            snprintf(name, sizeof name, "%s", items[i]);
        else
            snprintf(name, sizeof name, "layers.0.%s.%s",
                     strstr(items[i], "proj") && (items[i][0] == 'g' || items[i][0] == 'u' ||
                                                  items[i][0] == 'd')
                         ? "mlp"
                         : "self_attn",
                     items[i]);
        fill(A, (size_t)rk * dim, amp_a, dist, &seed);
        fill(B, (size_t)out_dim * rk, 0.05, dist, &seed);
        if ((st = tsafe_lora_adapter_add_module(ad, name, rk, dim, out_dim, A, B, a_i)) !=
            TSAFE_OK) {
            snprintf(what, sizeof what, "add module '%s'", name);
            tool_fail(what, st);
            goto out;
        }
    }
    if ((st = tsafe_lora_adapter_save_peft(ad, out, dtype)) != TSAFE_OK) {
        snprintf(what, sizeof what, "write PEFT directory '%.400s'", out);
        tool_fail(what, st);
        goto out;
    }
    static const char *dist_names[] = {"uniform", "gaussian", "heavy-tailed + outlier"};
    printf("random adapter written to %s: %zu modules, %u -> %u, rank %u, alpha %g%s, %s, %s\n",
           out, nm, dim, out_dim, rank, alpha, rank_pat || alpha_pat ? " (with patterns)" : "",
           tsafe_dtype_name(dtype), dist_names[dist]);
    rc = 0;
out:
    free(store);
    free(A);
    free(B);
    tsafe_lora_adapter_free(ad);
    return rc;
}

/* --------------------------------------------------------------- main */

/* Every option of every subcommand; the enum names their slots in
 * adapter_opts' table and seen[]. */
enum {
    O_TRUSTED_KEY, O_JSON, O_RANK, O_ENERGY, O_MAX_RANK, O_OUT, O_DTYPE, O_KEY, O_ID, O_DOMAIN,
    O_PRICE, O_CREATOR, O_DIM, O_OUT_DIM, O_MODULES, O_ALPHA, O_SEED, O_AMP_A, O_RANK_PAT,
    O_ALPHA_PAT, O_DIST, O_COUNT
};

typedef struct {
    const char *key, *out, *dtype_s, *id, *domain, *creator, *modules, *pos, *rank_pat,
        *alpha_pat, *dist_s;
    int json;
    uint32_t rank, max_rank, dim, out_dim, seed_u;
    double energy, price, alpha, amp_a;
    int seen[O_COUNT];
    char cmdname[64];
} adapter_args;

#define OPT(o) (1u << (o))
/* Which options each subcommand accepts: a set of the enum's slots. */
static const struct {
    const char *name;
    int npos;
    uint32_t allowed;
} k_subs[] = {
    {"inspect", 1, OPT(O_TRUSTED_KEY) | OPT(O_JSON)},
    {"reduce", 1, OPT(O_TRUSTED_KEY) | OPT(O_RANK) | OPT(O_ENERGY) | OPT(O_MAX_RANK) | OPT(O_OUT) |
                      OPT(O_DTYPE)},
    {"keygen", 0, OPT(O_OUT)},
    {"pack", 1, OPT(O_OUT) | OPT(O_KEY) | OPT(O_ID) | OPT(O_DOMAIN) | OPT(O_PRICE) |
                    OPT(O_CREATOR)},
    {"verify", 1, OPT(O_TRUSTED_KEY) | OPT(O_JSON)},
    {"make-random", 0, OPT(O_RANK) | OPT(O_OUT) | OPT(O_DTYPE) | OPT(O_DIM) | OPT(O_OUT_DIM) |
                           OPT(O_MODULES) | OPT(O_ALPHA) | OPT(O_SEED) | OPT(O_AMP_A) |
                           OPT(O_RANK_PAT) | OPT(O_ALPHA_PAT) | OPT(O_DIST)},
};

/* Parses argv[2..] for subcommand si into a; OPTS_HELP after printing the
 * help, else 0 or a usage status. */
static int parse_adapter_args(int argc, char **argv, int si, adapter_args *a)
{
    tool_opt o[O_COUNT] = {
        [O_TRUSTED_KEY] = {"--trusted-key", OPT_STR, &a->key, 0},
        [O_JSON] = {"--json", OPT_FLAG, &a->json, 0},
        [O_RANK] = {"--rank", OPT_U32, &a->rank, 0},
        [O_ENERGY] = {"--energy", OPT_DOUBLE, &a->energy, 0},
        [O_MAX_RANK] = {"--max-rank", OPT_U32, &a->max_rank, 0},
        [O_OUT] = {"--out", OPT_STR, &a->out, 0},
        [O_DTYPE] = {"--dtype", OPT_STR, &a->dtype_s, 0},
        [O_KEY] = {"--key", OPT_STR, &a->key, 0},
        [O_ID] = {"--id", OPT_STR, &a->id, 0},
        [O_DOMAIN] = {"--domain", OPT_STR, &a->domain, 0},
        [O_PRICE] = {"--price", OPT_DOUBLE, &a->price, 0},
        [O_CREATOR] = {"--creator", OPT_STR, &a->creator, 0},
        [O_DIM] = {"--dim", OPT_U32, &a->dim, 0},
        [O_OUT_DIM] = {"--out-dim", OPT_U32, &a->out_dim, 0},
        [O_MODULES] = {"--modules", OPT_STR, &a->modules, 0},
        [O_ALPHA] = {"--alpha", OPT_DOUBLE, &a->alpha, 0},
        [O_SEED] = {"--seed", OPT_U32, &a->seed_u, 0},
        [O_AMP_A] = {"--amp-a", OPT_DOUBLE, &a->amp_a, 0},
        [O_RANK_PAT] = {"--rank-pattern", OPT_STR, &a->rank_pat, 0},
        [O_ALPHA_PAT] = {"--alpha-pattern", OPT_STR, &a->alpha_pat, 0},
        [O_DIST] = {"--dist", OPT_STR, &a->dist_s, 0},
    };
    tool_opt allowed[O_COUNT];
    size_t na = 0, npos = 0;
    for (int i = 0; i < O_COUNT; i++)
        if (k_subs[si].allowed & OPT(i))
            allowed[na++] = o[i];
    const char *pos[1] = {NULL};
    int rc = opts_parse(a->cmdname, argc, argv, 2, allowed, na, pos, (size_t)k_subs[si].npos,
                        &npos);
    if (rc == OPTS_HELP) {
        fputs(strcmp(k_subs[si].name, "make-random") ? k_help : k_make_random_help, stdout);
        return OPTS_HELP;
    }
    if (rc)
        return rc;
    na = 0;
    for (int i = 0; i < O_COUNT; i++)
        if (k_subs[si].allowed & OPT(i))
            a->seen[i] = allowed[na++].seen;
    a->pos = pos[0];
    if (k_subs[si].npos && npos != 1)
        return tool_usage("%s: missing the adapter path", a->cmdname);
    return 0;
}

static int run_reduce(const adapter_args *a, tsafe_dtype dtype)
{
    if (!a->out)
        return tool_usage("adapter reduce: --out DIR2 is required");
    int by_rank = a->seen[O_RANK];
    if (by_rank == a->seen[O_ENERGY])
        return tool_usage("adapter reduce: give exactly one of --rank K and --energy E");
    tsafe_svd_options so = {by_rank ? TSAFE_SVD_FIXED_RANK : TSAFE_SVD_ENERGY, a->rank, a->energy,
                            a->max_rank};
    if (by_rank && a->rank == 0)
        return tool_usage("adapter reduce: --rank must be at least 1");
    if (a->seen[O_ENERGY] && !(a->energy > 0 && a->energy <= 1))
        return tool_usage("adapter reduce: --energy must be in (0, 1]");
    return reduce(a->pos, a->key, &so, a->out, dtype);
}

static int run_pack(const adapter_args *a)
{
    if (!a->key || !a->id || !a->out)
        return tool_usage("adapter pack: --key SK_FILE, --id ID and --out PKG are required");
    tsafe_package_manifest m;
    memset(&m, 0, sizeof m);
    m.adapter_id = a->id;
    m.domain = a->domain;
    m.creator = a->creator;
    m.price_per_1k_tokens = a->price;
    return pack(a->pos, a->key, &m, a->out);
}

static int run_make_random(const adapter_args *a, tsafe_dtype dtype)
{
    if (!a->out)
        return tool_usage("adapter make-random: --out DIR is required");
    uint32_t rank = a->seen[O_RANK] ? a->rank : 4;
    if (a->dim == 0 || rank == 0)
        return tool_usage("adapter make-random: --dim and --rank must be at least 1");
    uint32_t out_dim = a->seen[O_OUT_DIM] ? a->out_dim : a->dim;
    if (out_dim == 0 || !(a->amp_a > 0))
        return tool_usage("adapter make-random: --out-dim and --amp-a must be positive");
    double alpha = a->seen[O_ALPHA] ? a->alpha : 2.0 * rank;
    uint64_t seed;
    if (a->seen[O_SEED])
        seed = a->seed_u;
    else
        randombytes_buf(&seed, sizeof seed);
    dist_kind dist = DIST_UNIFORM;
    if (!strcmp(a->dist_s, "gaussian"))
        dist = DIST_GAUSSIAN;
    else if (!strcmp(a->dist_s, "heavy"))
        dist = DIST_HEAVY;
    else if (strcmp(a->dist_s, "uniform"))
        return tool_usage("adapter make-random: --dist must be uniform, gaussian or heavy, not "
                          "'%s'",
                          a->dist_s);
    return make_random(a->out, a->dim, out_dim, rank, alpha, a->modules, seed, a->amp_a, dtype,
                       a->rank_pat, a->alpha_pat, dist);
}

int cmd_adapter(int argc, char **argv)
{
    if (argc < 2)
        return tool_usage("adapter: missing subcommand (inspect, reduce, keygen, pack, verify, "
                          "make-random)");
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h")) {
        fputs(k_help, stdout);
        return 0;
    }
    int si = -1;
    for (int i = 0; i < (int)(sizeof k_subs / sizeof k_subs[0]); i++)
        if (!strcmp(sub, k_subs[i].name))
            si = i;
    if (si < 0)
        return tool_usage("adapter: unknown subcommand '%s' (inspect, reduce, keygen, pack, verify, "
                          "make-random)",
                          sub);
    adapter_args a = {.dtype_s = "F32", .domain = "", .creator = "", .modules = "q_proj,v_proj",
                      .dist_s = "uniform", .dim = 64, .amp_a = 0.05};
    snprintf(a.cmdname, sizeof a.cmdname, "adapter %s", sub);
    int rc = parse_adapter_args(argc, argv, si, &a);
    if (rc)
        return rc == OPTS_HELP ? 0 : rc;
    if (!strcmp(sub, "inspect"))
        return inspect(a.pos, a.key, a.json);
    if (!strcmp(sub, "verify")) {
        if (!a.key)
            return tool_usage("adapter verify: --trusted-key HEX|FILE is required");
        return verify(a.pos, a.key, a.json);
    }
    if (!strcmp(sub, "keygen")) {
        if (!a.out)
            return tool_usage("adapter keygen: --out PREFIX is required");
        return keygen(a.out);
    }
    tsafe_dtype dtype = parse_dtype(a.dtype_s);
    if (dtype == TSAFE_DTYPE_INVALID)
        return tool_usage("%s: --dtype must be F32, F16 or BF16", a.cmdname);
    if (!strcmp(sub, "reduce"))
        return run_reduce(&a, dtype);
    if (!strcmp(sub, "pack"))
        return run_pack(&a);
    return run_make_random(&a, dtype);
}
