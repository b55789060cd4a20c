/* tensafe: the TenSafe-HE command-line tool. */
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cblas.h>

#include "tensafe/tensafe.h"
#include "commands.h"

int tool_fail(const char *what, int status)
{
    fprintf(stderr, "tensafe: %s: %s (%s)\n", what, tsafe_status_name(status),
            tsafe_strerror(status));
    return 1;
}

int tool_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tensafe: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see 'tensafe --help')\n", stderr);
    va_end(ap);
    return 2;
}

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} command;

static const command k_commands[] = {
    {"demo", cmd_demo, "run the two-party HE-LoRA demo on a Qwen3.5-35B-A3B-shaped layer"},
    {"bench", cmd_bench, "benchmark tables: bench [core|lora|moe|cuda] [--json]"},
    {"keygen", cmd_keygen, "generate client keys (secret + public) for a parameter set"},
    {"encrypt", cmd_encrypt, "encrypt a float32 vector file (client side)"},
    {"decrypt", cmd_decrypt, "decrypt a ciphertext file (client side)"},
    {"serve", cmd_serve, "two-party server over localhost TCP, sealed-private by default (holds only the adapter)"},
    {"client", cmd_client, "two-party client over localhost TCP, sealed-private by default (holds x and the keys)"},
    {"adapter", cmd_adapter, "adapter inspect|reduce|pack|verify"},
    {"params", cmd_params, "params plan --dim D --rank R [--max-abs X] [--precision P]"},
    {"generate", cmd_generate, "generate text with a llama2.c model and a LoRA adapter under HE"},
    {"lora", cmd_lora, "lora apply --adapter DIR|PKG --module NAME --input X.f32 --output D.f32 [--mode M]"},
};

static void usage(FILE *f)
{
    fprintf(f, "tensafe %s -- homomorphically encrypted LoRA for MoE LLMs\n\n"
               "usage: tensafe <command> [options]   (tensafe <command> --help)\n\n",
            tsafe_version_string());
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        fprintf(f, "  %-8s %s\n", k_commands[i].name, k_commands[i].help);
}

int main(int argc, char **argv)
{
    /* Per-token LoRA products are small (r x d): OpenBLAS worker threads
     * only add wake-up latency and spin against the HE work. */
    openblas_set_num_threads(1);
    /* Messages of megabytes are allocated and freed every token. Left to
     * glibc's adaptive thresholds, some runs hand them back to the kernel
     * and fault them in again each token: on the 2-core VM 1 700 faults,
     * +35 ms per demo token (docs/PERFORMANCE.md). Keep them in the heap. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("tensafe %s\n", tsafe_version_string());
        return 0;
    }
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        if (!strcmp(argv[1], k_commands[i].name))
            return k_commands[i].fn(argc - 1, argv + 1);
    return tool_usage("unknown command '%s'", argv[1]);
}
