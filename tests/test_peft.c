/* PEFT adapter loading: fixtures written here into a mkdtemp directory,
 * every loaded module's dW = s*B*A compared with a double-precision
 * reference computed from the raw values written; malformed adapters each
 * return their own status.
 *
 * Tolerance: the values written are exactly representable in the file's
 * dtype (k/64 with |k| < 128 for F16/BF16, arbitrary floats for F32), so
 * loaded A and B must be bit-identical to what was written, and dW may
 * differ from the reference only by double rounding: |diff| <= 1e-12 *
 * max|dW_ref|. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/tsafe_test_rng.h"
#include "tensafe/lora_adapter.h"
#include "tensafe/safetensors.h"

/* ------------------------------------------------------------ fixtures */

typedef struct {
    char name[128];
    int layer, expert;
    char proj[32];
    size_t r, in, out;
    double alpha, scale;
    float *A, *B; /* NULL for fused modules (layout is the loader's) */
    double *dw;   /* out x in reference */
} ref_mod;

typedef struct {
    char dir[64];
    tsafe_safetensors_writer *w;
    ref_mod m[64];
    size_t n;
    tsafe_dtype dtype;
} fixture;

static float value_for(tsafe_dtype dt)
{
    if (dt == TSAFE_DTYPE_F32)
        return tsafe_test_uniform_float(-1.0, 1.0);
    /* k/64, |k| <= 127: 7 significant bits, exact in F16 and BF16 */
    return (float)((int)tsafe_test_below(255) - 127) / 64.0f;
}

