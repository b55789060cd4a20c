/* Fuzz target bodies shared by the libFuzzer drivers (tests/fuzz/fuzz_*.c)
 * and the corpus replay test (tests/test_fuzz_replay.c).
 *
 * Each tsafe_fuzz_<name> takes untrusted bytes, runs them through one
 * parser (and, on success, through the calls that consume the parsed
 * object), and returns 1 when the parser accepted the input, 0 when it
 * refused it. A violated invariant (e.g. a re-serialised object that does
 * not read back) calls abort(), which both libFuzzer and the replay test
 * report. Fixtures (contexts, keys, a LoRA client/server, a signing key)
 * are built once, on first use, from fixed seeds: the checked-in corpus
 * (tests/fuzz/gen_corpus.c) is made with the same fixtures.
 *
 * Not thread-safe (libFuzzer runs one input at a time). */
#ifndef TSAFE_FUZZ_TARGETS_H
#define TSAFE_FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

#define TSAFE_FUZZ_TARGETS(X) \
    X(params)                 \
    X(ciphertext)             \
    X(plaintext)              \
    X(public_key)             \
    X(secret_key)             \
    X(lora_request)           \
    X(lora_response)          \
    X(lora_umsg)              \
    X(package)                \
    X(dp)                     \
    X(safetensors)            \
    X(adapter_config)         \
    X(moe_config)             \
    X(stepgate)               \
    X(bfv)                    \
    X(sealed_hello)           \
    X(sealed_query)           \
    X(sealed_response1)       \
    X(sealed_share)           \
    X(sealed_final)           \
    X(session_feed)

#define TSAFE_FUZZ_DECLARE(name) \
    int tsafe_fuzz_##name(const uint8_t *data, size_t size);
TSAFE_FUZZ_TARGETS(TSAFE_FUZZ_DECLARE)
#undef TSAFE_FUZZ_DECLARE

/* Frees every fixture built so far (for leak checkers at exit). */
void tsafe_fuzz_cleanup(void);

/* Seed of the fixed Ed25519 test key that signs the package corpus. */
#define TSAFE_FUZZ_PKG_SEED "tensafe-he fuzz package key seed"

#endif
