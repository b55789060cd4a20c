/* docs/API.md documents every function the shared libraries export, with
 * the signature its header declares.
 *
 * Runs scripts/check-api-doc.sh (found under $TSAFE_SOURCE_DIR, default ".",
 * i.e. the repository root that `make test` runs from) on the shared
 * libraries next to this binary (<dir of /proc/self/exe>/../lib, so
 * build/lib for build/tests and build/san/lib for build/san/tests) and the
 * headers of include/tensafe, and asserts that it passes. More cases check
 * the checker itself: a document that lacks a symbol, one whose signature
 * differs from the header's, and one that names or documents a function no
 * header declares must each fail. Skips (with the reason) when the script
 * or the shared libraries are missing. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define PATH_CAP 4096
#define OUT_CAP 65536

typedef struct paths {
    char script[PATH_CAP];
    char libdir[PATH_CAP];
    char doc[PATH_CAP];
} paths;

/* Fills p, or returns a reason to skip. */
static const char *locate(paths *p)
{
    const char *src = getenv("TSAFE_SOURCE_DIR");
    if (src == NULL || src[0] == '\0')
        src = ".";
    if (snprintf(p->script, sizeof p->script, "%s/scripts/check-api-doc.sh", src) >=
            (int)sizeof p->script ||
        snprintf(p->doc, sizeof p->doc, "%s/docs/API.md", src) >= (int)sizeof p->doc)
        return "source path too long";
    if (access(p->script, R_OK) != 0)
        return "scripts/check-api-doc.sh not found (run from the repository root "
               "or set TSAFE_SOURCE_DIR)";

    char exe[PATH_CAP];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return "cannot read /proc/self/exe";
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL)
        return "test binary path has no directory";
    *slash = '\0';
    if (snprintf(p->libdir, sizeof p->libdir, "%s/../lib", exe) >= (int)sizeof p->libdir)
        return "library path too long";

    char pattern[PATH_CAP + 32];
    snprintf(pattern, sizeof pattern, "%s/libtensafe-*.so.*", p->libdir);
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    size_t found = rc == 0 ? g.gl_pathc : 0;
    if (rc == 0)
        globfree(&g);
    if (found == 0)
        return "no shared libraries next to the test binary (run make libs)";
    return NULL;
}

/* Appends s single-quoted for sh. */
static int quote(char *dst, size_t cap, const char *s)
{
    size_t len = strlen(dst);
    if (len + 1 >= cap)
        return -1;
    dst[len++] = '\'';
    for (; *s != '\0'; s++) {
        const char *piece = *s == '\'' ? "'\\''" : NULL;
        size_t k = piece ? strlen(piece) : 1;
        if (len + k + 2 >= cap)
            return -1;
        if (piece)
            memcpy(dst + len, piece, k);
        else
            dst[len] = *s;
        len += k;
    }
    dst[len++] = '\'';
    dst[len] = '\0';
    return 0;
}

/* Runs the script; returns its exit status (-1 when it did not exit) and
 * its stdout + stderr in out. */
static int run_check(const paths *p, const char *doc, char *out, size_t cap)
{
    char cmd[3 * PATH_CAP + 64] = "sh ";
    assert_int_equal(quote(cmd, sizeof cmd, p->script), 0);
    strcat(cmd, " ");
    assert_int_equal(quote(cmd, sizeof cmd, p->libdir), 0);
    if (doc != NULL) {
        strcat(cmd, " ");
        assert_int_equal(quote(cmd, sizeof cmd, doc), 0);
    }
    assert_true(strlen(cmd) + 8 < sizeof cmd);
    strcat(cmd, " 2>&1");

    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t len = 0, got;
    char chunk[1024];
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        size_t room = cap - 1 - len, k = got < room ? got : room;
        memcpy(out + len, chunk, k);
        len += k;
    }
    out[len] = '\0';
    int status = pclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Copies the real docs/API.md into a temporary file, dropping every line
 * that contains `drop` (when not NULL) and appending `extra`. */
static void write_variant(const paths *p, const char *drop, const char *extra,
                          char *tmp_path, size_t cap)
{
    const char *dir = getenv("TMPDIR");
    snprintf(tmp_path, cap, "%s/test_api_doc.XXXXXX", dir && dir[0] ? dir : "/tmp");
    int fd = mkstemp(tmp_path);
    assert_true(fd >= 0);
    FILE *out = fdopen(fd, "w");
    assert_non_null(out);
    FILE *in = fopen(p->doc, "r");
    assert_non_null(in);
    char line[8192];
    while (fgets(line, sizeof line, in) != NULL)
        if (drop == NULL || strstr(line, drop) == NULL)
            fputs(line, out);
    fclose(in);
    if (extra != NULL)
        fputs(extra, out);
    assert_int_equal(fclose(out), 0);
}

static void test_every_export_documented(void **state)
{
    (void)state;
    paths p;
    const char *why = locate(&p);
    if (why != NULL) {
        print_message("skipped: %s\n", why);
        skip();
    }
    print_message("checking %s against %s\n", p.doc, p.libdir);
    static char out[OUT_CAP];
    int rc = run_check(&p, NULL, out, sizeof out);
    print_message("%s", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "all documented"));
    assert_non_null(strstr(out, "all in the document as declared"));
}

/* Runs the checker on docs/API.md less the lines holding drop, plus extra;
 * returns its exit status, its output in out. Skips without the script or
 * the libraries. */
static int check_variant(const char *drop, const char *extra, char *out, size_t cap)
{
    paths p;
    const char *why = locate(&p);
    if (why != NULL) {
        print_message("skipped: %s\n", why);
        skip();
    }
    char tmp[PATH_CAP];
    write_variant(&p, drop, extra, tmp, sizeof tmp);
    int rc = run_check(&p, tmp, out, cap);
    unlink(tmp);
    return rc;
}

/* The checker must notice an undocumented export: remove every line that
 * mentions tsafe_strerror (always exported by libtensafe-he-core). */
static void test_checker_detects_missing(void **state)
{
    (void)state;
    static char out[OUT_CAP];
    assert_int_equal(check_variant("tsafe_strerror", NULL, out, sizeof out), 1);
    assert_non_null(strstr(out, "  tsafe_strerror\n"));
}

/* A function named in a code span, or documented with a signature, that no
 * header declares fails the check. */
static void test_checker_refuses_unknown(void **state)
{
    (void)state;
    static char out[OUT_CAP];
    int rc = check_variant(NULL,
                           "\n`tsafe_no_such_function_for_test(void)`\n"
                           "- `int tsafe_no_such_signature_for_test(void)`\n",
                           out, sizeof out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "  tsafe_no_such_function_for_test: named in a code span"));
    assert_non_null(strstr(out, "  tsafe_no_such_signature_for_test: documented as"));
}

/* A signature that drifts from its header fails: tsafe_status_name(int)
 * documented as taking a long. */
static void test_checker_detects_signature_drift(void **state)
{
    (void)state;
    static char out[OUT_CAP];
    int rc = check_variant("`const char *tsafe_status_name(int status)`",
                           "\n- `const char *tsafe_status_name(long status)`\n", out,
                           sizeof out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "    header: const char *tsafe_status_name(int status)\n"));
    assert_non_null(strstr(out, "    doc:    const char *tsafe_status_name(long status)\n"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_export_documented),
        cmocka_unit_test(test_checker_detects_missing),
        cmocka_unit_test(test_checker_refuses_unknown),
        cmocka_unit_test(test_checker_detects_signature_drift),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
