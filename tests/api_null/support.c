/* The fixture, the sealed world and the driver of the test_api_null_*
 * suites (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

#include <dirent.h>

#include "file.h" /* the libraries' whole-file reader */

fixture F;
sealed_world_t S;

void count_destroy(void *obj)
{
    (void)obj;
    F.destroyed++;
}

/* ----------------------------------------------------------- fixture */

static int api_null_setup(void **state)
{
    fixture *f = &F;
    memset(f, 0, sizeof *f);
    uint8_t seed[32];
    memset(seed, 0x5A, sizeof seed);
    /* CKKS: N = 1024, two 30-bit primes, insecure (fast) */
    f->params.log_n = 10;
    f->params.n_primes = 2;
    f->params.prime_bits[0] = 30;
    f->params.prime_bits[1] = 30;
    f->params.scale = 0x1p20;
    f->params.flags = TSAFE_PARAMS_INSECURE_FOR_TESTS;
    tsafe_params p2 = f->params;
    p2.log_n = 11;
    double v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    if (tsafe_context_create(&f->params, &f->ctx) || tsafe_context_create(&p2, &f->ctx2) ||
        tsafe_secret_key_generate(f->ctx, seed, &f->sk) ||
        tsafe_public_key_generate(f->ctx, f->sk, seed, &f->pk) ||
        tsafe_plaintext_create(f->ctx, &f->pt) ||
        tsafe_ckks_encode(f->ctx, v, 8, 0x1p20, 1, f->pt) ||
        tsafe_plaintext_create(f->ctx, &f->pt0) ||
        tsafe_ckks_encode(f->ctx, v, 8, 0x1p20, 0, f->pt0) ||
        tsafe_ciphertext_create(f->ctx, &f->ct) ||
        tsafe_ckks_encrypt_symmetric(f->ctx, f->sk, f->pt, seed, f->ct) ||
        tsafe_ciphertext_create(f->ctx, &f->ct0) ||
        tsafe_ckks_encrypt_public(f->ctx, f->pk, f->pt0, seed, f->ct0) ||
        tsafe_ciphertext_create(f->ctx, &f->out))
        return -1;
    if (tsafe_ciphertext_serialized_size(f->ctx, f->ct, &f->ct_len))
        return -1;
    f->ct_bytes = malloc(f->ct_len);
    size_t w = 0;
    if (!f->ct_bytes ||
        tsafe_ciphertext_serialize(f->ctx, f->ct, f->ct_bytes, f->ct_len, &w))
        return -1;
    if (tsafe_backend_cpu_create(f->ctx, &f->be) ||
        tsafe_buffer_alloc(f->be, 2, 2, &f->buf) || tsafe_buffer_alloc(f->be, 2, 1, &f->buf1))
        return -1;
    /* LoRA */
    for (size_t i = 0; i < LR * LD; i++) {
        f->A[i] = (float)(0.04 * sin((double)i));
        f->B[i] = (float)(0.04 * cos((double)i));
    }
    for (size_t i = 0; i < LD; i++)
        f->x[i] = (float)(0.5 * sin(0.3 * (double)i));
    const tsafe_lora_site *sites[1];
    float *us[1] = {f->u};
    uint32_t ranks[1] = {LR};
    if (tsafe_lora_plan_auto(LD, LR, 1.0, 0.05, 1e-4, &f->plan) ||
        tsafe_lora_client_create(&f->plan, seed, &f->client) ||
        tsafe_lora_server_create(&f->plan, &f->server) ||
        tsafe_lora_site_create(tsafe_lora_server_context(f->server), &f->plan, f->A, f->B, LD,
                               1.0f, &f->site) ||
        tsafe_lora_local_create(&f->plan, seed, &f->local))
        return -1;
    sites[0] = f->site;
    if (tsafe_lora_client_encrypt(f->client, f->x, &f->req, &f->req_len, NULL) ||
        tsafe_lora_server_process(f->server, sites, 1, f->req, f->req_len, &f->resp,
                                  &f->resp_len, NULL) ||
        tsafe_lora_client_decode(f->client, f->resp, f->resp_len, 1, ranks, us, NULL) ||
        tsafe_lora_client_release(f->client, 1, ranks, us, NULL, &f->umsg, &f->umsg_len, NULL))
        return -1;
    /* DP */
    tsafe_dp_params dpp;
    memset(&dpp, 0, sizeof dpp);
    dpp.clip_norm = 1.0;
    dpp.eps = 1.0;
    dpp.delta = 1e-6;
    dpp.eps_total = 10.0;
    dpp.delta_total = 1e-5;
    if (tsafe_dp_session_create(&dpp, &f->dp))
        return -1;
    /* safetensors + adapter */
    uint64_t shape_a[2] = {2, 8}, shape_b[2] = {8, 2};
    float vals[16];
    for (int i = 0; i < 16; i++)
        vals[i] = 0.01f * (float)i;
    if (tsafe_safetensors_writer_create(&f->stw) ||
        tsafe_safetensors_writer_add_f32(f->stw, "a", TSAFE_DTYPE_F32, shape_a, 2, vals) ||
        tsafe_safetensors_writer_add(f->stw, "i", TSAFE_DTYPE_I32, shape_a, 1, vals, 8) ||
        tsafe_safetensors_writer_set_metadata(f->stw, "format", "pt") ||
        tsafe_safetensors_writer_serialize(f->stw, &f->st_bytes, &f->st_len) ||
        tsafe_safetensors_parse(f->st_bytes, f->st_len, &f->st))
        return -1;
    tsafe_lora_config lc = {2, 4.0, 0, 0};
    if (tsafe_lora_adapter_create(&lc, &f->adapter) ||
        tsafe_lora_adapter_add_module(f->adapter, "layers.0.self_attn.q_proj", 2, 8, 8, vals,
                                      vals, 4.0))
        return -1;
    (void)shape_b;
    /* package */
    static const char *const targets[1] = {"q_proj"};
    tsafe_package_manifest m = {.adapter_id = "id", .domain = "banking", .rank = 2,
        .alpha = 4.0, .targets = targets, .n_targets = 1,
        .price_per_1k_tokens = 0.5, .creator = "me"};
    if (tsafe_package_keypair(f->pkg_pk, f->pkg_sk) ||
        tsafe_package_create(&m, f->st_bytes, f->st_len, f->pkg_sk, &f->pkg, &f->pkg_len) ||
        tsafe_package_open(f->pkg, f->pkg_len, f->pkg_pk, &f->package))
        return -1;
    /* registry */
    static int object;
    tsafe_registry_meta meta = {"adapter-1", 0.5, NULL};
    if (tsafe_registry_create(&f->reg) || tsafe_registry_set_allow_unsigned(f->reg, 1) ||
        tsafe_registry_put(f->reg, "slot", &object, count_destroy, &meta) ||
        tsafe_registry_acquire(f->reg, "slot", &f->ref))
        return -1;
    /* MoE: a tiny MoE with a gated shared expert */
    memset(&f->moecfg, 0, sizeof f->moecfg);
    strcpy(f->moecfg.name, "tiny");
    f->moecfg.hidden_size = 16;
    f->moecfg.n_layers = 1;
    f->moecfg.n_heads = 2;
    f->moecfg.n_kv_heads = 2;
    f->moecfg.n_experts = 4;
    f->moecfg.top_k = 2;
    f->moecfg.expert_intermediate = 8;
    f->moecfg.shared_expert_intermediate = 8;
    f->moecfg.shared_expert_gate = 1;
    f->moecfg.full_attention_interval = 1;
    if (tsafe_moe_layer_create_random(&f->moecfg, 1, 0, &f->layer) ||
        tsafe_stepgate_create_default(&f->gate) ||
        tsafe_stepgate_session_create(f->gate, &f->gs))
        return -1;
    (void)state; /* tests read F; a group state would override their tables */
    return 0;
}

