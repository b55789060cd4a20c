/* NULL and out-of-range arguments to every function of tensafe/lora_registry.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

CHECK_FN(tsafe_registry_create)
{
    ERR(tsafe_registry_create(NULL));
}

CHECK_FN(tsafe_registry_free)
{
    tsafe_registry_free(NULL);
}

CHECK_FN(tsafe_registry_put)
{
    static int obj;
    tsafe_registry_meta ok = {"a", 1.0, NULL}, m;
    char *longs = malloc(TSAFE_REGISTRY_MAX_NAME + 2);
    memset(longs, 's', TSAFE_REGISTRY_MAX_NAME + 1);
    longs[TSAFE_REGISTRY_MAX_NAME + 1] = '\0';
    int before = f->destroyed;
    ERR(tsafe_registry_put(NULL, "s", &obj, count_destroy, &ok));
    ERR(tsafe_registry_put(f->reg, NULL, &obj, count_destroy, &ok));
    ERR(tsafe_registry_put(f->reg, "", &obj, count_destroy, &ok));
    ERR(tsafe_registry_put(f->reg, longs, &obj, count_destroy, &ok));
    ERR(tsafe_registry_put(f->reg, "\xc3\x28", &obj, count_destroy, &ok));
    ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, NULL));
    m = ok; m.adapter_id = NULL; ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, &m));
    m = ok; m.adapter_id = ""; ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, &m));
    m = ok; m.adapter_id = longs; ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, &m));
    m = ok; m.price_per_1k_tokens = -1; ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, &m));
    m = ok; m.price_per_1k_tokens = NAN; ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, &m));
    tsafe_lora_origin o = {(tsafe_lora_origin_kind)7, {0}, {0}, NULL};
    m = ok; m.origin = &o; ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, &m));
    o.kind = TSAFE_LORA_ORIGIN_UNSIGNED;
    o.path = "\xc3\x28"; ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, &m));
    o.path = ""; ERR(tsafe_registry_put(f->reg, "s", &obj, count_destroy, &m));
    free(longs);
    assert_int_equal(f->destroyed, before); /* the caller still owns obj */
}

CHECK_FN(tsafe_registry_set_allow_unsigned)
{
    ERR(tsafe_registry_set_allow_unsigned(NULL, 1));
    IS(TSAFE_OK, tsafe_registry_set_allow_unsigned(f->reg, 1)); /* the fixture's setting */
}

CHECK_FN(tsafe_registry_ref_origin)
{
    tsafe_lora_origin o;
    ERR(tsafe_registry_ref_origin(NULL, &o));
    ERR(tsafe_registry_ref_origin(f->ref, NULL));
    IS(TSAFE_OK, tsafe_registry_ref_origin(f->ref, &o));
    assert_int_equal(o.kind, TSAFE_LORA_ORIGIN_UNSIGNED);
}

CHECK_FN(tsafe_registry_remove)
{
    ERR(tsafe_registry_remove(NULL, "slot"));
    ERR(tsafe_registry_remove(f->reg, NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_registry_remove(f->reg, "no-such-slot"));
}

CHECK_FN(tsafe_registry_acquire)
{
    tsafe_registry_ref *r = (tsafe_registry_ref *)&r;
    ERR(tsafe_registry_acquire(NULL, "slot", &r));
    ERR(tsafe_registry_acquire(f->reg, NULL, &r));
    ERR(tsafe_registry_acquire(f->reg, "slot", NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_registry_acquire(f->reg, "no-such-slot", &r));
    assert_null(r);
}

CHECK_FN(tsafe_registry_release)
{
    tsafe_registry_release(NULL);
}

CHECK_FN(tsafe_registry_ref_object)
{
    assert_null(tsafe_registry_ref_object(NULL));
    assert_non_null(tsafe_registry_ref_object(f->ref));
}

CHECK_FN(tsafe_registry_ref_adapter_id)
{
    assert_null(tsafe_registry_ref_adapter_id(NULL));
}

CHECK_FN(tsafe_registry_ref_price)
{
    (void)tsafe_registry_ref_price(NULL);
}

CHECK_FN(tsafe_registry_ref_generation)
{
    assert_int_equal(tsafe_registry_ref_generation(NULL), 0);
}

CHECK_FN(tsafe_registry_meter)
{
    ERR(tsafe_registry_meter(NULL, 1, 1, 1, 1));
}

CHECK_FN(tsafe_registry_slot_counters)
{
    tsafe_registry_counters c;
    ERR(tsafe_registry_slot_counters(NULL, "slot", &c));
    ERR(tsafe_registry_slot_counters(f->reg, NULL, &c));
    ERR(tsafe_registry_slot_counters(f->reg, "slot", NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_registry_slot_counters(f->reg, "never-seen", &c));
}

CHECK_FN(tsafe_registry_adapter_counters)
{
    tsafe_registry_counters c;
    ERR(tsafe_registry_adapter_counters(NULL, "adapter-1", &c));
    ERR(tsafe_registry_adapter_counters(f->reg, NULL, &c));
    ERR(tsafe_registry_adapter_counters(f->reg, "adapter-1", NULL));
    IS(TSAFE_E_NOT_FOUND, tsafe_registry_adapter_counters(f->reg, "never-seen", &c));
}

CHECK_FN(tsafe_registry_metering_json)
{
    char *j = NULL;
    ERR(tsafe_registry_metering_json(NULL, &j));
    ERR(tsafe_registry_metering_json(f->reg, NULL));
    assert_null(j);
}

static const api_case k_lora_registry[] = {
    ENTRY(tsafe_registry_create), ENTRY(tsafe_registry_free), ENTRY(tsafe_registry_put),
    ENTRY(tsafe_registry_set_allow_unsigned), ENTRY(tsafe_registry_ref_origin),
    ENTRY(tsafe_registry_remove), ENTRY(tsafe_registry_acquire), ENTRY(tsafe_registry_release),
    ENTRY(tsafe_registry_ref_object), ENTRY(tsafe_registry_ref_adapter_id),
    ENTRY(tsafe_registry_ref_price), ENTRY(tsafe_registry_ref_generation),
    ENTRY(tsafe_registry_meter), ENTRY(tsafe_registry_slot_counters),
    ENTRY(tsafe_registry_adapter_counters), ENTRY(tsafe_registry_metering_json),
};

int main(void)
{
    static const api_table tables[] = {TABLE("lora_registry.h", k_lora_registry)};
    return api_null_run("api_null_lora_registry", tables, sizeof tables / sizeof tables[0], 0);
}
