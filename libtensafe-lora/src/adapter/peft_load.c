/* PEFT directory / memory loader: config + safetensors -> modules. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "detail.h"
#include "peft_internal.h"
#include "safetensors_internal.h"

#define CONFIG_CAP ((size_t)16 << 20)

typedef struct {
    const tsafe_peft_config *cfg;
    const tsafe_safetensors *st;
    tsafe_lora_fused_layout layout;
    tsafe_lora_adapter *a;
    tsafe_error_info *err; /* caller's, may be NULL */
} load_ctx;

static int cmp_keys(const void *x, const void *y)
{
    const tsafe_peft_key *a = x, *b = y;
    int c = strcmp(a->canonical, b->canonical);
    if (c)
        return c;
    if (a->depth != b->depth)
        return a->depth < b->depth ? -1 : 1;
    return a->is_b - b->is_b;
}

/* Reads a 2-D F32/F16/BF16 factor into a new float array. */
static tsafe_status read_factor(const load_ctx *c, const char *name,
                                tsafe_tensor_info *ti, float **out)
{
    tsafe_status st = tsafe_safetensors_find(c->st, name, ti);
    if (st != TSAFE_OK)
        return tsafe_detail(c->err, st, "tensor '%s' not found", name);
    if (ti->dtype != TSAFE_DTYPE_F32 && ti->dtype != TSAFE_DTYPE_F16 &&
        ti->dtype != TSAFE_DTYPE_BF16)
        return tsafe_detail(c->err, TSAFE_E_DTYPE,
                            "tensor '%s': dtype %s, expected F32, F16 or BF16", name,
                            tsafe_dtype_name(ti->dtype));
    if (ti->ndim != 2 || ti->numel == 0) {
        char sh[96];
        return tsafe_detail(c->err, TSAFE_E_SHAPE,
                            "tensor '%s': shape %s, expected 2-D with no zero dimension "
                            "(found %zu-D, %zu elements)",
                            name, tsafe_detail_shape(sh, sizeof sh, ti->shape, ti->ndim),
                            ti->ndim, ti->numel);
    }
    if (ti->numel > SIZE_MAX / sizeof(float))
        return tsafe_detail(c->err, TSAFE_E_SIZE_OVERFLOW, "tensor '%s': %zu elements", name,
                            ti->numel);
    float *v = malloc(ti->numel * sizeof *v);
    if (!v)
        return TSAFE_E_NOMEM;
    st = tsafe_safetensors_read_f32(c->st, name, v, ti->numel);
    if (st != TSAFE_OK) {
        free(v);
        return st;
    }
    *out = v;
    return TSAFE_OK;
}

static int proj_order(const char *p)
{
    static const char *const known[] = {"gate_up_proj", "gate_proj", "up_proj",
                                        "down_proj"};
    for (int i = 0; i < 4; i++)
        if (strcmp(p, known[i]) == 0)
            return i;
    return 4;
}

static int cmp_proj(const void *x, const void *y)
{
    const char *a = *(const char *const *)x, *b = *(const char *const *)y;
    int oa = proj_order(a), ob = proj_order(b);
    if (oa != ob)
        return oa < ob ? -1 : 1;
    return strcmp(a, b);
}