static int api_null_teardown(void **state)
{
    (void)state;
    sealed_world_free();
    fixture *f = &F;
    tsafe_stepgate_session_free(f->gs);
    tsafe_stepgate_free(f->gate);
    tsafe_moe_layer_free(f->layer);
    tsafe_registry_release(f->ref);
    tsafe_registry_free(f->reg);
    tsafe_package_free(f->package);
    tsafe_package_bytes_free(f->pkg);
    sodium_memzero(f->pkg_sk, sizeof f->pkg_sk);
    tsafe_lora_adapter_free(f->adapter);
    tsafe_safetensors_free(f->st);
    tsafe_safetensors_bytes_free(f->st_bytes);
    tsafe_safetensors_writer_free(f->stw);
    tsafe_dp_session_free(f->dp);
    tsafe_lora_bytes_free(f->req);
    tsafe_lora_bytes_free(f->resp);
    tsafe_lora_bytes_free(f->umsg);
    tsafe_lora_local_free(f->local);
    tsafe_lora_site_free(f->site);
    tsafe_lora_server_free(f->server);
    tsafe_lora_client_free(f->client);
    tsafe_buffer_free(f->buf1);
    tsafe_buffer_free(f->buf);
    tsafe_backend_free(f->be);
    free(f->ct_bytes);
    tsafe_ciphertext_free(f->out);
    tsafe_ciphertext_free(f->ct0);
    tsafe_ciphertext_free(f->ct);
    tsafe_plaintext_free(f->pt0);
    tsafe_plaintext_free(f->pt);
    tsafe_public_key_free(f->pk);
    tsafe_secret_key_free(f->sk);
    tsafe_context_free(f->ctx2);
    tsafe_context_free(f->ctx);
    return 0;
}

