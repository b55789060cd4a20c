#include "init.h"

#include <sodium.h>

tsafe_status tsafe_sodium_ready(void)
{
    return sodium_init() < 0 ? TSAFE_E_CRYPTO : TSAFE_OK;
}
