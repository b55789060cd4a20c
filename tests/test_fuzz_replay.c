/* Replays the checked-in fuzz corpus (tests/corpus/fuzz_<target>/) through the
 * same entry points the libFuzzer drivers call (tests/fuzz/targets.c), so
 * `make test` catches regressions without clang.
 *
 * File names carry an expectation: "ok-*" must be accepted by the parser,
 * "bad-*" must be refused; anything else (crash reproducers, inputs the
 * fuzzer found) only has to run without a crash or a violated invariant.
 * Every target must have a non-empty corpus directory. The corpus root is
 * tests/corpus, or $TSAFE_CORPUS_DIR. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file.h" /* the libraries' whole-file reader */
#include "fuzz/targets.c"

typedef int (*fuzz_fn)(const uint8_t *data, size_t size);

typedef struct {
    const char *name;
    fuzz_fn fn;
} replay_target;

#define REPLAY_ENTRY(n) {#n, tsafe_fuzz_##n},
static const replay_target k_targets[] = {TSAFE_FUZZ_TARGETS(REPLAY_ENTRY)};
#undef REPLAY_ENTRY

static const char *corpus_root(void)
{
    const char *env = getenv("TSAFE_CORPUS_DIR");
    return env && *env ? env : "tests/corpus";
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void replay_one(const replay_target *t)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/fuzz_%s", corpus_root(), t->name);
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("corpus directory %s missing", dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            names = realloc(names, cap * sizeof *names);
            assert_non_null(names);
        }
        names[n] = strdup(e->d_name);
        assert_non_null(names[n]);
        n++;
    }
    closedir(d);
    if (n == 0)
        fail_msg("corpus directory %s is empty", dir);
    qsort(names, n, sizeof *names, name_cmp);
    size_t ok = 0, bad = 0, other = 0;
    for (size_t i = 0; i < n; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t len = 0;
        uint8_t *buf = NULL;
        if (tsafe_read_file(path, (size_t)1 << 26, &buf, &len) != TSAFE_OK)
            fail_msg("cannot read %s", path);
        /* an exact-size copy, so ASan sees reads past the end */
        uint8_t *exact = malloc(len ? len : 1);
        assert_non_null(exact);
        memcpy(exact, buf, len);
        free(buf);
        int accepted = t->fn(exact, len);
        free(exact);
        if (strncmp(names[i], "ok-", 3) == 0) {
            if (!accepted)
                fail_msg("%s: valid input refused", path);
            ok++;
        } else if (strncmp(names[i], "bad-", 4) == 0) {
            if (accepted)
                fail_msg("%s: invalid input accepted", path);
            bad++;
        } else {
            other++;
        }
        free(names[i]);
    }
    free(names);
    print_message("%-17s %3zu files (%zu ok, %zu bad, %zu other)\n", t->name, n, ok, bad,
                  other);
    assert_true(ok > 0); /* every corpus holds at least one valid object */
}

static void test_replay(void **state)
{
    replay_one((const replay_target *)*state);
}

static int teardown_all(void **state)
{
    (void)state;
    tsafe_fuzz_cleanup();
    return 0;
}

int main(void)
{
    enum { N = sizeof k_targets / sizeof k_targets[0] };
    struct CMUnitTest tests[N];
    for (size_t i = 0; i < N; i++) {
        struct CMUnitTest t = {k_targets[i].name, test_replay, NULL, NULL,
                               (void *)&k_targets[i]};
        tests[i] = t;
    }
    return cmocka_run_group_tests_name("fuzz_replay", tests, NULL, teardown_all);
}