/* ------------------------------------ shared by several headers' checks */

/* An engine's function given NULLs / a NULL owner returns an error. */
void engine_checks(fixture *f, tsafe_lora_engine e, int null_user_ok)
{
    const tsafe_lora_site *sites[1] = {f->site}, *nulls[1] = {NULL};
    float *ds[1] = {f->delta}, *nullds[1] = {NULL};
    assert_non_null(e.fn);
    ERR(e.fn(e.user, NULL, 1, f->x, ds, NULL));
    ERR(e.fn(e.user, nulls, 1, f->x, ds, NULL));
    ERR(e.fn(e.user, sites, 1, NULL, ds, NULL));
    ERR(e.fn(e.user, sites, 1, f->x, NULL, NULL));
    ERR(e.fn(e.user, sites, 1, f->x, nullds, NULL));
    if (!null_user_ok)
        ERR(e.fn(NULL, sites, 1, f->x, ds, NULL));
}

/* counts its calls, makes CPU backends */
int g_factory_calls;
static tsafe_status counting_create(void *user, const tsafe_context *ckks,
                                    const tsafe_bfv_context *bfv, tsafe_backend **out)
{
    (void)user;
    g_factory_calls++;
    return tsafe_backend_create(NULL, ckks, bfv, out);
}
static tsafe_status failing_create(void *user, const tsafe_context *ckks,
                                   const tsafe_bfv_context *bfv, tsafe_backend **out)
{
    (void)user;
    (void)ckks;
    (void)bfv;
    *out = NULL;
    return TSAFE_E_NO_DEVICE;
}
const tsafe_backend_factory k_counting = {"counting", counting_create, NULL};
const tsafe_backend_factory k_failing = {"failing", failing_create, NULL};

/* ------------------------------------------------------ the sealed world */