static void fx_init(fixture *f, tsafe_dtype dt)
{
    memset(f, 0, sizeof *f);
    strcpy(f->dir, "/tmp/tsafe_peft_XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    assert_int_equal(tsafe_safetensors_writer_create(&f->w), TSAFE_OK);
    f->dtype = dt;
}

static void fx_path(const fixture *f, const char *file, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", f->dir, file);
}

static void fx_text(const fixture *f, const char *file, const char *text)
{
    char p[128];
    fx_path(f, file, p, sizeof p);
    FILE *fp = fopen(p, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(text, 1, strlen(text), fp), strlen(text));
    assert_int_equal(fclose(fp), 0);
}

static void fx_write(fixture *f, const char *config)
{
    char p[128];
    fx_text(f, "adapter_config.json", config);
    fx_path(f, "adapter_model.safetensors", p, sizeof p);
    assert_int_equal(tsafe_safetensors_writer_write_file(f->w, p), TSAFE_OK);
}

static void fx_free(fixture *f)
{
    const char *files[] = {"adapter_config.json", "adapter_model.safetensors",
                           "adapter_model.bin"};
    char p[128];
    for (int i = 0; i < 3; i++) {
        fx_path(f, files[i], p, sizeof p);
        unlink(p);
    }
    rmdir(f->dir);
    for (size_t i = 0; i < f->n; i++) {
        free(f->m[i].A);
        free(f->m[i].B);
        free(f->m[i].dw);
    }
    tsafe_safetensors_writer_free(f->w);
}

static float *rand_matrix(tsafe_dtype dt, size_t rows, size_t cols)
{
    float *v = malloc(rows * cols * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < rows * cols; i++)
        v[i] = value_for(dt);
    return v;
}

static void put(fixture *f, const char *key, size_t rows, size_t cols,
                const float *v)
{
    uint64_t s[2] = {rows, cols};
    assert_int_equal(tsafe_safetensors_writer_add_f32(f->w, key, f->dtype, s, 2, v),
                     TSAFE_OK);
}

static double *ref_dw(const float *A, const float *B, size_t r, size_t in,
                      size_t out, double scale)
{
    double *dw = calloc(out * in, sizeof *dw);
    assert_non_null(dw);
    for (size_t o = 0; o < out; o++)
        for (size_t i = 0; i < in; i++) {
            double acc = 0;
            for (size_t j = 0; j < r; j++)
                acc += (double)B[o * r + j] * (double)A[j * in + i];
            dw[o * in + i] = scale * acc;
        }
    return dw;
}

static ref_mod *expect_mod(fixture *f, const char *name, int layer, int expert,
                           const char *proj, size_t r, size_t in, size_t out,
                           double alpha, double scale)
{
    assert_true(f->n < 64);
    ref_mod *m = &f->m[f->n++];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    snprintf(m->proj, sizeof m->proj, "%s", proj);
    m->layer = layer;
    m->expert = expert;
    m->r = r;
    m->in = in;
    m->out = out;
    m->alpha = alpha;
    m->scale = scale;
    return m;
}

/* A plain module: keys <module><suffA> / <module><suffB>. */
static void add_plain(fixture *f, const char *module, const char *variant,
                      const char *canonical, int layer, int expert,
                      const char *proj, size_t r, size_t in, size_t out,
                      double alpha, double scale)
{
    char key[256];
    ref_mod *m = expect_mod(f, canonical, layer, expert, proj, r, in, out, alpha,
                            scale);
    m->A = rand_matrix(f->dtype, r, in);
    m->B = rand_matrix(f->dtype, out, r);
    snprintf(key, sizeof key, "%s.lora_A%s.weight", module, variant);
    put(f, key, r, in, m->A);
    snprintf(key, sizeof key, "%s.lora_B%s.weight", module, variant);
    put(f, key, out, r, m->B);
    m->dw = ref_dw(m->A, m->B, r, in, out, scale);
}

/* Checks every expected module against the loaded adapter. */
static void check_adapter(const fixture *f, const tsafe_lora_adapter *a)
{
    assert_int_equal(tsafe_lora_adapter_module_count(a), f->n);
    for (size_t k = 0; k < f->n; k++) {
        const ref_mod *m = &f->m[k];
        size_t idx;
        tsafe_lora_module_info mi;
        if (tsafe_lora_adapter_find(a, m->name, &idx) != TSAFE_OK)
            fail_msg("module %s not found", m->name);
        assert_int_equal(tsafe_lora_adapter_module(a, idx, &mi), TSAFE_OK);
        assert_string_equal(mi.name, m->name);
        assert_string_equal(mi.proj, m->proj);
        assert_int_equal(mi.layer, m->layer);
        assert_int_equal(mi.expert, m->expert);
        assert_int_equal(mi.rank, m->r);
        assert_int_equal(mi.in_dim, m->in);
        assert_int_equal(mi.out_dim, m->out);
        assert_true(fabs(mi.alpha - m->alpha) <= 1e-15 * fabs(m->alpha));
        assert_true(fabs(mi.scale - m->scale) <= 1e-15 * fabs(m->scale));
        assert_int_equal(mi.source_dtype, f->dtype);
        if (m->A) {
            assert_memory_equal(mi.A, m->A, m->r * m->in * sizeof(float));
            assert_memory_equal(mi.B, m->B, m->out * m->r * sizeof(float));
        }
        /* dW from the loaded factors, by the test's own loop ... */
        double *got = ref_dw(mi.A, mi.B, mi.rank, mi.in_dim, mi.out_dim, mi.scale);
        /* ... and by the library */
        double *lib = malloc(m->out * m->in * sizeof *lib);
        assert_non_null(lib);
        assert_int_equal(tsafe_lora_module_delta_w(&mi, lib), TSAFE_OK);
        double mx = 0;
        for (size_t i = 0; i < m->out * m->in; i++)
            mx = fmax(mx, fabs(m->dw[i]));
        assert_true(mx > 0);
        for (size_t i = 0; i < m->out * m->in; i++) {
            if (fabs(got[i] - m->dw[i]) > 1e-12 * mx ||
                fabs(lib[i] - m->dw[i]) > 1e-12 * mx)
                fail_msg("%s: dW[%zu] = %.17g / %.17g, reference %.17g", m->name,
                         i, got[i], lib[i], m->dw[i]);
        }
        free(got);
        free(lib);
    }
}

static tsafe_lora_adapter *load_ok(const fixture *f,
                                   const tsafe_lora_load_options *opt)
{
    tsafe_lora_adapter *a = NULL;
    tsafe_status st = tsafe_lora_adapter_load_peft_ex(f->dir, opt, &a);
    if (st != TSAFE_OK)
        fail_msg("load: %s", tsafe_status_name(st));
    assert_non_null(a);
    return a;
}

#define QWEN "base_model.model.model.layers."

/* ------------------------------------------------------------- tests */

static void test_dense_all_dtypes(void **state)
{
    (void)state;
    const tsafe_dtype dts[3] = {TSAFE_DTYPE_F32, TSAFE_DTYPE_F16, TSAFE_DTYPE_BF16};
    for (int d = 0; d < 3; d++) {
        fixture f;
        fx_init(&f, dts[d]);
        const size_t H = 16, KV = 8, I = 24, r = 4;
        const char *projs[7] = {"self_attn.q_proj", "self_attn.k_proj",
                                "self_attn.v_proj", "self_attn.o_proj",
                                "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
        const size_t ins[7] = {H, H, H, H, H, H, I};
        const size_t outs[7] = {H, KV, KV, H, I, I, H};
        for (int L = 0; L < 2; L++)
            for (int p = 0; p < 7; p++) {
                char mod[128], canon[128];
                snprintf(mod, sizeof mod, QWEN "%d.%s", L, projs[p]);
                snprintf(canon, sizeof canon, "layers.%d.%s", L, projs[p]);
                add_plain(&f, mod, "", canon, L, -1, strrchr(projs[p], '.') + 1,
                          r, ins[p], outs[p], 8.0, 2.0);
            }
        fx_write(&f, "{\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": 8,"
                     " \"target_modules\": [\"q_proj\", \"k_proj\", \"v_proj\","
                     " \"o_proj\", \"gate_proj\", \"up_proj\", \"down_proj\"],"
                     " \"use_rslora\": false, \"use_dora\": false,"
                     " \"rank_pattern\": {}, \"alpha_pattern\": {},"
                     " \"fan_in_fan_out\": false, \"task_type\": \"CAUSAL_LM\"}");
        tsafe_lora_adapter *a = load_ok(&f, NULL);
        check_adapter(&f, a);
        tsafe_lora_config cfg;
        assert_int_equal(tsafe_lora_adapter_config(a, &cfg), TSAFE_OK);
        assert_int_equal(cfg.r, 4);
        assert_true(cfg.lora_alpha == 8.0);
        assert_int_equal(tsafe_lora_adapter_target_count(a), 7);
        assert_string_equal(tsafe_lora_adapter_target(a, 6), "down_proj");
        assert_null(tsafe_lora_adapter_target(a, 7));
        /* natural order: all of layer 0 first, and find() misses cleanly */
        tsafe_lora_module_info mi;
        assert_int_equal(tsafe_lora_adapter_module(a, 0, &mi), TSAFE_OK);
        assert_int_equal(mi.layer, 0);
        assert_int_equal(tsafe_lora_adapter_module(a, 14, &mi), TSAFE_E_RANGE);
        size_t idx;
        assert_int_equal(tsafe_lora_adapter_find(a, "layers.2.mlp.up_proj", &idx),
                         TSAFE_E_NOT_FOUND);
        tsafe_lora_adapter_free(a);
        fx_free(&f);
    }
}

static void test_prefixes_and_variants(void **state)
{
    (void)state;
    fixture f;
    fx_init(&f, TSAFE_DTYPE_BF16);
    add_plain(&f, "base_model.model.model.language_model.layers.0.self_attn.q_proj",
              "", "layers.0.self_attn.q_proj", 0, -1, "q_proj", 2, 8, 8, 4, 2);
    add_plain(&f, "model.layers.1.mlp.down_proj", ".default",
              "layers.1.mlp.down_proj", 1, -1, "down_proj", 2, 12, 8, 4, 2);
    add_plain(&f, "base_model.model.language_model.model.layers.2.self_attn.o_proj",
              "", "layers.2.self_attn.o_proj", 2, -1, "o_proj", 2, 8, 8, 4, 2);
    add_plain(&f, "base_model.model.model.layers.10.self_attn.v_proj", ".default",
              "layers.10.self_attn.v_proj", 10, -1, "v_proj", 2, 8, 4, 4, 2);
    fx_write(&f, "{\"peft_type\":\"LORA\",\"r\":2,\"lora_alpha\":4,"
                 "\"target_modules\":\"(q|v|o|down)_proj\"}");
    tsafe_lora_adapter *a = load_ok(&f, NULL);
    check_adapter(&f, a);
    tsafe_lora_module_info mi;
    assert_int_equal(tsafe_lora_adapter_module(a, 3, &mi), TSAFE_OK);
    assert_string_equal(mi.name, "layers.10.self_attn.v_proj"); /* 2 < 10 */
    assert_int_equal(tsafe_lora_adapter_target_count(a), 1);
    tsafe_lora_adapter_free(a);
    fx_free(&f);
}

static void test_rank_alpha_patterns(void **state)
{
    (void)state;
    fixture f;
    fx_init(&f, TSAFE_DTYPE_F16);
    /* defaults r=8, alpha=16.
     * rank_pattern: "q_proj" listed before "layers.1.self_attn.q_proj", so
     * it wins for every q_proj (first match); an exact full name beats an
     * earlier suffix key ("k_proj" vs model.layers.0.self_attn.k_proj).
     * alpha_pattern: "proj" must match nothing ("q_proj" ends with "proj"
     * but not with ".proj"). */
    const char *cfg =
        "{\"peft_type\":\"LORA\",\"r\":8,\"lora_alpha\":16,"
        "\"rank_pattern\":{\"q_proj\":2,\"layers.1.self_attn.q_proj\":3,"
        "\"k_proj\":5,\"model.layers.0.self_attn.k_proj\":7,"
        "\"layers.1.mlp.up_proj\":6},"
        "\"alpha_pattern\":{\"proj\":100,\"model.layers.0.self_attn.k_proj\":3.5,"
        "\"v_proj\":12}}";
    add_plain(&f, QWEN "0.self_attn.q_proj", "", "layers.0.self_attn.q_proj", 0, -1,
              "q_proj", 2, 8, 8, 16, 8.0);
    add_plain(&f, QWEN "1.self_attn.q_proj", "", "layers.1.self_attn.q_proj", 1, -1,
              "q_proj", 2, 8, 8, 16, 8.0);
    add_plain(&f, QWEN "0.self_attn.k_proj", "", "layers.0.self_attn.k_proj", 0, -1,
              "k_proj", 7, 8, 4, 3.5, 0.5);
    add_plain(&f, QWEN "1.self_attn.k_proj", "", "layers.1.self_attn.k_proj", 1, -1,
              "k_proj", 5, 8, 4, 16, 3.2);
    add_plain(&f, QWEN "1.self_attn.v_proj", "", "layers.1.self_attn.v_proj", 1, -1,
              "v_proj", 8, 8, 4, 12, 1.5);
    add_plain(&f, QWEN "1.mlp.up_proj", "", "layers.1.mlp.up_proj", 1, -1,
              "up_proj", 6, 8, 12, 16, 16.0 / 6.0);
    add_plain(&f, QWEN "11.mlp.up_proj", "", "layers.11.mlp.up_proj", 11, -1,
              "up_proj", 8, 8, 12, 16, 2.0); /* "layers.1.mlp.up_proj" no match */
    fx_write(&f, cfg);
    tsafe_lora_adapter *a = load_ok(&f, NULL);
    check_adapter(&f, a);
    tsafe_lora_adapter_free(a);
    fx_free(&f);

    /* a factor whose rank disagrees with its pattern */
    fx_init(&f, TSAFE_DTYPE_F32);
    add_plain(&f, QWEN "0.self_attn.q_proj", "", "x", 0, -1, "q_proj", 4, 8, 8, 16, 4);
    fx_write(&f, cfg);
    tsafe_lora_adapter *bad = NULL;
    assert_int_equal(tsafe_lora_adapter_load_peft(f.dir, &bad), TSAFE_E_ADAPTER);
    assert_null(bad);
    fx_free(&f);
}

static void test_rslora_and_fan_in_fan_out(void **state)
{
    (void)state;
    fixture f;
    fx_init(&f, TSAFE_DTYPE_F32);
    add_plain(&f, QWEN "0.self_attn.q_proj", "", "layers.0.self_attn.q_proj", 0, -1,
              "q_proj", 4, 12, 10, 8, 8.0 / 2.0);
    add_plain(&f, QWEN "0.self_attn.v_proj", "", "layers.0.self_attn.v_proj", 0, -1,
              "v_proj", 16, 12, 6, 8, 8.0 / 4.0);
    add_plain(&f, QWEN "0.self_attn.o_proj", "", "layers.0.self_attn.o_proj", 0, -1,
              "o_proj", 4, 12, 12, 6, 6.0 / 2.0);
    fx_write(&f, "{\"peft_type\":\"LORA\",\"r\":4,\"lora_alpha\":8,\"use_rslora\":true,"
                 "\"fan_in_fan_out\":true,\"rank_pattern\":{\"v_proj\":16},"
                 "\"alpha_pattern\":{\"o_proj\":6}}");
    tsafe_lora_adapter *a = load_ok(&f, NULL);
    check_adapter(&f, a);
    tsafe_lora_config cfg;
    assert_int_equal(tsafe_lora_adapter_config(a, &cfg), TSAFE_OK);
    assert_true(cfg.use_rslora && cfg.fan_in_fan_out);
    tsafe_lora_adapter_free(a);
    fx_free(&f);
}

static void test_per_expert_keys(void **state)
{
    (void)state;
    fixture f;
    fx_init(&f, TSAFE_DTYPE_BF16);
    const int experts[3] = {0, 17, 127};
    for (int k = 0; k < 3; k++) {
        char mod[128], canon[128];
        snprintf(mod, sizeof mod, QWEN "3.mlp.experts.%d.gate_proj", experts[k]);
        snprintf(canon, sizeof canon, "layers.3.mlp.experts.%d.gate_proj", experts[k]);
        add_plain(&f, mod, "", canon, 3, experts[k], "gate_proj", 2, 16, 6, 4, 2);
        snprintf(mod, sizeof mod, QWEN "3.mlp.experts.%d.down_proj", experts[k]);
        snprintf(canon, sizeof canon, "layers.3.mlp.experts.%d.down_proj", experts[k]);
        add_plain(&f, mod, "", canon, 3, experts[k], "down_proj", 2, 6, 16, 4, 2);
    }
    add_plain(&f, QWEN "3.mlp.shared_expert.up_proj", "",
              "layers.3.mlp.shared_expert.up_proj", 3, -1, "up_proj", 2, 16, 6, 4, 2);
    fx_write(&f, "{\"peft_type\":\"LORA\",\"r\":2,\"lora_alpha\":4,"
                 "\"target_modules\":[\"gate_proj\",\"up_proj\",\"down_proj\"]}");
    tsafe_lora_adapter *a = load_ok(&f, NULL);
    check_adapter(&f, a);
    tsafe_lora_adapter_free(a);
    fx_free(&f);
}

/* Fused 3-D expert parameter: lora_A [r*E, d1] expert-major, lora_B
 * [d2, r*E] expert-minor. Reference straight from PEFT's einsum
 * "o r e, e r i -> e i o" on the fused arrays. */
static void add_fused(fixture *f, const char *key_module, const char *canon_prefix,
                      int layer, const char *proj, size_t r, size_t E, size_t d1,
                      size_t d2, double alpha, double scale, int out_in)
{
    float *A = rand_matrix(f->dtype, r * E, d1);
    float *B = rand_matrix(f->dtype, d2, r * E);
    char key[256];
    snprintf(key, sizeof key, "%s.lora_A.weight", key_module);
    put(f, key, r * E, d1, A);
    snprintf(key, sizeof key, "%s.lora_B.weight", key_module);
    put(f, key, d2, r * E, B);
    for (size_t e = 0; e < E; e++) {
        char name[128];
        snprintf(name, sizeof name, "%s.%zu.%s", canon_prefix, e, proj);
        size_t in = out_in ? d2 : d1, out = out_in ? d1 : d2;
        ref_mod *m = expect_mod(f, name, layer, (int)e, proj, r, in, out, alpha,
                                scale);
        m->dw = calloc(in * out, sizeof *m->dw);
        assert_non_null(m->dw);
        /* dParam[e][i1][i2] = s * sum_j B[i2][j*E+e] * A[e*r+j][i1] */
        for (size_t i1 = 0; i1 < d1; i1++)
            for (size_t i2 = 0; i2 < d2; i2++) {
                double acc = 0;
                for (size_t j = 0; j < r; j++)
                    acc += (double)B[i2 * r * E + j * E + e] *
                           (double)A[(e * r + j) * d1 + i1];
                /* IN_OUT: W x orientation is dParam^T (out=d2, in=d1);
                 * OUT_IN: dParam itself (out=d1, in=d2). */
                if (out_in)
                    m->dw[i1 * d2 + i2] = scale * acc;
                else
                    m->dw[i2 * d1 + i1] = scale * acc;
            }
    }
    free(A);
    free(B);
}

static void test_fused_experts(void **state)
{
    (void)state;
    for (int out_in = 0; out_in < 2; out_in++) {
        fixture f;
        fx_init(&f, out_in ? TSAFE_DTYPE_F16 : TSAFE_DTYPE_F32);
        /* alpha_pattern reaches the fused param by "<module>.<param>" */
        add_fused(&f, QWEN "1.mlp.experts", "layers.1.mlp.experts", 1, "gate_up_proj",
                  2, 4, 6, 10, 6, 3.0, out_in);
        add_plain(&f, QWEN "1.self_attn.q_proj", "", "layers.1.self_attn.q_proj", 1,
                  -1, "q_proj", 2, 6, 6, 4, 2.0);
        fx_write(&f, "{\"peft_type\":\"LORA\",\"r\":2,\"lora_alpha\":4,"
                     "\"target_modules\":[\"q_proj\"],"
                     "\"target_parameters\":[\"mlp.experts.gate_up_proj\"],"
                     "\"alpha_pattern\":{\"experts.gate_up_proj\":6}}");
        tsafe_lora_load_options opt = {.fused_layout = out_in ? TSAFE_LORA_FUSED_OUT_IN
                                              : TSAFE_LORA_FUSED_IN_OUT};
        tsafe_lora_adapter *a = load_ok(&f, &opt);
        check_adapter(&f, a);
        tsafe_lora_adapter_free(a);
        fx_free(&f);
    }

    /* Two parameters on one module: PEFT nests wrappers; the inner one's
     * keys carry ".base_layer". Rank from rank_pattern (r=3 for down). */
    fixture f;
    fx_init(&f, TSAFE_DTYPE_BF16);
    add_fused(&f, QWEN "0.mlp.experts", "layers.0.mlp.experts", 0, "down_proj", 3,
              2, 5, 6, 4, 4.0 / 3.0, 0);
    add_fused(&f, QWEN "0.mlp.experts.base_layer", "layers.0.mlp.experts", 0,
              "gate_up_proj", 2, 2, 6, 10, 4, 2.0, 0);
    const char *cfg2 =
        "{\"peft_type\":\"LORA\",\"r\":2,\"lora_alpha\":4,"
        "\"target_modules\":[],\"rank_pattern\":{\"experts.down_proj\":3},"
        "\"target_parameters\":[\"model.layers.0.mlp.experts.down_proj\","
        "\"mlp.experts.gate_up_proj\"]}";
    fx_write(&f, cfg2);
    tsafe_lora_adapter *a = load_ok(&f, NULL);
    check_adapter(&f, a);
    tsafe_lora_adapter_free(a);
    /* without target_parameters the projection is unknown */
    fx_text(&f, "adapter_config.json",
            "{\"peft_type\":\"LORA\",\"r\":2,\"lora_alpha\":4}");
    assert_int_equal(tsafe_lora_adapter_load_peft(f.dir, &a), TSAFE_E_ADAPTER);
    fx_free(&f);
}

static void test_save_reload(void **state)
{
    (void)state;
    tsafe_lora_config cfg = {.r = 4, .lora_alpha = 8, .use_rslora = 1};
    tsafe_lora_adapter *a;
    assert_int_equal(tsafe_lora_adapter_create(&cfg, &a), TSAFE_OK);
    struct { const char *name; size_t r, in, out; double alpha; } spec[] = {
        {"layers.0.self_attn.q_proj", 4, 32, 32, 8},
        {"layers.0.self_attn.v_proj", 6, 32, 8, 8},
        {"layers.10.mlp.experts.3.down_proj", 4, 16, 32, 2.5},
        {"layers.2.mlp.gate_proj", 8, 32, 16, 3},
    };
    float *A[4], *B[4];
    for (int k = 0; k < 4; k++) {
        A[k] = rand_matrix(TSAFE_DTYPE_F32, spec[k].r, spec[k].in);
        B[k] = rand_matrix(TSAFE_DTYPE_F32, spec[k].out, spec[k].r);
        assert_int_equal(tsafe_lora_adapter_add_module(a, spec[k].name, spec[k].r,
                                                       spec[k].in, spec[k].out,
                                                       A[k], B[k], spec[k].alpha),
                         TSAFE_OK);
    }
    /* refusals of add_module */
    assert_int_equal(tsafe_lora_adapter_add_module(a, spec[0].name, 4, 32, 32, A[0],
                                                   B[0], 8), TSAFE_E_ARG);
    assert_int_equal(tsafe_lora_adapter_add_module(a, "z", 0, 32, 32, A[0], B[0], 8),
                     TSAFE_E_ARG);
    assert_int_equal(tsafe_lora_adapter_add_module(a, "z", 4, 32, 32, A[0], B[0],
                                                   NAN), TSAFE_E_VALUE_RANGE);
    float keep = A[0][5];
    A[0][5] = INFINITY;
    assert_int_equal(tsafe_lora_adapter_add_module(a, "z", 4, 32, 32, A[0], B[0], 8),
                     TSAFE_E_VALUE_RANGE);
    A[0][5] = keep;
    assert_int_equal(tsafe_lora_adapter_module_count(a), 4);

    char dir[] = "/tmp/tsafe_peft_save_XXXXXX";
    assert_non_null(mkdtemp(dir));
    const tsafe_dtype dts[3] = {TSAFE_DTYPE_F32, TSAFE_DTYPE_BF16, TSAFE_DTYPE_F16};
    for (int d = 0; d < 3; d++) {
        assert_int_equal(tsafe_lora_adapter_save_peft(a, dir, dts[d]), TSAFE_OK);
        tsafe_lora_adapter *b;
        assert_int_equal(tsafe_lora_adapter_load_peft(dir, &b), TSAFE_OK);
        assert_int_equal(tsafe_lora_adapter_module_count(b), 4);
        double tol = dts[d] == TSAFE_DTYPE_F32 ? 0 : dts[d] == TSAFE_DTYPE_BF16
                                                        ? 0x1p-8 : 0x1p-11;
        for (int k = 0; k < 4; k++) {
            size_t idx;
            tsafe_lora_module_info mi;
            assert_int_equal(tsafe_lora_adapter_find(b, spec[k].name, &idx), TSAFE_OK);
            assert_int_equal(tsafe_lora_adapter_module(b, idx, &mi), TSAFE_OK);
            assert_int_equal(mi.rank, spec[k].r);
            assert_int_equal(mi.in_dim, spec[k].in);
            assert_int_equal(mi.out_dim, spec[k].out);
            assert_true(mi.alpha == spec[k].alpha);
            assert_true(fabs(mi.scale - spec[k].alpha / sqrt((double)spec[k].r)) <
                        1e-15);
            assert_int_equal(mi.source_dtype, dts[d]);
            for (size_t i = 0; i < spec[k].r * spec[k].in; i++)
                assert_true(fabs(mi.A[i] - A[k][i]) <= tol * fabs(A[k][i]) + 0x1p-24);
            for (size_t i = 0; i < spec[k].out * spec[k].r; i++)
                assert_true(fabs(mi.B[i] - B[k][i]) <= tol * fabs(B[k][i]) + 0x1p-24);
        }
        tsafe_lora_config c2;
        assert_int_equal(tsafe_lora_adapter_config(b, &c2), TSAFE_OK);
        assert_true(c2.r == 4 && c2.lora_alpha == 8 && c2.use_rslora);
        tsafe_lora_adapter_free(b);
    }
    assert_int_equal(tsafe_lora_adapter_save_peft(a, dir, TSAFE_DTYPE_I8),
                     TSAFE_E_DTYPE);
    /* memory variant */
    char *json;
    uint8_t *st;
    size_t stn;
    assert_int_equal(tsafe_lora_adapter_save_peft_memory(a, TSAFE_DTYPE_F32, &json,
                                                         &st, &stn), TSAFE_OK);
    tsafe_lora_adapter *c;
    assert_int_equal(tsafe_lora_adapter_load_peft_memory(json, strlen(json), st, stn,
                                                         NULL, &c), TSAFE_OK);
    assert_int_equal(tsafe_lora_adapter_module_count(c), 4);
    tsafe_lora_module_info mi;
    assert_int_equal(tsafe_lora_adapter_module(c, 3, &mi), TSAFE_OK);
    assert_string_equal(mi.name, "layers.10.mlp.experts.3.down_proj");
    assert_int_equal(mi.expert, 3);
    assert_memory_equal(mi.A, A[2], 4 * 16 * sizeof(float));
    tsafe_lora_adapter_free(c);
    tsafe_safetensors_bytes_free(json);
    tsafe_safetensors_bytes_free(st);

    char p[128];
    snprintf(p, sizeof p, "%s/adapter_config.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", dir);
    unlink(p);
    rmdir(dir);
    for (int k = 0; k < 4; k++) {
        free(A[k]);
        free(B[k]);
    }
    tsafe_lora_adapter_free(a);
}

/* Pattern keys written by save must not capture other modules through
 * PEFT's suffix rule: "b.model.x.q" ends with ".model.x.q". */
static void test_save_pattern_collision(void **state)
{
    (void)state;
    tsafe_lora_config cfg = {.r = 4, .lora_alpha = 8};
    tsafe_lora_adapter *a;
    assert_int_equal(tsafe_lora_adapter_create(&cfg, &a), TSAFE_OK);
    float *A = rand_matrix(TSAFE_DTYPE_F32, 6, 4), *B = rand_matrix(TSAFE_DTYPE_F32, 4, 6);
    assert_int_equal(tsafe_lora_adapter_add_module(a, "x.q", 6, 4, 4, A, B, 3), TSAFE_OK);
    assert_int_equal(tsafe_lora_adapter_add_module(a, "b.model.x.q", 4, 4, 4, A, B, 8),
                     TSAFE_OK);
    assert_int_equal(tsafe_lora_adapter_add_module(a, "c.model.x.q", 6, 4, 4, A, B, 8),
                     TSAFE_OK);
    /* names a round trip could not reproduce */
    const char *bad[] = {"", "model.layers.0.q_proj", "layers.0.mlp.experts",
                         "layers.0.q_proj.lora_A", "a..b", "x.base_layer.q", "q."};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(tsafe_lora_adapter_add_module(a, bad[i], 4, 4, 4, A, B, 8),
                         TSAFE_E_ARG);
    char *json;
    uint8_t *st;
    size_t stn;
    assert_int_equal(tsafe_lora_adapter_save_peft_memory(a, TSAFE_DTYPE_F32, &json, &st,
                                                         &stn), TSAFE_OK);
    tsafe_lora_adapter *b;
    assert_int_equal(tsafe_lora_adapter_load_peft_memory(json, strlen(json), st, stn,
                                                         NULL, &b), TSAFE_OK);
    const char *names[3] = {"x.q", "b.model.x.q", "c.model.x.q"};
    const size_t ranks[3] = {6, 4, 6};
    const double alphas[3] = {3, 8, 8};
    for (int k = 0; k < 3; k++) {
        size_t idx;
        tsafe_lora_module_info mi;
        assert_int_equal(tsafe_lora_adapter_find(b, names[k], &idx), TSAFE_OK);
        assert_int_equal(tsafe_lora_adapter_module(b, idx, &mi), TSAFE_OK);
        assert_int_equal(mi.rank, ranks[k]);
        assert_true(mi.alpha == alphas[k]);
        assert_int_equal(mi.layer, -1);
    }
    tsafe_lora_adapter_free(b);
    tsafe_safetensors_bytes_free(json);
    tsafe_safetensors_bytes_free(st);
    tsafe_lora_adapter_free(a);
    free(A);
    free(B);
}

/* One valid module plus whatever a case adds; returns the load status. */
static const char *GOOD_CFG = "{\"peft_type\":\"LORA\",\"r\":2,\"lora_alpha\":4}";

static tsafe_status load_case_ei(const char *cfg, int extra, tsafe_dtype dt,
                                 tsafe_error_info *ei);

static tsafe_status load_case(const char *cfg, int extra, tsafe_dtype dt)
{
    return load_case_ei(cfg, extra, dt, NULL);
}

/* With ei: loads through _ex with opt.error = ei as well, and checks that
 * both loads agree and that ei->status is the returned status. */
static tsafe_status load_case_ei(const char *cfg, int extra, tsafe_dtype dt,
                                 tsafe_error_info *ei)
{
    fixture f;
    fx_init(&f, dt);
    /* B has room for the 8 x 3 wrong-rank case */
    float *A = rand_matrix(TSAFE_DTYPE_BF16, 2, 8), *B = rand_matrix(TSAFE_DTYPE_BF16, 8, 3);
    put(&f, QWEN "0.self_attn.q_proj.lora_A.weight", 2, 8, A);
    uint64_t s2[2] = {8, 2}, s3[3] = {1, 2, 8};
    switch (extra) {
    case 1: /* no B */
        break;
    case 2: /* B with the wrong rank */
        put(&f, QWEN "0.self_attn.q_proj.lora_B.weight", 8, 3, B);
        break;
    case 3: /* DoRA magnitude vector */
        put(&f, QWEN "0.self_attn.q_proj.lora_B.weight", 8, 2, B);
        put(&f, QWEN "0.self_attn.q_proj.lora_magnitude_vector", 1, 8, A);
        break;
    case 4: /* modules_to_save full weight */
        put(&f, QWEN "0.self_attn.q_proj.lora_B.weight", 8, 2, B);
        put(&f, "base_model.model.lm_head.modules_to_save.default.weight", 2, 8, A);
        break;
    case 5: { /* B stored as I32 */
        int32_t raw[16] = {0};
        assert_int_equal(tsafe_safetensors_writer_add(
                             f.w, QWEN "0.self_attn.q_proj.lora_B.weight",
                             TSAFE_DTYPE_I32, s2, 2, raw, sizeof raw), TSAFE_OK);
        break;
    }
    case 6: /* NaN in B */
        B[3] = NAN;
        put(&f, QWEN "0.self_attn.q_proj.lora_B.weight", 8, 2, B);
        break;
    case 7: /* 3-D factor */
        assert_int_equal(tsafe_safetensors_writer_add_f32(
                             f.w, QWEN "0.self_attn.k_proj.lora_A.weight", dt, s3, 3, A),
                         TSAFE_OK);
        put(&f, QWEN "0.self_attn.k_proj.lora_B.weight", 8, 2, B);
        put(&f, QWEN "0.self_attn.q_proj.lora_B.weight", 8, 2, B);
        break;
    case 8: /* the same factor under two spellings */
        put(&f, QWEN "0.self_attn.q_proj.lora_B.weight", 8, 2, B);
        put(&f, "model.layers.0.self_attn.q_proj.lora_A.default.weight", 2, 8, A);
        break;
    case 9: /* LoRA bias */
        put(&f, QWEN "0.self_attn.q_proj.lora_B.weight", 8, 2, B);
        put(&f, QWEN "0.self_attn.q_proj.lora_B.bias", 1, 8, A);
        break;
    default:
        put(&f, QWEN "0.self_attn.q_proj.lora_B.weight", 8, 2, B);
    }
    fx_write(&f, cfg);
    tsafe_lora_adapter *a = (tsafe_lora_adapter *)&f; /* must be reset */
    tsafe_status st = tsafe_lora_adapter_load_peft(f.dir, &a);
    if (st == TSAFE_OK)
        tsafe_lora_adapter_free(a);
    else
        assert_null(a);
    if (ei) {
        tsafe_lora_load_options opt = {TSAFE_LORA_FUSED_IN_OUT, ei};
        ei->status = TSAFE_E_STATE; /* stale values must be reset */
        snprintf(ei->detail, sizeof ei->detail, "stale");
        tsafe_status st2 = tsafe_lora_adapter_load_peft_ex(f.dir, &opt, &a);
        assert_int_equal(st2, st);
        assert_int_equal(ei->status, st);
        if (st2 == TSAFE_OK)
            tsafe_lora_adapter_free(a);
        print_message("case %d: %s: %s\n", extra, tsafe_status_name(st), ei->detail);
    }
    free(A);
    free(B);
    fx_free(&f);
    return st;
}

static void test_malformed(void **state)
{
    (void)state;
    assert_int_equal(load_case(GOOD_CFG, 0, TSAFE_DTYPE_F32), TSAFE_OK);
    assert_int_equal(load_case(GOOD_CFG, 0, TSAFE_DTYPE_BF16), TSAFE_OK);
    /* config problems */
    assert_int_equal(load_case("{\"peft_type\":\"LORA\",\"r\":2,\"lora_alpha\":4,"
                               "\"use_dora\":true}", 0, TSAFE_DTYPE_F32), TSAFE_E_DORA);
    assert_int_equal(load_case("{\"peft_type\":\"LORA\",\"lora_alpha\":4}", 0,
                               TSAFE_DTYPE_F32), TSAFE_E_MISSING_FIELD);
    assert_int_equal(load_case("{\"peft_type\":\"LORA\",\"r\":2}", 0,
                               TSAFE_DTYPE_F32), TSAFE_E_MISSING_FIELD);
    assert_int_equal(load_case("{\"r\":2,\"lora_alpha\":4}", 0, TSAFE_DTYPE_F32),
                     TSAFE_E_MISSING_FIELD);
    assert_int_equal(load_case("{\"peft_type\":\"LORA\",\"r\":2,", 0, TSAFE_DTYPE_F32),
                     TSAFE_E_JSON);
    assert_int_equal(load_case("{\"peft_type\":\"LORA\",\"r\":2,\"r\":2,"
                               "\"lora_alpha\":4}", 0, TSAFE_DTYPE_F32), TSAFE_E_JSON);
    assert_int_equal(load_case("{\"peft_type\":\"LORA\",\"r\":\"2\",\"lora_alpha\":4}",
                               0, TSAFE_DTYPE_F32), TSAFE_E_FORMAT);
    assert_int_equal(load_case("{\"peft_type\":\"LORA\",\"r\":0,\"lora_alpha\":4}",
                               0, TSAFE_DTYPE_F32), TSAFE_E_FORMAT);
    assert_int_equal(load_case("{\"peft_type\":\"IA3\",\"r\":2,\"lora_alpha\":4}", 0,
                               TSAFE_DTYPE_F32), TSAFE_E_UNSUPPORTED);
    /* weight problems */
    assert_int_equal(load_case(GOOD_CFG, 1, TSAFE_DTYPE_F32), TSAFE_E_ADAPTER);
    assert_int_equal(load_case(GOOD_CFG, 2, TSAFE_DTYPE_F32), TSAFE_E_SHAPE);
    assert_int_equal(load_case(GOOD_CFG, 3, TSAFE_DTYPE_F32), TSAFE_E_DORA);
    assert_int_equal(load_case(GOOD_CFG, 4, TSAFE_DTYPE_F32), TSAFE_E_UNSUPPORTED);
    assert_int_equal(load_case(GOOD_CFG, 5, TSAFE_DTYPE_F32), TSAFE_E_DTYPE);
    assert_int_equal(load_case(GOOD_CFG, 6, TSAFE_DTYPE_F32), TSAFE_E_VALUE_RANGE);
    assert_int_equal(load_case(GOOD_CFG, 7, TSAFE_DTYPE_F32), TSAFE_E_SHAPE);
    assert_int_equal(load_case(GOOD_CFG, 8, TSAFE_DTYPE_F32), TSAFE_E_ADAPTER);
    assert_int_equal(load_case(GOOD_CFG, 9, TSAFE_DTYPE_F32), TSAFE_E_UNSUPPORTED);
}

/* The detail names the culprit (tensor or field) and the numbers. */
static void assert_has(const char *detail, const char *want)
{
    if (!strstr(detail, want))
        print_message("detail \"%s\" lacks \"%s\"\n", detail, want);
    assert_non_null(strstr(detail, want));
}

static void test_error_detail(void **state)
{
    (void)state;
    tsafe_error_info ei;
    assert_int_equal(load_case_ei(GOOD_CFG, 0, TSAFE_DTYPE_F32, &ei), TSAFE_OK);
    assert_string_equal(ei.detail, "");
    /* B [8, 3] against A [2, 8]: tensor, both shapes, expected vs found */
    assert_int_equal(load_case_ei(GOOD_CFG, 2, TSAFE_DTYPE_F32, &ei), TSAFE_E_SHAPE);
    assert_has(ei.detail, "tensor '" QWEN "0.self_attn.q_proj.lora_B.weight' is [8, 3]");
    assert_has(ei.detail, "expected 2 columns");
    assert_has(ei.detail, QWEN "0.self_attn.q_proj.lora_A.weight' [2, 8]");
    assert_has(ei.detail, "found 3");
    assert_int_equal(load_case_ei(GOOD_CFG, 1, TSAFE_DTYPE_F32, &ei), TSAFE_E_ADAPTER);
    assert_has(ei.detail, QWEN "0.self_attn.q_proj.lora_A.weight': lora_A without its lora_B");
    assert_int_equal(load_case_ei(GOOD_CFG, 5, TSAFE_DTYPE_F32, &ei), TSAFE_E_DTYPE);
    assert_has(ei.detail, "q_proj.lora_B.weight': dtype I32, expected F32, F16 or BF16");
    assert_int_equal(load_case_ei(GOOD_CFG, 6, TSAFE_DTYPE_F32, &ei), TSAFE_E_VALUE_RANGE);
    assert_has(ei.detail, "module 'layers.0.self_attn.q_proj': lora_B[");
    assert_has(ei.detail, "] is not finite (nan)");
    /* issue 23.3: finite values whose delta cannot be finite in float32 */
    assert_int_equal(load_case_ei("{\"peft_type\":\"LORA\",\"r\":2,\"lora_alpha\":1e300}", 0,
                                  TSAFE_DTYPE_F32, &ei),
                     TSAFE_E_VALUE_RANGE);
    assert_has(ei.detail, "scale 5e+299 (alpha 1e+300, rank 2) is beyond float32's range");
    assert_int_equal(load_case_ei(GOOD_CFG, 7, TSAFE_DTYPE_F32, &ei), TSAFE_E_SHAPE);
    assert_has(ei.detail, "k_proj.lora_A.weight': shape [1, 2, 8], expected 2-D");
    assert_has(ei.detail, "found 3-D");
    assert_int_equal(load_case_ei(GOOD_CFG, 3, TSAFE_DTYPE_F32, &ei), TSAFE_E_DORA);
    assert_has(ei.detail, "lora_magnitude_vector");
    /* configured rank 3 against a rank-2 factor */
    assert_int_equal(load_case_ei("{\"peft_type\":\"LORA\",\"r\":3,\"lora_alpha\":4}", 0,
                                  TSAFE_DTYPE_F32, &ei),
                     TSAFE_E_ADAPTER);
    assert_has(ei.detail, "q_proj.lora_A.weight': rank 2");
    assert_has(ei.detail, "(expected 3, found 2)");
    /* config fields */
    assert_int_equal(load_case_ei("{\"peft_type\":\"LORA\",\"lora_alpha\":4}", 0,
                                  TSAFE_DTYPE_F32, &ei),
                     TSAFE_E_MISSING_FIELD);
    assert_string_equal(ei.detail, "adapter_config.json: no \"r\"");
    assert_int_equal(load_case_ei("{\"peft_type\":\"LORA\",\"r\":2,", 0, TSAFE_DTYPE_F32,
                                  &ei),
                     TSAFE_E_JSON);
    assert_has(ei.detail, "adapter_config.json: line 1 column");

    /* safetensors level, from memory: offsets span 28 bytes for a [2, 4] F32
     * tensor (32 needed) */
    static const char hdr[] =
        "{\"m.lora_A.weight\":{\"dtype\":\"F32\",\"shape\":[2,4],\"data_offsets\":[0,28]}}";
    uint8_t buf[8 + sizeof hdr - 1 + 28];
    memset(buf, 0, sizeof buf);
    buf[0] = (uint8_t)(sizeof hdr - 1);
    memcpy(buf + 8, hdr, sizeof hdr - 1);
    tsafe_lora_load_options opt = {TSAFE_LORA_FUSED_IN_OUT, &ei};
    tsafe_lora_adapter *a = NULL;
    assert_int_equal(tsafe_lora_adapter_load_peft_memory(GOOD_CFG, strlen(GOOD_CFG), buf,
                                                         sizeof buf, &opt, &a),
                     TSAFE_E_SHAPE);
    assert_null(a);
    assert_int_equal(ei.status, TSAFE_E_SHAPE);
    assert_string_equal(ei.detail,
                        "tensor 'm.lora_A.weight': shape [2, 4] of F32 needs 32 bytes, "
                        "data_offsets [0, 28] span 28 (expected 32, found 28)");
    /* NULL error pointer: same status, nothing written anywhere */
    opt.error = NULL;
    assert_int_equal(tsafe_lora_adapter_load_peft_memory(GOOD_CFG, strlen(GOOD_CFG), buf,
                                                         sizeof buf, &opt, &a),
                     TSAFE_E_SHAPE);
    /* a tensor name longer than the detail: cut to fit, NUL-terminated */
    size_t name_len = 2 * TSAFE_ERROR_DETAIL_MAX, cap = name_len + 128;
    char *lh = malloc(cap);
    assert_non_null(lh);
    for (size_t i = 2; i + 1 < 2 + name_len; i += 2) { /* U+00E9, two bytes each */
        lh[i] = (char)0xc3;
        lh[i + 1] = (char)0xa9;
    }
    lh[0] = '{';
    lh[1] = '"';
    int n = snprintf(lh + 2 + name_len, cap - 2 - name_len,
                     "\":{\"dtype\":\"F32\",\"shape\":[2,4],\"data_offsets\":[0,28]}}");
    size_t hl = 2 + name_len + (size_t)n;
    uint8_t *lb = calloc(1, 8 + hl + 28);
    assert_non_null(lb);
    lb[0] = (uint8_t)hl;
    lb[1] = (uint8_t)(hl >> 8);
    memcpy(lb + 8, lh, hl);
    opt.error = &ei;
    assert_int_equal(tsafe_lora_adapter_load_peft_memory(GOOD_CFG, strlen(GOOD_CFG), lb,
                                                         8 + hl + 28, &opt, &a),
                     TSAFE_E_SHAPE);
    /* "tensor '" is 8 bytes, so 511 would end inside a character: the cut
     * drops the lone lead byte */
    size_t dl = strlen(ei.detail);
    assert_int_equal(dl, TSAFE_ERROR_DETAIL_MAX - 2);
    assert_has(ei.detail, "tensor '\xc3\xa9\xc3\xa9");
    assert_int_equal((unsigned char)ei.detail[dl - 2], 0xc3);
    assert_int_equal((unsigned char)ei.detail[dl - 1], 0xa9);
    free(lb);
    free(lh);
    assert_int_equal(tsafe_lora_adapter_load_peft_memory(GOOD_CFG, strlen(GOOD_CFG), NULL, 0,
                                                         &opt, &a),
                     TSAFE_E_TRUNCATED);
    assert_string_equal(ei.detail, "0 bytes: shorter than the 8-byte header length");
}

/* Issue 23.3: modules whose delta cannot be finite are refused when built
 * (not only when loaded), and the plaintext delta of a row is refused when
 * it is not finite in float32; otherwise it matches a double loop here. */
static void test_non_finite_refused(void **state)
{
    (void)state;
    enum { R = 3, IN = 16, OUT = 8 };
    tsafe_lora_config cfg = {R, 6.0, 0, 0};
    tsafe_lora_adapter *a = NULL;
    assert_int_equal(tsafe_lora_adapter_create(&cfg, &a), TSAFE_OK);
    float A[R * IN], B[OUT * R], x[IN], d[OUT];
    for (int i = 0; i < R * IN; i++)
        A[i] = 1e20f;
    for (int i = 0; i < OUT * R; i++)
        B[i] = 1e20f; /* finite, but s*B*A is about 2e40 */
    assert_int_equal(tsafe_lora_adapter_add_module(a, "huge", R, IN, OUT, A, B, 6.0),
                     TSAFE_E_VALUE_RANGE);
    for (int i = 0; i < R * IN; i++)
        A[i] = tsafe_test_uniform_float(-1, 1);
    for (int i = 0; i < OUT * R; i++)
        B[i] = tsafe_test_uniform_float(-1, 1);
    assert_int_equal(tsafe_lora_adapter_add_module(a, "alpha", R, IN, OUT, A, B, 1e300),
                     TSAFE_E_VALUE_RANGE);
    A[5] = INFINITY;
    assert_int_equal(tsafe_lora_adapter_add_module(a, "inf", R, IN, OUT, A, B, 6.0),
                     TSAFE_E_VALUE_RANGE);
    A[5] = 0.5f;
    assert_int_equal(tsafe_lora_adapter_add_module(a, "ok", R, IN, OUT, A, B, 6.0), TSAFE_OK);
    assert_int_equal(tsafe_lora_adapter_module_count(a), 1);
    tsafe_lora_module_info mi;
    assert_int_equal(tsafe_lora_adapter_module(a, 0, &mi), TSAFE_OK);
    for (int j = 0; j < IN; j++)
        x[j] = tsafe_test_uniform_float(-4, 4);
    assert_int_equal(tsafe_lora_module_apply(&mi, x, d), TSAFE_OK);
    for (int o = 0; o < OUT; o++) {
        double ref = 0;
        for (int r = 0; r < R; r++) {
            double u = 0;
            for (int j = 0; j < IN; j++)
                u += (double)A[r * IN + j] * x[j];
            ref += (double)B[o * R + r] * u;
        }
        ref *= 6.0 / R;
        assert_true(fabs(d[o] - ref) <= 1e-6 * fabs(ref) + 1e-30);
    }
    for (int j = 0; j < IN; j++)
        x[j] = (A[j] > 0 ? 3e38f : -3e38f); /* A x alone is beyond float32 */
    assert_int_equal(tsafe_lora_module_apply(&mi, x, d), TSAFE_E_VALUE_RANGE);
    x[0] = NAN;
    assert_int_equal(tsafe_lora_module_apply(&mi, x, d), TSAFE_E_VALUE_RANGE);
    tsafe_lora_adapter_free(a);
}

static void test_directory_cases(void **state)
{
    (void)state;
    fixture f;
    fx_init(&f, TSAFE_DTYPE_F32);
    tsafe_lora_adapter *a = NULL;
    /* empty directory */
    assert_int_equal(tsafe_lora_adapter_load_peft(f.dir, &a), TSAFE_E_NOT_FOUND);
    /* pickled weights only */
    fx_text(&f, "adapter_config.json", GOOD_CFG);
    fx_text(&f, "adapter_model.bin", "PK\x03\x04 pickle");
    assert_int_equal(tsafe_lora_adapter_load_peft(f.dir, &a), TSAFE_E_PICKLE);
    assert_null(a);
    /* a truncated safetensors file next to the pickle: the pickle is ignored,
     * the safetensors error reported */
    float v[16] = {0};
    put(&f, QWEN "0.self_attn.q_proj.lora_A.weight", 2, 8, v);
    put(&f, QWEN "0.self_attn.q_proj.lora_B.weight", 8, 2, v);
    uint8_t *bytes;
    size_t len;
    assert_int_equal(tsafe_safetensors_writer_serialize(f.w, &bytes, &len), TSAFE_OK);
    char p[128];
    fx_path(&f, "adapter_model.safetensors", p, sizeof p);
    FILE *fp = fopen(p, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(bytes, 1, len - 3, fp), len - 3);
    fclose(fp);
    assert_int_equal(tsafe_lora_adapter_load_peft(f.dir, &a), TSAFE_E_TRUNCATED);
    /* and the full file loads */
    fp = fopen(p, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(bytes, 1, len, fp), len);
    fclose(fp);
    assert_int_equal(tsafe_lora_adapter_load_peft(f.dir, &a), TSAFE_OK);
    tsafe_lora_adapter_free(a);
    /* weights but no config */
    fx_path(&f, "adapter_config.json", p, sizeof p);
    unlink(p);
    assert_int_equal(tsafe_lora_adapter_load_peft(f.dir, &a), TSAFE_E_NOT_FOUND);
    tsafe_safetensors_bytes_free(bytes);
    fx_free(&f);
    assert_int_equal(tsafe_lora_adapter_load_peft(NULL, &a), TSAFE_E_NULL);
}

int main(void)
{
    tsafe_test_rng_init("test_peft");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_all_dtypes),
        cmocka_unit_test(test_prefixes_and_variants),
        cmocka_unit_test(test_rank_alpha_patterns),
        cmocka_unit_test(test_rslora_and_fan_in_fan_out),
        cmocka_unit_test(test_per_expert_keys),
        cmocka_unit_test(test_fused_experts),
        cmocka_unit_test(test_save_reload),
        cmocka_unit_test(test_save_pattern_collision),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_error_detail),
        cmocka_unit_test(test_non_finite_refused),
        cmocka_unit_test(test_directory_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
