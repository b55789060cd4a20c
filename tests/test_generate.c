/* `tensafe generate` on a real model: Karpathy's stories260K and the
 * lora-max PEFT adapter (../shared/models/stories260K from the project
 * root; skipped when absent, refused when SHA256SUMS does not match).
 *
 * Independent reference: reference.json, computed by a separate float64
 * numpy forward pass (forward.py, not this code), holds the greedy ids of
 * 64 tokens from BOS and from "Once upon a time", with and without the
 * adapter, and the top-2 logit margin of every step. Every mode must give
 * those ids exactly: base, --plain, local, sealed (--no-dp),
 * sealed-private in process, and sealed-private and sealed against
 * `tensafe serve --module all` over 127.0.0.1. A difference is reported
 * with its step and that step's margin. The base text names Lily, the
 * adapted text Max. The tool runs as a separate process
 * (build/bin/tensafe beside this binary's folder). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "file.h" /* the libraries' whole-file reader */

#define MODEL_DIR "../shared/models/stories260K"

static char g_tool[PATH_MAX + 64];
static char g_tmp[64];
static int g_ready; /* tool built and model files verified */
static json_t *g_ref;

/* ------------------------------------------------------------ helpers */

/* A whole file, NUL-terminated (the libraries' reader); NULL on error. */
static char *slurp(const char *path, size_t *len)
{
    uint8_t *b = NULL;
    size_t n = 0;
    tsafe_status st = tsafe_read_file(path, (size_t)1 << 30, &b, &n);
    if (len)
        *len = n;
    return st == TSAFE_OK ? (char *)b : NULL;
}

/* Every line "<hex>  <file>" of SHA256SUMS against the file's SHA-256
 * (libsodium). 1 all match, 0 SHA256SUMS absent, -1 a mismatch. */
static int verify_sums(void)
{
    char *sums = slurp(MODEL_DIR "/SHA256SUMS", NULL);
    if (!sums)
        return 0;
    int ok = 1, lines = 0;
    for (char *line = strtok(sums, "\n"); line && ok > 0; line = strtok(NULL, "\n")) {
        char hex[65], name[256], path[512], got[65];
        if (sscanf(line, "%64s %255s", hex, name) != 2)
            continue;
        snprintf(path, sizeof path, "%s/%s", MODEL_DIR, name);
        size_t n = 0;
        char *b = slurp(path, &n);
        unsigned char h[crypto_hash_sha256_BYTES];
        if (!b) {
            print_message("missing %s\n", path);
            ok = -1;
            break;
        }
        crypto_hash_sha256(h, (const unsigned char *)b, n);
        free(b);
        sodium_bin2hex(got, sizeof got, h, sizeof h);
        if (strcmp(got, hex)) {
            print_message("%s: sha256 %s, SHA256SUMS says %s\n", path, got, hex);
            ok = -1;
        }
        lines++;
    }
    free(sums);
    return lines ? ok : -1;
}

/* Runs the tool with argv (NULL-terminated, argv[0] ignored), stdout to
 * out_path; returns the exit status (-1 if it did not exit). */
static int run_tool(char **argv, const char *out_path)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            _exit(127);
        dup2(fd, 1);
        close(fd);
        argv[0] = g_tool;
        execv(g_tool, argv);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* `tensafe serve --module all --once` in mode on a free port; *port set
 * once it listens. */