void sealed_world(void)
{
    if (S.c)
        return;
    tsafe_bfv_params p = {12, 49, 60, 37, 0};
    int64_t m[8] = {1, -2, 3, -4, 5, -6, 7, -8};
    OK(tsafe_bfv_context_create(&p, &S.c));
    OK(tsafe_bfv_secret_key_generate(S.c, NULL, &S.sk));
    OK(tsafe_bfv_public_key_generate(S.c, S.sk, NULL, &S.pk));
    OK(tsafe_bfv_ct_create(S.c, &S.ct));
    OK(tsafe_bfv_encrypt(S.c, S.sk, m, 8, NULL, S.ct));
    OK(tsafe_bfv_plain_create(S.c, m, 8, &S.pt));
    OK(tsafe_bfv_acc_create(S.c, &S.acc));
    OK(tsafe_bfv_sealed_create(S.c, 8, &S.res));
    for (int i = 0; i < 4 * 64; i++)
        S.A[i] = (float)(i % 7) * 0.01f, S.B[i] = (float)(i % 5) * 0.01f;
    for (int i = 0; i < 64; i++)
        S.x[i] = (float)(i % 3) - 1.0f;
    OK(tsafe_sealed_plan_derive(TSAFE_SEALED_PRIVATE, 64, 4, 64, NULL, &S.plan));
    OK(tsafe_sealed_client_create(&S.plan, NULL, &S.cl));
    OK(tsafe_sealed_server_create(&S.plan, &S.sv));
    OK(tsafe_sealed_site_create(&S.plan, S.A, S.B, 4, 64, 1.0f, &S.site));
}

void sealed_world_free(void)
{
    tsafe_sealed_site_free(S.site);
    tsafe_sealed_server_free(S.sv);
    tsafe_sealed_client_free(S.cl);
    tsafe_bfv_sealed_free(S.res);
    tsafe_bfv_acc_free(S.acc);
    tsafe_bfv_plain_free(S.pt);
    tsafe_bfv_ct_free(S.ct);
    tsafe_bfv_public_key_free(S.pk);
    tsafe_bfv_secret_key_free(S.sk);
    tsafe_bfv_context_free(S.c);
    memset(&S, 0, sizeof S);
}

/* ----------------------------------------------------- header reading */

static const char *include_dir(void)
{
    const char *e = getenv("TSAFE_INCLUDE_DIR");
    return e && *e ? e : "include/tensafe";
}

/* A header's text (NUL-terminated), or NULL. */
static char *slurp(const char *path)
{
    uint8_t *data = NULL;
    size_t len = 0;
    return tsafe_read_file(path, (size_t)1 << 24, &data, &len) == TSAFE_OK ? (char *)data : NULL;
}

static int is_ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_';
}

/* Counts the functions declared with TSAFE_API in text; with missing, also
 * reports (and counts there) each one without an entry in t. */
static size_t for_each_api(const char *text, const api_table *t, size_t *missing)
{
    size_t found = 0;
    const char *p = text;
    while ((p = strstr(p, "TSAFE_API")) != NULL) {
        const char *line = p;
        while (line > text && line[-1] != '\n')
            line--;
        p += 9;
        if (is_ident(*p) || strncmp(line, "#", 1) == 0)
            continue; /* the macro's own definition or a longer identifier */
        const char *paren = strchr(p, '(');
        if (!paren)
            break;
        const char *e = paren;
        while (e > p && (e[-1] == ' ' || e[-1] == '\n' || e[-1] == '\t'))
            e--;
        const char *b = e;
        while (b > p && is_ident(b[-1]))
            b--;
        char name[128];
        size_t len = (size_t)(e - b);
        if (len == 0 || len >= sizeof name)
            continue;
        memcpy(name, b, len);
        name[len] = '\0';
        found++;
        int ok = 0;
        for (size_t i = 0; i < t->n && !ok; i++)
            ok = strcmp(t->cases[i].name, name) == 0;
        if (!ok && missing) {
            print_error("%s: %s has no NULL/out-of-range case\n", t->header, name);
            (*missing)++;
        }
        p = paren;
    }
    return found;
}

/* ------------------------------------------------------------ driver */

static const char *tests_dir(void)
{
    const char *e = getenv("TSAFE_TESTS_DIR");
    return e && *e ? e : "tests";
}

