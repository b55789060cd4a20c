#include "tensafe/version.h"

#define TSAFE_STR2(x) #x
#define TSAFE_STR(x) TSAFE_STR2(x)

unsigned tsafe_version_number(void) { return TSAFE_VERSION_NUMBER; }

const char *tsafe_version_string(void)
{
    return TSAFE_STR(TSAFE_VERSION_MAJOR) "." TSAFE_STR(TSAFE_VERSION_MINOR) "." TSAFE_STR(
        TSAFE_VERSION_PATCH);
}