/* A Python identifier that cannot be mistaken for a PEFT component. */
static int param_name_ok(const char *p)
{
    if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_'))
        return 0;
    for (const char *q = p; *q; q++)
        if (!((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') ||
              (*q >= '0' && *q <= '9') || *q == '_'))
            return 0;
    return strstr(p, "lora_") == NULL && strstr(p, "base_layer") == NULL &&
           strcmp(p, "experts") != 0;
}

/* Parameter name of a fused key from target_parameters (see the header). */
static tsafe_status fused_proj(const load_ctx *c, const tsafe_peft_key *k,
                               const char **proj)
{
    size_t n = json_array_size(c->cfg->target_params), m = 0;
    const char **cand = calloc(n ? n : 1, sizeof *cand);
    if (!cand)
        return TSAFE_E_NOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *t = json_string_value(json_array_get(c->cfg->target_params, i));
        const char *dot = strrchr(t, '.');
        if (!dot || dot == t || !param_name_ok(dot + 1))
            continue;
        size_t ml = (size_t)(dot - t), pl = strlen(k->peft_name);
        /* module part must be k->peft_name or a dot-suffix of it */
        int ok = (pl == ml && strncmp(k->peft_name, t, ml) == 0) ||
                 (pl > ml && k->peft_name[pl - ml - 1] == '.' &&
                  strncmp(k->peft_name + pl - ml, t, ml) == 0);
        if (!ok)
            continue;
        int dup = 0;
        for (size_t j = 0; j < m; j++)
            dup |= strcmp(cand[j], dot + 1) == 0;
        if (!dup)
            cand[m++] = dot + 1;
    }
    tsafe_status st = TSAFE_E_ADAPTER;
    if (m > 0 && (size_t)k->depth < m) {
        qsort(cand, m, sizeof *cand, cmp_proj);
        *proj = cand[m - 1 - (size_t)k->depth];
        st = TSAFE_OK;
    } else {
        tsafe_detail(c->err, st,
                     "tensor '%s': fused expert weight, but target_parameters names %zu "
                     "parameter%s of '%s' (expected at least %d)",
                     k->key, m, m == 1 ? "" : "s", k->peft_name, k->depth + 1);
    }
    free(cand);
    return st;
}

/* lora_B's columns must equal lora_A's rows (the rank). */
static tsafe_status shape_mismatch(const load_ctx *c, const char *a_key,
                                   const tsafe_tensor_info *ta, const char *b_key,
                                   const tsafe_tensor_info *tb)
{
    char sa[96], sb[96];
    return tsafe_detail(c->err, TSAFE_E_SHAPE,
                        "tensor '%s' is %s: expected %llu columns (the rows of '%s' %s), "
                        "found %llu",
                        b_key, tsafe_detail_shape(sb, sizeof sb, tb->shape, tb->ndim),
                        (unsigned long long)ta->shape[0], a_key,
                        tsafe_detail_shape(sa, sizeof sa, ta->shape, ta->ndim),
                        (unsigned long long)tb->shape[1]);
}

/* Detail for a refused module (duplicate name, non-finite values...). */
static void append_failed(const load_ctx *c, tsafe_status st, const char *module)
{
    if (st == TSAFE_E_VALUE_RANGE)
        tsafe_detail(c->err, st, "module '%s': a value is not finite, or its delta would not "
                     "be finite in float32", module);
    else if (st == TSAFE_E_ARG)
        tsafe_detail(c->err, TSAFE_E_ADAPTER, "module '%s': name refused or given twice",
                     module);
    else
        tsafe_detail(c->err, st, "module '%s'", module);
}

static tsafe_status add_plain(load_ctx *c, const tsafe_peft_key *ka,
                              const tsafe_peft_key *kb)
{
    tsafe_status st = TSAFE_OK;
    float *A = NULL, *B = NULL;
    tsafe_tensor_info ta, tb;
    TSAFE_TRY(read_factor(c, ka->key, &ta, &A));
    TSAFE_TRY(read_factor(c, kb->key, &tb, &B));
    size_t r = (size_t)ta.shape[0], in = (size_t)ta.shape[1];
    size_t out = (size_t)tb.shape[0];
    if (tb.shape[1] != ta.shape[0]) {
        st = shape_mismatch(c, ka->key, &ta, kb->key, &tb);
        goto fail;
    }
    size_t want_r = tsafe_peft_rank_for(c->cfg, ka->peft_name);
    if (r != want_r) {
        st = tsafe_detail(c->err, TSAFE_E_ADAPTER,
                          "tensor '%s': rank %zu, but adapter_config.json gives r = %zu for "
                          "'%s' (expected %zu, found %zu)",
                          ka->key, r, want_r, ka->peft_name, want_r, r);
        goto fail;
    }
    double alpha = tsafe_peft_alpha_for(c->cfg, ka->peft_name);
    TSAFE_TRY(tsafe_lora_check_values(c->a, ka->canonical, r, in, out, A, B, alpha, c->err));
    st = tsafe_lora_adapter_append(c->a, ka->canonical, r, in, out, A, B, alpha, ta.dtype);
    if (st != TSAFE_OK) {
        append_failed(c, st, ka->canonical);
        goto fail;
    }
    return TSAFE_OK;
fail:
    free(A);
    free(B);
    return st == TSAFE_E_ARG ? TSAFE_E_ADAPTER : st;
}

