/* One status enum for every TenSafe-HE library.
 *
 * 0 is success; errors are negative and grouped by tens (argument, memory,
 * parameters, level/scale, format, crypto, budget, device, I/O, adapters).
 * Numbers are stable: new codes take a free number inside their group. */
#ifndef TENSAFE_STATUS_H
#define TENSAFE_STATUS_H

#include "tensafe/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tsafe_status {
    TSAFE_OK = 0,

    /* arguments and state */
    TSAFE_E_ARG = -1,            /* an argument is invalid */
    TSAFE_E_NULL = -2,           /* a required pointer is NULL */
    TSAFE_E_RANGE = -3,          /* a count or index is out of range */
    TSAFE_E_UNSUPPORTED = -4,    /* valid request this build cannot do */
    TSAFE_E_STATE = -5,          /* object not in a state that allows this */

    /* memory and sizes */
    TSAFE_E_NOMEM = -10,         /* allocation failed */
    TSAFE_E_SIZE_OVERFLOW = -11, /* a size computation would overflow */
    TSAFE_E_BUFFER_SMALL = -12,  /* caller's buffer is too small */

    /* parameters */
    TSAFE_E_PARAMS = -20,        /* parameter set is malformed */
    TSAFE_E_INSECURE = -21,      /* above the 128-bit HE-standard bound */
    TSAFE_E_NO_PRIME = -22,      /* no NTT-friendly prime of that size */
    TSAFE_E_PARAMS_MISMATCH = -23, /* objects from different contexts */

    /* level and scale bookkeeping */
    TSAFE_E_LEVEL = -30,         /* levels differ or none left */
    TSAFE_E_SCALE = -31,         /* scales differ beyond tolerance */
    TSAFE_E_VALUE_RANGE = -32,   /* not finite, or too large (float32, modulus/scale) */

    /* formats of untrusted bytes */
    TSAFE_E_FORMAT = -40,        /* malformed bytes */
    TSAFE_E_VERSION = -41,       /* unknown format version */
    TSAFE_E_TRUNCATED = -42,     /* input ends early */
    TSAFE_E_JSON = -43,          /* JSON does not parse */
    TSAFE_E_DTYPE = -44,         /* unknown or unsupported dtype */
    TSAFE_E_SHAPE = -45,         /* shape and size disagree */
    TSAFE_E_KIND = -46,          /* bytes hold another kind of object */
    TSAFE_E_HEADER_TOO_LARGE = -47, /* header length above the cap */
    TSAFE_E_OFFSETS = -48,       /* tensor offsets overlap, gap or overrun */
    TSAFE_E_MISSING_FIELD = -49, /* a required field is absent */

    /* cryptography */
    TSAFE_E_CRYPTO = -50,        /* CSPRNG or primitive failure */
    TSAFE_E_VERIFY = -51,        /* signature or digest check failed */
    TSAFE_E_KEY = -52,           /* wrong or unusable key */
    TSAFE_E_REPLAY = -53,        /* message replayed, reordered or from
                                    another session or key epoch */
    TSAFE_E_UNSIGNED = -54,      /* unsigned adapter refused (not allowed) */

    /* privacy budget */
    TSAFE_E_BUDGET = -60,        /* differential-privacy budget spent */

    /* devices */
    TSAFE_E_DEVICE = -70,        /* device call failed */
    TSAFE_E_NO_DEVICE = -71,     /* no usable device */

    /* files and I/O */
    TSAFE_E_IO = -80,            /* read/write/socket failure */
    TSAFE_E_NOT_FOUND = -81,     /* file, key, slot or module not found */

    /* adapters */
    TSAFE_E_PICKLE = -90,        /* pickled adapter_model.bin refused */
    TSAFE_E_DORA = -91,          /* DoRA adapters are not supported */
    TSAFE_E_ADAPTER = -92        /* adapter content is inconsistent */
} tsafe_status;

/* What went wrong, for a human: filled by calls that take one (e.g. through
 * tsafe_lora_load_options.error) when they fail, naming the culprit and
 * the numbers, e.g. "tensor 'x.lora_A.weight': shape [4, 8] of F32 needs
 * 128 bytes, data_offsets span 120 (expected 128, found 120)". A plain
 * value struct owned by the caller: one per call (or per thread), so no
 * locking is involved. On success the call leaves status TSAFE_OK and an
 * empty detail. */
#define TSAFE_ERROR_DETAIL_MAX 512u
typedef struct tsafe_error_info {
    tsafe_status status;                 /* the status the call returned */
    char detail[TSAFE_ERROR_DETAIL_MAX]; /* NUL-terminated, "" when none;
                                            names and paths quoted as
                                            given; one line, no newline */
} tsafe_error_info;

/* A short English sentence for a status; never NULL, static storage. */
TSAFE_API const char *tsafe_strerror(int status);
/* The enum name ("TSAFE_E_FORMAT"); never NULL, static storage. */
TSAFE_API const char *tsafe_status_name(int status);

#ifdef __cplusplus
}
#endif
#endif