static void run_table(void **state)
{
    const api_table *t = (const api_table *)*state;
    for (size_t i = 0; i < t->n; i++)
        t->cases[i].check(&F);
    print_message("%-18s %zu functions\n", t->header, t->n);
}

/* Every entry of t names a function of its header (text) as a whole word. */
static size_t entries_not_in_header(const api_table *t, const char *text)
{
    size_t stray = 0;
    for (size_t i = 0; i < t->n; i++) {
        const char *name = t->cases[i].name, *hit = strstr(text, name);
        int whole = 0;
        while (hit && !whole) {
            whole = !is_ident(hit[strlen(name)]) && (hit == text || !is_ident(hit[-1]));
            if (!whole)
                hit = strstr(hit + 1, name);
        }
        if (!whole) {
            print_error("%s: table entry %s is not a function of this header\n", t->header,
                        name);
            stray++;
        }
    }
    return stray;
}

/* The suite's own headers: every TSAFE_API function has a case, every case
 * a function. */
static void test_header_coverage(void **state)
{
    const api_table *t = (const api_table *)*state;
    if (t->skipped) {
        print_message("%-18s skipped (not built in this configuration)\n", t->header);
        return;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", include_dir(), t->header);
    char *text = slurp(path);
    if (!text)
        fail_msg("cannot read %s (run from the repository root)", path);
    size_t missing = 0;
    size_t found = for_each_api(text, t, &missing);
    missing += entries_not_in_header(t, text);
    free(text);
    print_message("%-18s %zu functions, %zu without a case or stray\n", t->header, found,
                  missing);
    assert_int_equal(missing, 0);
    assert_true(found > 0);
}

/* Every public header that declares a TSAFE_API function has its suite. */
static void test_every_header_has_a_suite(void **state)
{
    (void)state;
    DIR *d = opendir(include_dir());
    if (!d)
        fail_msg("cannot open %s (run from the repository root)", include_dir());
    struct dirent *e;
    size_t missing = 0, headers = 0;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 3 || strcmp(e->d_name + n - 2, ".h") != 0 || strcmp(e->d_name, "export.h") == 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", include_dir(), e->d_name);
        char *text = slurp(path);
        assert_non_null(text);
        api_table none = {e->d_name, NULL, 0, 0};
        size_t found = for_each_api(text, &none, NULL);
        free(text);
        if (found == 0)
            continue; /* tensafe.h: includes only */
        headers++;
        snprintf(path, sizeof path, "%s/test_api_null_%.*s.c", tests_dir(), (int)(n - 2),
                 e->d_name);
        FILE *fp = fopen(path, "r");
        if (fp) {
            fclose(fp);
            continue;
        }
        print_error("%s declares %zu functions but %s does not exist\n", e->d_name, found, path);
        missing++;
    }
    closedir(d);
    print_message("%zu public headers with functions, %zu without a suite\n", headers, missing);
    assert_int_equal(missing, 0);
    assert_true(headers > 10);
}

int api_null_run(const char *group, const api_table *tables, size_t n, int all_headers)
{
    struct CMUnitTest tests[2 * 8 + 1];
    size_t k = 0;
    if (n > 8)
        return 1;
    for (size_t i = 0; i < n; i++) {
        if (!tables[i].skipped) {
            struct CMUnitTest t = {tables[i].header, run_table, NULL, NULL, (void *)&tables[i]};
            tests[k++] = t;
        }
        struct CMUnitTest c = {"header_coverage", test_header_coverage, NULL, NULL,
                               (void *)&tables[i]};
        tests[k++] = c;
    }
    if (all_headers) {
        struct CMUnitTest a = {"every_header_has_a_suite", test_every_header_has_a_suite, NULL,
                               NULL, NULL};
        tests[k++] = a;
    }
    return _cmocka_run_group_tests(group, tests, k, api_null_setup, api_null_teardown);
}