static tsafe_status add_fused(load_ctx *c, const tsafe_peft_key *ka,
                              const tsafe_peft_key *kb)
{
    tsafe_status st = TSAFE_OK;
    float *A = NULL, *B = NULL, *Ae = NULL, *Be = NULL;
    char *name = NULL, *pname = NULL;
    tsafe_tensor_info ta, tb;
    const char *proj;
    TSAFE_TRY(fused_proj(c, ka, &proj));
    TSAFE_TRY(read_factor(c, ka->key, &ta, &A));
    TSAFE_TRY(read_factor(c, kb->key, &tb, &B));
    if (tb.shape[1] != ta.shape[0]) {
        st = shape_mismatch(c, ka->key, &ta, kb->key, &tb);
        goto fail;
    }
    size_t rE = (size_t)ta.shape[0], d1 = (size_t)ta.shape[1];
    size_t d2 = (size_t)tb.shape[0];

    size_t pl = strlen(ka->peft_name) + 1 + strlen(proj) + 1;
    pname = malloc(pl);
    TSAFE_CHECK(pname, TSAFE_E_NOMEM);
    snprintf(pname, pl, "%s.%s", ka->peft_name, proj);
    size_t r = tsafe_peft_rank_for(c->cfg, pname);
    double alpha = tsafe_peft_alpha_for(c->cfg, pname);
    if (rE % r != 0) {
        st = tsafe_detail(c->err, TSAFE_E_SHAPE,
                          "tensor '%s': %zu rows, expected a multiple of r = %zu (rank x "
                          "experts; found remainder %zu)",
                          ka->key, rE, r, rE % r);
        goto fail;
    }
    size_t E = rE / r;
    int swap = c->layout == TSAFE_LORA_FUSED_OUT_IN;
    size_t in = swap ? d2 : d1, out = swap ? d1 : d2;

    size_t nl = strlen(ka->canonical) + strlen(proj) + 32;
    name = malloc(nl);
    TSAFE_CHECK(name, TSAFE_E_NOMEM);
    for (size_t e = 0; e < E; e++) {
        Ae = malloc(r * in * sizeof *Ae); /* r*d1 and r*d2 fit: sub-tensors */
        Be = malloc(out * r * sizeof *Be);
        TSAFE_CHECK(Ae && Be, TSAFE_E_NOMEM);
        for (size_t j = 0; j < r; j++) {
            for (size_t i = 0; i < d1; i++) {
                float a = A[(e * r + j) * d1 + i]; /* A_e[j][i], expert-major */
                if (swap)
                    Be[i * r + j] = a; /* B' = A_e^T : d1 x r */
                else
                    Ae[j * d1 + i] = a;
            }
            for (size_t o = 0; o < d2; o++) {
                float b = B[o * rE + j * E + e]; /* B_e[o][j], expert-minor */
                if (swap)
                    Ae[j * d2 + o] = b; /* A' = B_e^T : r x d2 */
                else
                    Be[o * r + j] = b;
            }
        }
        snprintf(name, nl, "%s.%zu.%s", ka->canonical, e, proj);
        TSAFE_TRY(tsafe_lora_check_values(c->a, name, r, in, out, Ae, Be, alpha, c->err));
        st = tsafe_lora_adapter_append(c->a, name, r, in, out, Ae, Be, alpha, ta.dtype);
        if (st != TSAFE_OK) {
            append_failed(c, st, name);
            goto fail;
        }
        Ae = Be = NULL;
    }
fail:
    free(A);
    free(B);
    free(Ae);
    free(Be);
    free(name);
    free(pname);
    return st == TSAFE_E_ARG ? TSAFE_E_ADAPTER : st;
}

