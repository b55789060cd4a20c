/* tensafe: the TenSafe-HE command-line tool. */
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cblas.h>

#include "tensafe/tensafe.h"
#include "commands.h"
#include "io.h"

int tool_fail(const char *what, int status)
{
    fprintf(stderr, "tensafe: %s: %s (%s)\n", what, tsafe_status_name(status),
            tsafe_strerror(status));
    return 1;
}

/* Usage messages start with the command they are about ("lora apply:
 * ..."): that command's --help is the one to read. */
int tool_usage(const char *fmt, ...)
{
    char msg[1024], cmd[64] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t n = strcspn(msg, ":");
    if (msg[n] == ':' && n < sizeof cmd && strspn(msg, "abcdefghijklmnopqrstuvwxyz -") == n)
        snprintf(cmd, sizeof cmd, "%.*s ", (int)n, msg);
    fprintf(stderr, "tensafe: %s (see 'tensafe %s--help')\n", msg, cmd);
    return 2;
}

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} command;

static const command k_commands[] = {
    {"demo", cmd_demo, "run the two-party HE-LoRA demo on a Qwen3.5-35B-A3B-shaped layer"},
    {"bench", cmd_bench, "benchmark tables: bench [core|lora|lora-sweep|moe|model|serve|cuda|all] [--json|--tsv]"},
    {"keygen", cmd_keygen, "generate client keys (secret + public) for a parameter set"},
    {"encrypt", cmd_encrypt, "encrypt a float32 vector file (client side)"},
    {"decrypt", cmd_decrypt, "decrypt a ciphertext file (client side)"},
    {"serve", cmd_serve, "two-party server over localhost TCP, sealed-private by default (holds only the adapter)"},
    {"client", cmd_client, "two-party client over localhost TCP, sealed-private by default (holds x and the keys)"},
    {"adapter", cmd_adapter, "adapter inspect|reduce|keygen|pack|verify|make-random"},
    {"params", cmd_params, "params plan --dim D --rank R [--max-abs X] [--precision P]"},
    {"generate", cmd_generate, "generate text with a llama2.c model and a LoRA adapter under HE"},
    {"lora", cmd_lora, "lora apply|compare|make-input: run adapter modules on float32 rows"},
};

static void usage(FILE *f)
{
    fprintf(f, "tensafe %s -- homomorphically encrypted LoRA for MoE LLMs\n\n"
               "usage: tensafe <command> [options]   (tensafe <command> --help)\n\n",
            tsafe_version_string());
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        fprintf(f, "  %-8s %s\n", k_commands[i].name, k_commands[i].help);
    fputs("\nA file argument of '-' is standard input (files read) or standard output\n"
          "(--out/--output; the command's own lines then go to standard error).\n",
          f);
}

/* An --out/--output of "-": stdout carries that data alone, from the start. */
static int wants_stdout(int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--out=-") || !strcmp(a, "--output=-") ||
            ((!strcmp(a, "--out") || !strcmp(a, "--output")) && i + 1 < argc &&
             !strcmp(argv[i + 1], "-")))
            return 1;
    }
    return 0;
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
    if (wants_stdout(argc, argv) && io_reserve_stdout() != 0)
        return tool_fail("standard output for '-'", TSAFE_E_IO);
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        if (!strcmp(argv[1], k_commands[i].name))
            return k_commands[i].fn(argc - 1, argv + 1);
    return tool_usage("unknown command '%s'", argv[1]);
}
