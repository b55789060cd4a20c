/* tsafe_error_info filling: formatting only, never output. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "detail.h"

void tsafe_detail_reset(tsafe_error_info *e)
{
    if (e) {
        e->status = TSAFE_OK;
        e->detail[0] = '\0';
    }
}

/* Drops a multi-byte UTF-8 sequence cut short at the end of s. */
static void trim_partial_utf8(char *s, size_t len)
{
    size_t i = len, cont = 0;
    while (i > 0 && ((unsigned char)s[i - 1] & 0xc0) == 0x80 && cont < 3) {
        i--;
        cont++;
    }
    if (i == 0)
        return;
    unsigned char lead = (unsigned char)s[i - 1];
    size_t need = lead >= 0xf0 ? 3 : lead >= 0xe0 ? 2 : lead >= 0xc0 ? 1 : 0;
    if (lead >= 0xc0 && cont < need)
        s[i - 1] = '\0';
}

tsafe_status tsafe_detail(tsafe_error_info *e, tsafe_status st, const char *fmt, ...)
{
    if (!e)
        return st;
    e->status = st;
    if (e->detail[0] != '\0')
        return st;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->detail, sizeof e->detail, fmt, ap);
    va_end(ap);
    if (n < 0)
        e->detail[0] = '\0';
    else if ((size_t)n >= sizeof e->detail)
        trim_partial_utf8(e->detail, sizeof e->detail - 1);
    for (char *p = e->detail; *p; p++) /* one line, whatever a name holds */
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return st;
}

const char *tsafe_detail_shape(char *buf, size_t cap, const uint64_t *shape, size_t ndim)
{
    size_t used = 0;
    buf[0] = '\0';
    int n = snprintf(buf, cap, "[");
    used = n > 0 ? (size_t)n : 0;
    for (size_t i = 0; i < ndim && used < cap; i++) {
        n = snprintf(buf + used, cap - used, "%s%llu", i ? ", " : "",
                     (unsigned long long)shape[i]);
        if (n < 0 || (size_t)n >= cap - used) {
            snprintf(buf, cap, "[...]");
            return buf;
        }
        used += (size_t)n;
    }
    if (used + 1 < cap)
        snprintf(buf + used, cap - used, "]");
    else
        snprintf(buf, cap, "[...]");
    return buf;
}
