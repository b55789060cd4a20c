/* TenSafe-HE version: the single source of truth. The Makefile reads the
 * three numbers below (SONAME = major). */
#ifndef TENSAFE_VERSION_H
#define TENSAFE_VERSION_H

#define TSAFE_VERSION_MAJOR 0
#define TSAFE_VERSION_MINOR 1
#define TSAFE_VERSION_PATCH 0

#define TSAFE_VERSION_NUMBER \
    (TSAFE_VERSION_MAJOR * 10000 + TSAFE_VERSION_MINOR * 100 + TSAFE_VERSION_PATCH)

#include "tensafe/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the library actually linked (may differ from the header's). */
TSAFE_API unsigned tsafe_version_number(void);
TSAFE_API const char *tsafe_version_string(void);

#ifdef __cplusplus
}
#endif
#endif
