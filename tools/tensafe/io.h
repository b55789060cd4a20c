/* Shared helpers of the `tensafe` subcommands: whole-file I/O, float32
 * little-endian vector files, option parsing, progress on a terminal,
 * hex keys and adapter loading (PEFT directory or signed package). */
#ifndef TENSAFE_TOOL_IO_H
#define TENSAFE_TOOL_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tensafe/tensafe.h"

/* Largest file the tool reads whole (adapters, packages, keys, vectors). */
#define IO_MAX_FILE ((size_t)4 << 30)

/* ------------------------------------------------------------- files */

/* "-" as a path: io_read_file reads standard input (once per process),
 * io_write_file writes to standard output. Standard output then carries
 * only that data: io_reserve_stdout() (main calls it when an --out/--output
 * is "-") points stdout at stderr, so the commands' human-readable lines
 * go there, and keeps the real stdout for the data. 0 on success. */
int io_reserve_stdout(void);
int io_stdout_reserved(void);
/* One JSON object (consumed) and a newline: to the reserved stdout when
 * there is one, else stdout. */
struct json_t;
void io_json_emit(struct json_t *j);

/* Reads a whole file (at most cap bytes) into a malloc'd buffer (one extra
 * NUL byte appended, not counted). TSAFE_E_NOT_FOUND, TSAFE_E_IO,
 * TSAFE_E_RANGE (above cap), TSAFE_E_NOMEM. */
tsafe_status io_read_file(const char *path, size_t cap, uint8_t **buf, size_t *len);
/* Writes len bytes to path (created with mode, or truncated). A private mode
 * (no group/other bits, e.g. 0600) is also forced on an existing file and
 * the path must not be a symlink. */
tsafe_status io_write_file(const char *path, const void *buf, size_t len, unsigned mode);
/* 1 when path is a directory, 0 when it is something else, -1 if absent. */
int io_is_dir(const char *path);
/* mkdir with mode (EEXIST is fine when it is a directory). */
tsafe_status io_mkdir(const char *path, unsigned mode);
/* dir + "/" + name into out (TSAFE_E_RANGE when it does not fit). */
tsafe_status io_join(char *out, size_t cap, const char *dir, const char *name);

/* Float32 little-endian vector files. io_read_f32 fails with
 * TSAFE_E_SHAPE when the size is not a multiple of 4 (the caller checks
 * rows); *count may be 0 for an empty file. */
tsafe_status io_read_f32(const char *path, float **v, size_t *count);
tsafe_status io_write_f32(const char *path, const float *v, size_t count);

/* ----------------------------------------------------------- options */

typedef enum {
    OPT_FLAG,   /* int, set to 1 */
    OPT_STR,    /* const char * */
    OPT_U32,    /* uint32_t, decimal, 0..UINT32_MAX */
    OPT_DOUBLE  /* double, finite */
} opt_kind;

typedef struct {
    const char *name; /* "--dim" */
    opt_kind kind;
    void *dst;
    int seen;         /* set by opts_parse */
} tool_opt;

#define OPTS_HELP (-1)

/* Parses argv[first..argc) into opts (both "--name value" and
 * "--name=value") and positional arguments (at most max_pos, stored in pos).
 * Returns 0, OPTS_HELP when --help/-h was given, or 2 after printing one
 * usage line (unknown option, missing or malformed value, too many
 * positional arguments). cmd names the command in messages. */
int opts_parse(const char *cmd, int argc, char **argv, int first, tool_opt *opts,
               size_t n_opts, const char **pos, size_t max_pos, size_t *n_pos);
/* For commands that parse with getopt_long: one value of kind for option
 * name into dst (0, or 2 after the usage line). */
int opts_value(const char *cmd, const char *name, opt_kind kind, const char *v, void *dst);
/* getopt_long over argv[1..] with longs (each option's val passed to
 * apply with its argument; "--help"/-h is val 'h'): 0, OPTS_HELP, or 2
 * after one usage line (unknown option, missing value, a positional
 * argument, or apply's own 2). */
struct option;
int opts_getopt(const char *cmd, int argc, char **argv, const struct option *longs,
                int (*apply)(void *ctx, int c, const char *v), void *ctx);
/* Splits a comma-separated list into at most max non-empty items (pointers
 * into the malloc'd copy *store, which the caller frees). Returns the count,
 * or 0 if the list is empty, has an empty item or more than max items. */
size_t opts_split(const char *list, char **store, const char **items, size_t max);

/* ---------------------------------------------------------- progress */

/* "\r<label> i/n" on stderr when stderr is a terminal; a newline at i == n. */
void io_progress(const char *label, size_t i, size_t n);

/* --------------------------------------------------------------- keys */

/* Decodes exactly n bytes of hex (surrounding whitespace ignored). */
tsafe_status io_hex_decode(const char *hex, uint8_t *out, size_t n);
void io_hex_encode(const uint8_t *in, size_t n, char *out /* 2n+1 */);
/* A trusted Ed25519 public key: 64 hex characters, or a file holding them
 * (or the 32 raw bytes). what receives a description of the failure. */
tsafe_status io_load_trusted_key(const char *arg, uint8_t pk[32]);

/* ------------------------------------------------------------ adapters */

/* Loads a PEFT directory, or a signed package file verified against
 * trusted_key (required for a package: TSAFE_E_KEY otherwise). On failure
 * writes a description of the step into what (cap bytes). */
tsafe_status io_load_adapter(const char *path, const char *trusted_key,
                             tsafe_lora_adapter **out, char *what, size_t cap);