static tsafe_status build(load_ctx *c)
{
    tsafe_status st = TSAFE_OK;
    size_t n = tsafe_safetensors_tensor_count(c->st);
    tsafe_peft_key *k = calloc(n ? n : 1, sizeof *k);
    size_t nk = 0;
    TSAFE_CHECK(k, TSAFE_E_NOMEM);
    for (size_t i = 0; i < n; i++) {
        tsafe_tensor_info ti;
        TSAFE_TRY(tsafe_safetensors_tensor_at(c->st, i, &ti));
        if ((st = tsafe_peft_parse_key(ti.name, &k[nk])) != TSAFE_OK) {
            tsafe_detail(c->err, st,
                         st == TSAFE_E_DORA ? "tensor '%s': a DoRA magnitude vector"
                         : st == TSAFE_E_NOMEM
                             ? "tensor '%s'"
                             : "tensor '%s': not a lora_A / lora_B weight of a LoRA module",
                         ti.name);
            goto fail;
        }
        nk++;
    }
    qsort(k, nk, sizeof *k, cmp_keys);
    for (size_t i = 0; i < nk;) {
        /* A group is one (canonical, depth): exactly one A then one B. */
        int same_next = i + 1 < nk &&
                        strcmp(k[i].canonical, k[i + 1].canonical) == 0 &&
                        k[i].depth == k[i + 1].depth;
        if (!(same_next && !k[i].is_b && k[i + 1].is_b)) {
            st = tsafe_detail(c->err, TSAFE_E_ADAPTER,
                              "tensor '%s': %s without its %s (module '%s')", k[i].key,
                              k[i].is_b ? "lora_B" : "lora_A", k[i].is_b ? "lora_A" : "lora_B",
                              k[i].canonical);
            goto fail;
        }
        if (!(i + 2 >= nk || strcmp(k[i].canonical, k[i + 2].canonical) ||
              k[i].depth != k[i + 2].depth)) { /* the same factor under two names */
            st = tsafe_detail(c->err, TSAFE_E_ADAPTER,
                              "tensors '%s' and '%s' give the same factor of module '%s'",
                              k[i + 1].key, k[i + 2].key, k[i].canonical);
            goto fail;
        }
        if (k[i].fused)
            TSAFE_TRY(add_fused(c, &k[i], &k[i + 1]));
        else
            TSAFE_TRY(add_plain(c, &k[i], &k[i + 1]));
        i += 2;
    }
    if (c->a->n == 0) {
        st = tsafe_detail(c->err, TSAFE_E_ADAPTER, "no LoRA module (%zu tensors, none a lora_A/lora_B pair)", n);
        goto fail;
    }
    if ((st = tsafe_lora_adapter_finish(c->a)) != TSAFE_OK) {
        tsafe_detail(c->err, st, "two tensor keys give the same module name");
        goto fail;
    }
fail:
    for (size_t i = 0; i < nk; i++)
        tsafe_peft_key_clear(&k[i]);
    free(k);
    return st;
}

static tsafe_status load_common(const char *config, size_t config_len,
                                const tsafe_safetensors *sts,
                                const tsafe_lora_load_options *opt,
                                tsafe_lora_adapter **out)
{
    tsafe_status st = TSAFE_OK;
    tsafe_peft_config cfg;
    tsafe_lora_adapter *a = NULL;
    tsafe_error_info *err = opt ? opt->error : NULL;
    TSAFE_TRY(tsafe_peft_config_parse(config, config_len, err, &cfg));
    TSAFE_TRY(tsafe_lora_adapter_create(&cfg.cfg, &a));
    size_t nt = json_array_size(cfg.targets);
    if (nt) {
        a->targets = calloc(nt, sizeof *a->targets);
        TSAFE_CHECK(a->targets, TSAFE_E_NOMEM);
        for (size_t i = 0; i < nt; i++) {
            a->targets[i] = strdup(json_string_value(json_array_get(cfg.targets, i)));
            TSAFE_CHECK(a->targets[i], TSAFE_E_NOMEM);
            a->n_targets++;
        }
    }
    load_ctx c = {&cfg, sts, opt ? opt->fused_layout : TSAFE_LORA_FUSED_IN_OUT, a, err};
    if (c.layout != TSAFE_LORA_FUSED_IN_OUT && c.layout != TSAFE_LORA_FUSED_OUT_IN) {
        st = tsafe_detail(err, TSAFE_E_ARG, "fused_layout %d is not a tsafe_lora_fused_layout",
                          (int)c.layout);
        goto fail;
    }
    TSAFE_TRY(build(&c));
    tsafe_peft_config_clear(&cfg);
    *out = a;
    return TSAFE_OK;
fail:
    tsafe_peft_config_clear(&cfg);
    tsafe_lora_adapter_free(a);
    return tsafe_detail(err, st, "%s", ""); /* status even when no detail */
}

