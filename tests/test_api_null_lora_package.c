/* NULL and out-of-range arguments to every function of tensafe/lora_package.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

CHECK_FN(tsafe_package_keypair)
{
    uint8_t pk[32], sk[64];
    ERR(tsafe_package_keypair(NULL, sk));
    ERR(tsafe_package_keypair(pk, NULL));
}

CHECK_FN(tsafe_package_create)
{
    static const char *const targets[2] = {"q_proj", ""};
    tsafe_package_manifest good = {.adapter_id = "id", .domain = "d", .rank = 2,
        .alpha = 4.0, .targets = targets, .n_targets = 1,
        .price_per_1k_tokens = 0.5, .creator = "c"}, m;
    uint8_t *out = NULL, junk_sk[64];
    size_t len = 0;
    memset(junk_sk, 0x42, sizeof junk_sk);
    ERR(tsafe_package_create(NULL, NULL, 0, f->pkg_sk, &out, &len));
    ERR(tsafe_package_create(&good, NULL, 0, NULL, &out, &len));
    ERR(tsafe_package_create(&good, NULL, 0, f->pkg_sk, NULL, &len));
    ERR(tsafe_package_create(&good, NULL, 0, f->pkg_sk, &out, NULL));
    ERR(tsafe_package_create(&good, NULL, 5, f->pkg_sk, &out, &len));
    IS(TSAFE_E_KEY, tsafe_package_create(&good, NULL, 0, junk_sk, &out, &len));
    m = good; m.adapter_id = NULL; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.adapter_id = ""; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.domain = NULL; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.creator = NULL; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.rank = 0; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.alpha = 0; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.alpha = NAN; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.price_per_1k_tokens = -1;
    ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.price_per_1k_tokens = INFINITY;
    ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.targets = NULL; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.n_targets = 2; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    m = good; m.n_targets = TSAFE_PACKAGE_MAX_TARGETS + 1;
    ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    char *longs = malloc(TSAFE_PACKAGE_MAX_STRING + 2);
    memset(longs, 'a', TSAFE_PACKAGE_MAX_STRING + 1);
    longs[TSAFE_PACKAGE_MAX_STRING + 1] = '\0';
    m = good; m.adapter_id = longs; ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    free(longs);
    m = good; m.adapter_id = "\xff\xfe"; /* not UTF-8 */
    ERR(tsafe_package_create(&m, NULL, 0, f->pkg_sk, &out, &len));
    assert_null(out);
}

CHECK_FN(tsafe_package_bytes_free)
{
    tsafe_package_bytes_free(NULL);
}

CHECK_FN(tsafe_package_open)
{
    tsafe_package *p = NULL;
    uint8_t zero_pk[32] = {0};
    ERR(tsafe_package_open(NULL, f->pkg_len, f->pkg_pk, &p));
    ERR(tsafe_package_open(f->pkg, f->pkg_len, NULL, &p));
    ERR(tsafe_package_open(f->pkg, f->pkg_len, f->pkg_pk, NULL));
    IS(TSAFE_E_TRUNCATED, tsafe_package_open(f->pkg, 0, f->pkg_pk, &p));
    ERR(tsafe_package_open(f->pkg, f->pkg_len - 1, f->pkg_pk, &p));
    IS(TSAFE_E_KEY, tsafe_package_open(f->pkg, f->pkg_len, zero_pk, &p));
    assert_null(p);
}

CHECK_FN(tsafe_package_free)
{
    tsafe_package_free(NULL);
}

CHECK_FN(tsafe_package_manifest_get)
{
    tsafe_package_manifest m;
    ERR(tsafe_package_manifest_get(NULL, &m));
    ERR(tsafe_package_manifest_get(f->package, NULL));
}

CHECK_FN(tsafe_package_payload)
{
    const uint8_t *d;
    size_t n;
    ERR(tsafe_package_payload(NULL, &d, &n));
    ERR(tsafe_package_payload(f->package, NULL, &n));
    ERR(tsafe_package_payload(f->package, &d, NULL));
}

CHECK_FN(tsafe_package_payload_digest)
{
    uint8_t d[32];
    ERR(tsafe_package_payload_digest(NULL, d));
    ERR(tsafe_package_payload_digest(f->package, NULL));
}

CHECK_FN(tsafe_package_manifest_json)
{
    assert_null(tsafe_package_manifest_json(NULL));
    assert_non_null(tsafe_package_manifest_json(f->package));
}

static const api_case k_lora_package[] = {
    ENTRY(tsafe_package_keypair), ENTRY(tsafe_package_create), ENTRY(tsafe_package_bytes_free),
    ENTRY(tsafe_package_open), ENTRY(tsafe_package_free), ENTRY(tsafe_package_manifest_get),
    ENTRY(tsafe_package_payload), ENTRY(tsafe_package_payload_digest),
    ENTRY(tsafe_package_manifest_json),
};

int main(void)
{
    static const api_table tables[] = {TABLE("lora_package.h", k_lora_package)};
    return api_null_run("api_null_lora_package", tables, sizeof tables / sizeof tables[0], 0);
}
