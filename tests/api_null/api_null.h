/* Shared by the tests/test_api_null_<header>.c suites: every exported
 * function, given NULL pointers and out-of-range arguments, returns an error
 * status (or, for free(NULL) and getters, does nothing / returns its
 * documented default) instead of crashing.
 *
 * Table-driven per public header: each suite holds its header's table of
 * {function name, check}, and api_null_run() also reads that header and
 * fails when one of its TSAFE_API functions has no entry, or an entry names
 * no function of it (so a new function without a case fails its suite); the
 * status.h suite checks that every public header with functions has its
 * suite. scripts/check-api-coverage.sh does the same against the symbols the
 * shared libraries export. The fixture (one of each object, built once per
 * suite) lives in support.c. Run from the repository root (or set
 * TSAFE_INCLUDE_DIR / TSAFE_TESTS_DIR). */
#ifndef TSAFE_TEST_API_NULL_H
#define TSAFE_TEST_API_NULL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "tensafe/backend.h"
#include "tensafe/backend_impl.h"
#include "tensafe/ckks.h"
#include "tensafe/ckks_buffer.h"
#include "tensafe/lora_adapter.h"
#include "tensafe/lora_dp.h"
#include "tensafe/lora_engine.h"
#include "tensafe/lora_he.h"
#include "tensafe/lora_package.h"
#include "tensafe/lora_registry.h"
#include "tensafe/lora_svd.h"
#include "tensafe/lora_two_party.h"
#include "tensafe/lora_sealed.h"
#include "tensafe/bfv.h"
#include "tensafe/bfv_backend.h"
#include "tensafe/moe.h"
#include "tensafe/moe_lora.h"
#include "tensafe/lora_session.h"
#include "tensafe/safetensors.h"
#include "tensafe/status.h"
#include "tensafe/version.h"
#if defined(TSAFE_WITH_CUDA)
#include "tensafe/cuda.h"
#endif

/* ------------------------------------------------------------ macros */

/* The call must return an error status (< 0). */
#define ERR(call)                                                               \
    do {                                                                        \
        tsafe_status s_ = (call);                                               \
        if (s_ >= 0)                                                            \
            fail_msg("%s:%d: %s returned %d, want an error", __FILE__, __LINE__, \
                     #call, (int)s_);                                           \
    } while (0)

/* The call must return exactly `code`. */
#define IS(code, call)                                                        \
    do {                                                                      \
        tsafe_status s_ = (call);                                             \
        if (s_ != (code))                                                     \
            fail_msg("%s:%d: %s returned %s, want %s", __FILE__, __LINE__,    \
                     #call, tsafe_status_name(s_), tsafe_status_name(code));  \
    } while (0)

#define OK(call) IS(TSAFE_OK, call)

/* ----------------------------------------------------------- fixture */

#define LD 64u /* LoRA d_in */
#define LR 4u  /* LoRA rank */

typedef struct {
    tsafe_params params;
    tsafe_context *ctx, *ctx2;       /* ctx2: other parameters */
    tsafe_secret_key *sk;
    tsafe_public_key *pk;
    tsafe_plaintext *pt, *pt0;       /* top level / level 0 */
    tsafe_ciphertext *ct, *ct0, *out; /* top level / level 0 / scratch */
    uint8_t *ct_bytes;
    size_t ct_len;
    tsafe_backend *be;
    tsafe_buffer *buf, *buf1;        /* 2 polys x 2 limbs / 1 limb */
    tsafe_lora_plan plan;
    tsafe_lora_client *client;
    tsafe_lora_server *server;
    tsafe_lora_site *site;
    tsafe_lora_local *local;
    float A[LR * LD], B[LD * LR], x[LD], u[LR], delta[LD];
    uint8_t *req, *resp, *umsg;
    size_t req_len, resp_len, umsg_len;
    tsafe_dp_session *dp;
    uint8_t pkg_pk[32], pkg_sk[64];
    uint8_t *pkg;
    size_t pkg_len;
    tsafe_package *package;
    tsafe_registry *reg;
    tsafe_registry_ref *ref;
    uint8_t *st_bytes;
    size_t st_len;
    tsafe_safetensors *st;
    tsafe_safetensors_writer *stw;
    tsafe_lora_adapter *adapter;
    tsafe_moe_config moecfg;
    tsafe_moe_layer *layer;
    tsafe_stepgate *gate;
    tsafe_stepgate_session *gs;
    int destroyed; /* registry destroy callback count */
} fixture;

extern fixture F;
/* The registry slot's destroy callback: counts into F.destroyed. */
void count_destroy(void *obj);

/* ---------------------------------------------------- the sealed world */
/* A small BFV world and a sealed pair (d_in 64, rank 4, d_out 64), built on
 * first use and freed by the fixture teardown. */

/* A non-NULL out-pointer value that a failing constructor must overwrite
 * with NULL once its pointer arguments have passed the NULL checks. */
#define POISON(p) ((p) = (void *)&S)
typedef struct {
    tsafe_bfv_context *c;
    tsafe_bfv_secret_key *sk;
    tsafe_bfv_public_key *pk;
    tsafe_bfv_ct *ct;
    tsafe_bfv_plain *pt;
    tsafe_bfv_acc *acc;
    tsafe_bfv_sealed *res;
    tsafe_sealed_plan plan;
    tsafe_sealed_client *cl;
    tsafe_sealed_server *sv;
    tsafe_sealed_site *site;
    float A[4 * 64], B[64 * 4], x[64];
} sealed_world_t;

extern sealed_world_t S;
void sealed_world(void);
void sealed_world_free(void);

/* ------------------------------------ shared by several headers' checks */

/* An engine's function refuses NULL sites, x and outputs (and a NULL user
 * unless null_user_ok). */
void engine_checks(fixture *f, tsafe_lora_engine e, int null_user_ok);
/* Backend factories: one counts its calls into g_factory_calls and makes a
 * CPU backend, the other fails with TSAFE_E_NO_DEVICE. */
extern int g_factory_calls;
extern const tsafe_backend_factory k_counting, k_failing;

/* ------------------------------------------------------------ tables */

typedef void (*api_check)(fixture *f);

typedef struct {
    const char *name;
    api_check check;
} api_case;

typedef struct {
    const char *header;   /* file name in include/tensafe/ */
    const api_case *cases;
    size_t n;
    int skipped;          /* header not built in this configuration */
} api_table;

#define CHECK_FN(fn) static void check_##fn(fixture *f)
#define ENTRY(fn) {#fn, check_##fn}

#define TABLE(h, t) {h, t, sizeof t / sizeof t[0], 0}

/* Runs the tables' checks (one cmocka test per table) and the coverage of
 * their headers inside one group set up with the fixture; all_headers != 0
 * also requires a tests/test_api_null_<stem>.c for every public header
 * that declares functions. Returns cmocka's status. */
int api_null_run(const char *group, const api_table *tables, size_t n, int all_headers);

#endif