tsafe_status tsafe_lora_adapter_load_peft_memory(
    const char *config_json, size_t config_len, const void *safetensors,
    size_t safetensors_len, const tsafe_lora_load_options *opt,
    tsafe_lora_adapter **out)
{
    tsafe_error_info *err = opt ? opt->error : NULL;
    tsafe_detail_reset(err);
    if (!out || !config_json || (!safetensors && safetensors_len))
        return tsafe_detail(err, TSAFE_E_NULL, "a required pointer is NULL");
    *out = NULL;
    tsafe_safetensors *sts;
    tsafe_status st =
        tsafe_safetensors_parse_borrowed_ex(safetensors, safetensors_len, err, &sts);
    if (st != TSAFE_OK)
        return tsafe_detail(err, st, "%s", "");
    st = load_common(config_json, config_len, sts, opt, out);
    tsafe_safetensors_free(sts);
    return st;
}

static char *join(const char *dir, const char *file)
{
    size_t n = strlen(dir) + 1 + strlen(file) + 1;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, file);
    return p;
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

tsafe_status tsafe_lora_adapter_load_peft_ex(const char *dir,
                                             const tsafe_lora_load_options *opt,
                                             tsafe_lora_adapter **out)
{
    tsafe_error_info *err = opt ? opt->error : NULL;
    tsafe_detail_reset(err);
    if (!dir || !out)
        return tsafe_detail(err, TSAFE_E_NULL, "a required pointer is NULL");
    *out = NULL;
    tsafe_status st = TSAFE_OK;
    char *pc = join(dir, "adapter_config.json");
    char *ps = join(dir, "adapter_model.safetensors");
    char *pb = join(dir, "adapter_model.bin");
    uint8_t *text = NULL;
    size_t text_len = 0;
    tsafe_safetensors *sts = NULL;
    TSAFE_CHECK(pc && ps && pb, TSAFE_E_NOMEM);
    if (!exists(ps)) {
        st = exists(pb) ? tsafe_detail(err, TSAFE_E_PICKLE,
                                       "'%s' exists but '%s' does not: pickled weights are "
                                       "refused, convert them to safetensors",
                                       pb, ps)
                        : tsafe_detail(err, TSAFE_E_NOT_FOUND, "no '%s'", ps);
        goto fail;
    }
    if ((st = tsafe_read_file(pc, CONFIG_CAP, &text, &text_len)) != TSAFE_OK) {
        tsafe_detail(err, st, st == TSAFE_E_NOT_FOUND ? "no '%s'" : "read '%s'", pc);
        goto fail;
    }
    if ((st = tsafe_safetensors_open_file_ex(ps, err, &sts)) != TSAFE_OK) {
        if (err && err->detail[0] && err->detail[0] != '\'') { /* name the file */
            char inner[TSAFE_ERROR_DETAIL_MAX];
            memcpy(inner, err->detail, sizeof inner);
            err->detail[0] = '\0';
            tsafe_detail(err, st, "'%s': %s", ps, inner);
        }
        goto fail;
    }
    TSAFE_TRY(load_common((const char *)text, text_len, sts, opt, out));
    if ((st = tsafe_lora_adapter_set_unsigned_path(*out, dir)) != TSAFE_OK) {
        tsafe_lora_adapter_free(*out);
        *out = NULL;
    }
fail:
    tsafe_safetensors_free(sts);
    free(text);
    free(pc);
    free(ps);
    free(pb);
    return st;
}

tsafe_status tsafe_lora_adapter_load_peft(const char *dir,
                                          tsafe_lora_adapter **out)
{
    return tsafe_lora_adapter_load_peft_ex(dir, NULL, out);
}
