/* NULL and out-of-range arguments to every function of tensafe/moe_lora.h
 * (tests/api_null/api_null.h). */
#include "api_null/api_null.h"

CHECK_FN(tsafe_moe_lora_create)
{
    tsafe_moe_lora *l = NULL;
    ERR(tsafe_moe_lora_create(NULL, &l));
    ERR(tsafe_moe_lora_create(f->layer, NULL));
    assert_null(l);
}

CHECK_FN(tsafe_moe_lora_free)
{
    tsafe_moe_lora_free(NULL);
}

CHECK_FN(tsafe_moe_lora_set_site)
{
    tsafe_moe_lora *l = NULL;
    OK(tsafe_moe_lora_create(f->layer, &l));
    ERR(tsafe_moe_lora_set_site(NULL, 0, TSAFE_MOE_PROJ_GATE, NULL));
    ERR(tsafe_moe_lora_set_site(l, 4, TSAFE_MOE_PROJ_GATE, NULL));  /* 4 experts */
    ERR(tsafe_moe_lora_set_site(l, -2, TSAFE_MOE_PROJ_GATE, NULL));
    ERR(tsafe_moe_lora_set_site(l, INT32_MIN, TSAFE_MOE_PROJ_UP, NULL));
    ERR(tsafe_moe_lora_set_site(l, 0, (tsafe_moe_proj)9, NULL));
    ERR(tsafe_moe_lora_set_site(l, 0, (tsafe_moe_proj)-1, NULL));
    /* the fixture site has d_in 64, the layer hidden size 16 */
    ERR(tsafe_moe_lora_set_site(l, 0, TSAFE_MOE_PROJ_GATE, f->site));
    ERR(tsafe_moe_lora_set_site(l, 0, TSAFE_MOE_PROJ_DOWN, f->site));
    tsafe_moe_lora_free(l);
}

CHECK_FN(tsafe_moe_lora_forward)
{
    tsafe_moe_lora *l = NULL;
    tsafe_lora_engine e = tsafe_lora_engine_plain(), none = {NULL, NULL};
    float h[16] = {0}, out[16];
    OK(tsafe_moe_lora_create(f->layer, &l));
    ERR(tsafe_moe_lora_forward(NULL, l, &e, &e, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward(f->layer, NULL, &e, &e, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward(f->layer, l, NULL, &e, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward(f->layer, l, &e, NULL, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward(f->layer, l, &none, &none, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward(f->layer, l, &e, &e, NULL, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward(f->layer, l, &e, &e, h, 1, NULL, NULL, NULL));
    ERR(tsafe_moe_lora_forward(f->layer, l, &e, &e, h, SIZE_MAX, out, NULL, NULL));
    h[0] = NAN;
    ERR(tsafe_moe_lora_forward(f->layer, l, &e, &e, h, 1, out, NULL, NULL));
    tsafe_moe_lora_free(l);
}

CHECK_FN(tsafe_moe_lora_set_module)
{
    tsafe_moe_lora *l = NULL;
    const tsafe_lora_module *m = tsafe_lora_site_module(f->site);
    OK(tsafe_moe_lora_create(f->layer, &l));
    ERR(tsafe_moe_lora_set_module(NULL, 0, TSAFE_MOE_PROJ_GATE, NULL));
    ERR(tsafe_moe_lora_set_module(l, 4, TSAFE_MOE_PROJ_GATE, NULL)); /* 4 experts */
    ERR(tsafe_moe_lora_set_module(l, -2, TSAFE_MOE_PROJ_GATE, NULL));
    ERR(tsafe_moe_lora_set_module(l, 0, (tsafe_moe_proj)9, NULL));
    /* the fixture module has d_in 64, the layer hidden size 16 */
    IS(TSAFE_E_SHAPE, tsafe_moe_lora_set_module(l, 0, TSAFE_MOE_PROJ_GATE, m));
    IS(TSAFE_E_SHAPE, tsafe_moe_lora_set_module(l, 0, TSAFE_MOE_PROJ_DOWN, m));
    OK(tsafe_moe_lora_set_module(l, 0, TSAFE_MOE_PROJ_GATE, NULL));
    tsafe_moe_lora_free(l);
}

CHECK_FN(tsafe_moe_lora_forward_modules)
{
    tsafe_moe_lora *l = NULL;
    tsafe_lora_module_engine e = tsafe_lora_module_engine_plain(), none = {NULL, NULL, NULL};
    float h[16] = {0}, out[16];
    OK(tsafe_moe_lora_create(f->layer, &l));
    ERR(tsafe_moe_lora_forward_modules(NULL, l, &e, &e, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward_modules(f->layer, NULL, &e, &e, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward_modules(f->layer, l, NULL, &e, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward_modules(f->layer, l, &e, NULL, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward_modules(f->layer, l, &none, &none, h, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward_modules(f->layer, l, &e, &e, NULL, 1, out, NULL, NULL));
    ERR(tsafe_moe_lora_forward_modules(f->layer, l, &e, &e, h, 1, NULL, NULL, NULL));
    ERR(tsafe_moe_lora_forward_modules(f->layer, l, &e, &e, h, SIZE_MAX, out, NULL, NULL));
    tsafe_moe_lora_free(l);
}

CHECK_FN(tsafe_moe_lora_site_uses)
{
    tsafe_moe_lora *l = NULL;
    OK(tsafe_moe_lora_create(f->layer, &l));
    assert_int_equal(tsafe_moe_lora_site_uses(NULL, 0, TSAFE_MOE_PROJ_GATE), 0);
    assert_int_equal(tsafe_moe_lora_site_uses(l, 4, TSAFE_MOE_PROJ_GATE), 0);
    assert_int_equal(tsafe_moe_lora_site_uses(l, -2, TSAFE_MOE_PROJ_GATE), 0);
    assert_int_equal(tsafe_moe_lora_site_uses(l, 0, (tsafe_moe_proj)9), 0);
    tsafe_moe_lora_free(l);
}

static const api_case k_moe_lora[] = {
    ENTRY(tsafe_moe_lora_create), ENTRY(tsafe_moe_lora_free), ENTRY(tsafe_moe_lora_set_site),
    ENTRY(tsafe_moe_lora_forward), ENTRY(tsafe_moe_lora_site_uses),
    ENTRY(tsafe_moe_lora_set_module), ENTRY(tsafe_moe_lora_forward_modules),
};

int main(void)
{
    static const api_table tables[] = {TABLE("moe_lora.h", k_moe_lora)};
    return api_null_run("api_null_moe_lora", tables, sizeof tables / sizeof tables[0], 0);
}