static pid_t spawn_serve(const char *mode, unsigned *port)
{
    char pf[128], log[128];
    snprintf(pf, sizeof pf, "%s/port", g_tmp);
    snprintf(log, sizeof log, "%s/serve.log", g_tmp);
    unlink(pf);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            _exit(127);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        execl(g_tool, g_tool, "serve", "--adapter", MODEL_DIR "/lora-max", "--allow-unsigned",
              "--module", "all", "--mode", mode, "--port", "0", "--port-file", pf, "--once",
              "--accept-timeout", "60",
              !strcmp(mode, "sealed") ? "--semi-honest" : (char *)NULL, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 300; i++) { /* up to 30 s */
        char *p = slurp(pf, NULL);
        if (p) {
            *port = (unsigned)strtoul(p, NULL, 10);
            free(p);
            return pid;
        }
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return -1;
}

static const json_t *ref_run(const char *name)
{
    const json_t *runs = json_object_get(g_ref, "runs"), *r;
    size_t i;
    json_array_foreach(runs, i, r) if (!strcmp(json_string_value(json_object_get(r, "name")),
                                               name)) return r;
    fail_msg("reference.json has no run '%s'", name);
    return NULL;
}

/* Generates 64 tokens with the extra arguments and compares with the
 * reference run; the first differing step is reported with its margin. */
static void check_run(const char *ref_name, const char *prompt, char **extra, const char *word)
{
    char out[128], model[] = MODEL_DIR "/stories260K.bin", tok[] = MODEL_DIR "/tok512.model";
    snprintf(out, sizeof out, "%s/out.json", g_tmp);
    char *argv[32] = {NULL, "generate", "--model", model, "--tokenizer", tok, "--json",
                      "--tokens", "64"};
    int n = 9;
    if (prompt) {
        argv[n++] = "--prompt";
        argv[n++] = (char *)prompt;
    }
    for (int i = 0; extra[i]; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    int rc = run_tool(argv, out);
    char *text = slurp(out, NULL);
    json_error_t err;
    json_t *j = text ? json_loads(text, 0, &err) : NULL;
    if (rc != 0 || !j)
        fail_msg("%s %s: exit %d, output: %s", ref_name, extra[0] ? extra[0] : "", rc,
                 text ? text : "(none)");
    free(text);
    const json_t *ref = ref_run(ref_name), *ids = json_object_get(j, "ids"),
                 *want = json_object_get(ref, "ids"),
                 *margins = json_object_get(ref, "top2_margins");
    assert_int_equal(json_array_size(ids), json_array_size(want));
    for (size_t i = 0; i < json_array_size(want); i++) {
        json_int_t a = json_integer_value(json_array_get(ids, i)),
                   b = json_integer_value(json_array_get(want, i));
        if (a != b)
            fail_msg("%s with%s%s: step %zu gives id %lld, reference %lld (reference top-2 "
                     "logit margin there %.4f)",
                     ref_name, extra[0] ? " " : "out extra options", extra[0] ? extra[0] : "",
                     i, (long long)a, (long long)b,
                     json_real_value(json_array_get(margins, i)));
    }
    const char *got = json_string_value(json_object_get(j, "text"));
    assert_non_null(got);
    assert_string_equal(got, json_string_value(json_object_get(ref, "text")));
    if (!strstr(got, word))
        fail_msg("%s: the text does not name %s: %s", ref_name, word, got);
    const json_t *fig = json_object_get(j, "figures");
    char label[256] = "";
    for (int i = 0; extra[i]; i++)
        if (strncmp(extra[i], MODEL_DIR, strlen(MODEL_DIR)) && strncmp(extra[i], "127.", 4))
            snprintf(label + strlen(label), sizeof label - strlen(label), "%s%s", i ? " " : "",
                     extra[i]);
    print_message("%-12s %-34s %7.3f ms/token HE, %7.3f total, %9.0f B up, %9.0f B down, %.0f "
                  "sites in %.0f queries per token\n",
                  ref_name, label[0] ? label : "base",
                  json_real_value(json_object_get(fig, "ms_per_token_he")),
                  json_real_value(json_object_get(fig, "ms_per_token_total")),
                  json_real_value(json_object_get(fig, "bytes_up_per_token")),
                  json_real_value(json_object_get(fig, "bytes_down_per_token")),
                  json_real_value(json_object_get(fig, "sites_per_token")),
                  json_real_value(json_object_get(fig, "queries_per_token")));
    json_decref(j);
}

#define SKIP_UNLESS_READY()                                                                    \
    do {                                                                                       \
        if (!g_ready) {                                                                        \
            print_message("stories260K or the tool absent: skipped\n");                        \
            skip();                                                                            \
        }                                                                                      \
    } while (0)

/* -------------------------------------------------------------- tests */

static char k_adapter[] = MODEL_DIR "/lora-max";

static void test_base(void **state)
{
    (void)state;
    SKIP_UNLESS_READY();
    char *none[] = {NULL};
    check_run("base_bos", NULL, none, "Lily");
    check_run("base_prompt", "Once upon a time", none, "Lily");
}

static void in_process(char **args)
{
    check_run("lora_bos", NULL, args, "Max");
    check_run("lora_prompt", "Once upon a time", args, "Max");
}

static void test_plain(void **state)
{
    (void)state;
    SKIP_UNLESS_READY();
    char *a[] = {"--plain", "--adapter", k_adapter, NULL};
    in_process(a);
}

static void test_local(void **state)
{
    (void)state;
    SKIP_UNLESS_READY();
    char *a[] = {"--mode", "local", "--adapter", k_adapter, NULL};
    in_process(a);
}

static void test_sealed(void **state)
{
    (void)state;
    SKIP_UNLESS_READY();
    char *a[] = {"--mode", "sealed", "--semi-honest", "--no-dp", "--adapter", k_adapter, NULL};
    in_process(a);
}

static void test_sealed_private(void **state)
{
    (void)state;
    SKIP_UNLESS_READY();
    char *a[] = {"--mode", "sealed-private", "--adapter", k_adapter, NULL};
    in_process(a);
}

static void over_localhost(const char *mode, int no_dp)
{
    const char *names[] = {"lora_bos", "lora_prompt"};
    for (int k = 0; k < 2; k++) {
        unsigned port = 0;
        pid_t pid = spawn_serve(mode, &port);
        if (pid < 0)
            fail_msg("tensafe serve --mode %s did not start", mode);
        char server[32];
        snprintf(server, sizeof server, "127.0.0.1:%u", port);
        char *a[] = {"--mode", (char *)mode, "--server", server, NULL, NULL, NULL};
        if (!strcmp(mode, "sealed")) /* its opt-in */
            a[4] = "--semi-honest";
        if (no_dp)
            a[a[4] ? 5 : 4] = "--no-dp";
        check_run(names[k], k ? "Once upon a time" : NULL, a, "Max");
        int status = 0;
        waitpid(pid, &status, 0);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

static void test_served_sealed_private(void **state)
{
    (void)state;
    SKIP_UNLESS_READY();
    over_localhost("sealed-private", 0);
}

static void test_served_sealed(void **state)
{
    (void)state;
    SKIP_UNLESS_READY();
    over_localhost("sealed", 1);
}

/* ------------------------------------------------------------- setup */

static int setup(void **state)
{
    (void)state;
    if (sodium_init() < 0)
        return -1;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = 0;
        snprintf(g_tool, sizeof g_tool, "%s/../bin/tensafe", exe);
    }
    snprintf(g_tmp, sizeof g_tmp, "/tmp/tensafe-gen-XXXXXX");
    if (!mkdtemp(g_tmp))
        return -1;
    int sums = verify_sums();
    if (sums < 0) {
        print_message("%s does not match its SHA256SUMS\n", MODEL_DIR);
        return -1;
    }
    if (sums == 0 || access(g_tool, X_OK) != 0)
        return 0; /* tests print "skipped" */
    json_error_t err;
    g_ref = json_load_file(MODEL_DIR "/reference.json", 0, &err);
    g_ready = g_ref != NULL;
    return g_ref ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    json_decref(g_ref);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base),
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_local),
        cmocka_unit_test(test_sealed),
        cmocka_unit_test(test_sealed_private),
        cmocka_unit_test(test_served_sealed_private),
        cmocka_unit_test(test_served_sealed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
