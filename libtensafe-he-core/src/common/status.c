/* Status names and messages for tsafe_status. */
#include "tensafe/status.h"

#include <stddef.h>

typedef struct {
    int code;
    const char *name;
    const char *text;
} status_entry;

static const status_entry k_status[] = {
    {TSAFE_OK, "TSAFE_OK", "success"},
    {TSAFE_E_ARG, "TSAFE_E_ARG", "invalid argument"},
    {TSAFE_E_NULL, "TSAFE_E_NULL", "a required pointer is NULL"},
    {TSAFE_E_RANGE, "TSAFE_E_RANGE", "count or index out of range"},
    {TSAFE_E_UNSUPPORTED, "TSAFE_E_UNSUPPORTED", "not supported (by this SDK, build or backend)"},
    {TSAFE_E_STATE, "TSAFE_E_STATE", "object is not in a state that allows this operation"},
    {TSAFE_E_NOMEM, "TSAFE_E_NOMEM", "out of memory"},
    {TSAFE_E_SIZE_OVERFLOW, "TSAFE_E_SIZE_OVERFLOW", "size computation would overflow"},
    {TSAFE_E_BUFFER_SMALL, "TSAFE_E_BUFFER_SMALL", "output buffer too small"},
    {TSAFE_E_PARAMS, "TSAFE_E_PARAMS", "malformed parameter set"},
    {TSAFE_E_INSECURE, "TSAFE_E_INSECURE", "parameters exceed the 128-bit security bound (log2 Q too large for N)"},
    {TSAFE_E_NO_PRIME, "TSAFE_E_NO_PRIME", "no NTT-friendly prime of the requested size"},
    {TSAFE_E_PARAMS_MISMATCH, "TSAFE_E_PARAMS_MISMATCH", "objects belong to different parameter sets"},
    {TSAFE_E_LEVEL, "TSAFE_E_LEVEL", "ciphertext levels differ or no level left"},
    {TSAFE_E_SCALE, "TSAFE_E_SCALE", "scales differ"},
    {TSAFE_E_VALUE_RANGE, "TSAFE_E_VALUE_RANGE", "value not finite, or too large for float32 or for the modulus and scale"},
    {TSAFE_E_FORMAT, "TSAFE_E_FORMAT", "malformed input bytes"},
    {TSAFE_E_VERSION, "TSAFE_E_VERSION", "unsupported format version"},
    {TSAFE_E_TRUNCATED, "TSAFE_E_TRUNCATED", "input is truncated"},
    {TSAFE_E_JSON, "TSAFE_E_JSON", "JSON does not parse or has the wrong type"},
    {TSAFE_E_DTYPE, "TSAFE_E_DTYPE", "unknown or unsupported tensor dtype"},
    {TSAFE_E_SHAPE, "TSAFE_E_SHAPE", "tensor shape and size disagree"},
    {TSAFE_E_KIND, "TSAFE_E_KIND", "bytes hold a different kind of object"},
    {TSAFE_E_HEADER_TOO_LARGE, "TSAFE_E_HEADER_TOO_LARGE", "header length exceeds the cap"},
    {TSAFE_E_OFFSETS, "TSAFE_E_OFFSETS", "tensor offsets overlap, leave gaps or overrun the data"},
    {TSAFE_E_MISSING_FIELD, "TSAFE_E_MISSING_FIELD", "a required field is missing"},
    {TSAFE_E_CRYPTO, "TSAFE_E_CRYPTO", "cryptographic primitive or CSPRNG failure"},
    {TSAFE_E_VERIFY, "TSAFE_E_VERIFY", "signature or digest verification failed"},
    {TSAFE_E_KEY, "TSAFE_E_KEY", "wrong or unusable key"},
    {TSAFE_E_REPLAY, "TSAFE_E_REPLAY",
     "message replayed, reordered or from another session"},
    {TSAFE_E_UNSIGNED, "TSAFE_E_UNSIGNED", "unsigned adapter refused (unsigned adapters must be allowed explicitly)"},
    {TSAFE_E_BUDGET, "TSAFE_E_BUDGET", "differential-privacy budget exhausted"},
    {TSAFE_E_DEVICE, "TSAFE_E_DEVICE", "device call failed"},
    {TSAFE_E_NO_DEVICE, "TSAFE_E_NO_DEVICE", "no usable device"},
    {TSAFE_E_IO, "TSAFE_E_IO", "I/O error"},
    {TSAFE_E_NOT_FOUND, "TSAFE_E_NOT_FOUND", "not found"},
    {TSAFE_E_PICKLE, "TSAFE_E_PICKLE", "pickled adapter_model.bin refused: convert the adapter to safetensors"},
    {TSAFE_E_DORA, "TSAFE_E_DORA", "DoRA adapters are not supported"},
    {TSAFE_E_ADAPTER, "TSAFE_E_ADAPTER", "adapter content is inconsistent"},
};

static const status_entry *find(int code)
{
    for (size_t i = 0; i < sizeof k_status / sizeof k_status[0]; i++)
        if (k_status[i].code == code)
            return &k_status[i];
    return NULL;
}

const char *tsafe_strerror(int status)
{
    const status_entry *e = find(status);
    return e ? e->text : "unknown status code";
}

const char *tsafe_status_name(int status)
{
    const status_entry *e = find(status);
    return e ? e->name : "TSAFE_E_UNKNOWN";
}
