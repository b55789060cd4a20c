/* `tensafe params plan|presets`: the HE-LoRA planner's choice for a shape. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "commands.h"
#include "io.h"

static const char k_help[] =
    "usage: tensafe params plan --dim D --rank R [--max-abs X] [--max-abs-a A]\n"
    "                           [--precision P] [--preset NAME] [--json]\n"
    "       tensafe params presets\n"
    "\n"
    "plan: the parameters the HE-LoRA planner picks for u = A x with A of rank R\n"
    "and d_in = D: ring size N, primes, level, scales, packing (cols, batches),\n"
    "log2 Q against the 128-bit bound, the modelled error and the cost.\n"
    "  --dim D          input dimension d_in (required)\n"
    "  --rank R         adapter rank (required)\n"
    "  --max-abs X      bound on |x| (default 8)\n"
    "  --max-abs-a A    bound on |A| (default 0.05)\n"
    "  --precision P    target modelled error for the automatic planner (default 1e-6)\n"
    "  --preset NAME    use a core preset (see 'params presets') instead of the planner\n"
    "  --json           one JSON object on stdout\n";

static int presets(void)
{
    for (size_t i = 0; i < tsafe_params_preset_count(); i++) {
        tsafe_params p;
        const char *name = tsafe_params_preset_name(i);
        if (tsafe_params_preset(name, &p) != TSAFE_OK)
            continue;
        printf("%-14s N=%-6u primes [", name, 1u << p.log_n);
        for (uint32_t k = 0; k < p.n_primes; k++)
            printf("%s%u", k ? "," : "", p.prime_bits[k]);
        printf("]%s scale 2^%.0f, 128-bit bound log2 Q <= %u\n", p.n_special ? " (last special)" : "",
               log2(p.scale), tsafe_params_max_log_q(p.log_n));
    }
    return 0;
}

int cmd_params(int argc, char **argv)
{
    if (argc < 2)
        return tool_usage("params: missing subcommand (plan or presets)");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(k_help, stdout);
        return 0;
    }
    int is_presets = !strcmp(argv[1], "presets");
    if (!is_presets && strcmp(argv[1], "plan"))
        return tool_usage("params: unknown subcommand '%s' (plan or presets)", argv[1]);
    uint32_t dim = 0, rank = 0;
    double max_abs = 8.0, max_abs_a = 0.05, precision = 1e-6;
    const char *preset = NULL;
    int json = 0;
    tool_opt o[] = {{"--dim", OPT_U32, &dim, 0},           {"--rank", OPT_U32, &rank, 0},
                    {"--max-abs", OPT_DOUBLE, &max_abs, 0}, {"--max-abs-a", OPT_DOUBLE, &max_abs_a, 0},
                    {"--precision", OPT_DOUBLE, &precision, 0},
                    {"--preset", OPT_STR, &preset, 0},      {"--json", OPT_FLAG, &json, 0}};
    int rc = opts_parse(is_presets ? "params presets" : "params plan", argc, argv, 2, o,
                        is_presets ? 0 : sizeof o / sizeof o[0], NULL, 0, NULL);
    if (rc == OPTS_HELP) {
        fputs(k_help, stdout);
        return 0;
    }
    if (rc)
        return rc;
    if (is_presets)
        return presets();
    if (!o[0].seen || !o[1].seen)
        return tool_usage("params plan: --dim and --rank are required");
    if (dim == 0 || rank == 0)
        return tool_usage("params plan: --dim and --rank must be at least 1");
    if (!(max_abs > 0) || !(max_abs_a > 0) || !(precision > 0))
        return tool_usage("params plan: --max-abs, --max-abs-a and --precision must be positive");

    tsafe_lora_plan plan;
    tsafe_status st = preset ? tsafe_lora_plan_preset(preset, dim, rank, max_abs, max_abs_a, &plan)
                             : tsafe_lora_plan_auto(dim, rank, max_abs, max_abs_a, precision, &plan);
    if (st != TSAFE_OK) {
        char what[256];
        if (preset && st == TSAFE_E_NOT_FOUND)
            snprintf(what, sizeof what,
                     "unknown parameter preset '%s' (see 'tensafe params presets')", preset);
        else if (preset)
            snprintf(what, sizeof what, "plan with preset '%s' for d_in=%u rank=%u |x|<=%g |A|<=%g",
                     preset, dim, rank, max_abs, max_abs_a);
        else
            snprintf(what, sizeof what,
                     "no secure plan for d_in=%u rank=%u |x|<=%g |A|<=%g with error <= %g", dim,
                     rank, max_abs, max_abs_a, precision);
        return tool_fail(what, st);
    }
    if (json) {
        json_t *j = io_plan_json(&plan);
        if (j && !preset)
            json_object_set_new(j, "target_error", json_real(precision));
        char *s = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
        json_decref(j);
        if (!s)
            return tool_fail("params plan: JSON output", TSAFE_E_NOMEM);
        printf("%s\n", s);
        free(s);
        return 0;
    }
    io_print_plan(stdout, &plan, "");
    if (!preset)
        printf("target error  %g\n", precision);
    return 0;
}
