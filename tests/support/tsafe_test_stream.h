/* libsodium's randombytes replaced by a resettable stream, so that two
 * runs draw the same keys, seeds and errors and their results can be
 * compared bit for bit (never for anything but tests). */
#ifndef TSAFE_TEST_STREAM_H
#define TSAFE_TEST_STREAM_H

#include <stdint.h>

/* Installs the stream; call before anything calls sodium_init. 0 on
 * success. */
int tsafe_test_stream_install(void);
/* Restarts the stream at `state`: what follows repeats for equal states. */
void tsafe_test_stream_reset(uint64_t state);

#endif