/* Where the adapter came from, one line: "signed package <digest hex>,
 * signer <key hex>" or "UNSIGNED directory '<path>'" (or "UNSIGNED (built
 * in memory)"). */
void io_origin_text(const tsafe_lora_adapter *ad, char *buf, size_t cap);
/* Serving policy: a signed adapter passes; an unsigned one is refused
 * (TSAFE_E_UNSIGNED, description in what) unless allow_unsigned, and then
 * warned about on stderr. */
tsafe_status io_require_signed(const tsafe_lora_adapter *ad, const char *cmd,
                               int allow_unsigned, char *what, size_t cap);
/* Index of a module by canonical name, or by a unique last-components
 * suffix ("q_proj", "self_attn.q_proj"). TSAFE_E_NOT_FOUND / TSAFE_E_ARG
 * (ambiguous), with a description in what. */
tsafe_status io_find_module(const tsafe_lora_adapter *ad, const char *name, size_t *index,
                            char *what, size_t cap);
/* Largest |A_ij| of a module. */
double io_module_max_abs_a(const tsafe_lora_module_info *m);

/* Modules selected for HE-LoRA (all with the same in_dim). */
#define IO_MAX_MODULES 256
typedef struct {
    size_t n;
    tsafe_lora_module_info info[IO_MAX_MODULES]; /* borrowed from the adapter */
    uint32_t d_in, max_rank, total_out; /* d_in: of the first module */
    double max_abs_a;
    int several_widths; /* some module's in_dim differs from d_in */
} io_modules;

/* Resolves a comma-separated module list (io_find_module for each), or
 * "all" (every module of the adapter, in its order). */
tsafe_status io_resolve_modules(const tsafe_lora_adapter *ad, const char *list, io_modules *m,
                                char *what, size_t cap);
/* The same; one_width = 0 accepts modules of several input widths (and
 * sets several_widths), 1 refuses them (TSAFE_E_SHAPE). */
tsafe_status io_resolve_modules_ex(const tsafe_lora_adapter *ad, const char *list,
                                   int one_width, io_modules *m, char *what, size_t cap);
/* The plan for the modules: preset NULL or "auto" -> the planner with
 * target precision, else the named preset. max_abs_a = the modules' bound. */
tsafe_status io_make_plan(const char *preset, const io_modules *m, double max_abs_x,
                          double precision, tsafe_lora_plan *plan, char *what, size_t cap);
/* One site per module on ctx, each with the plan narrowed to its rank.
 * sites[] must hold m->n entries; on failure every site is freed. */
tsafe_status io_make_sites(const tsafe_context *ctx, const tsafe_lora_plan *plan,
                           const io_modules *m, tsafe_lora_site **sites, char *what, size_t cap);
void io_free_sites(tsafe_lora_site **sites, size_t n);

/* -------------------------------------------------------------- modes */

/* The HE-LoRA modes as the user names them (--mode). sealed-private is the
 * default of every two-party path; plain-zero-moai is the seeds' protocol,
 * which lets the client read the adapter's A. */
typedef enum {
    IO_MODE_SEALED_PRIVATE = 0,
    IO_MODE_SEALED,
    IO_MODE_LOCAL,
    IO_MODE_PLAIN_ZERO_MOAI
} io_mode;
/* 0 and *out on a known name, -1 otherwise. */
int io_mode_parse(const char *name, io_mode *out);
const char *io_mode_name(io_mode m);
/* Sealed mode sends decryptions back in the clear: it protects only against
 * peers that follow the protocol, so the user must opt in (--semi-honest).
 * 0 when mode is not sealed or semi_honest is set; otherwise prints the
 * usage line for cmd ("serve", "lora apply", ...) and returns 2. Also 2 for
 * --semi-honest with another mode (it would change nothing). */
int io_mode_consent(const char *cmd, io_mode mode, int semi_honest);
/* --checked-shares (checked != 0; sealed-private's default, accepted for
 * scripts) and --unchecked-shares (unchecked != 0) are options of
 * sealed-private's plan and exclude each other: 0 with that mode or
 * without either flag, else cmd's usage line and 2. */
int io_share_checks(const char *cmd, io_mode mode, int checked, int unchecked);
/* --x-bits, --a-bits, --b-bits: w[0..2] are those three options (uint32_t
 * values; unseen ones leave the plan's default). Copies the given widths
 * into so; 0 when they are valid for mode, else prints the usage line for
 * cmd and returns 2: a width outside TSAFE_SEALED_WIDTH_MIN..MAX, a width
 * with a mode other than sealed/sealed-private, or --b-bits with sealed
 * (its round 2 is in the clear: no B grid). */
int io_sealed_widths(const char *cmd, io_mode mode, const tool_opt w[3],
                     tsafe_sealed_opts *so);

/* ------------------------------------------------------------ backends */

/* The factory behind `--backend NAME`: "cpu" (the default) or "cuda" (a
 * build with CUDA and a device). TSAFE_E_UNSUPPORTED / TSAFE_E_NO_DEVICE /
 * TSAFE_E_ARG with a message in what when it cannot be had. Static. */
tsafe_status io_backend_factory(const char *name, const tsafe_backend_factory **out,
                                char *what, size_t cap);

/* ----------------------------------------------------------- printing */

/* The HE-LoRA plan as text lines (indent prefix) or as a JSON object. */
void io_print_plan(FILE *f, const tsafe_lora_plan *plan, const char *indent);
struct json_t;
struct json_t *io_plan_json(const tsafe_lora_plan *plan);

#endif
