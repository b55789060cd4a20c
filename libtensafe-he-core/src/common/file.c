#include "file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

tsafe_status tsafe_read_file(const char *path, size_t cap, uint8_t **data, size_t *len)
{
    FILE *f = fopen(path, "rbe"); /* e: O_CLOEXEC */
    if (!f)
        return errno == ENOENT || errno == ENOTDIR ? TSAFE_E_NOT_FOUND : TSAFE_E_IO;
    tsafe_status st = TSAFE_OK;
    size_t n = 0, room = 4096;
    uint8_t *buf = malloc(room + 1);
    for (;;) {
        if (!buf) {
            st = TSAFE_E_NOMEM;
            break;
        }
        if (n == room) { /* full: one more byte tells whether cap is passed */
            size_t grow = room > cap - room ? cap + 1 : 2 * room;
            if (room > cap) {
                st = TSAFE_E_RANGE;
                break;
            }
            uint8_t *nb = realloc(buf, grow + 1);
            if (!nb) {
                st = TSAFE_E_NOMEM;
                break;
            }
            buf = nb;
            room = grow;
        }
        size_t got = fread(buf + n, 1, room - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (st == TSAFE_OK && ferror(f))
        st = TSAFE_E_IO;
    if (st == TSAFE_OK && n > cap)
        st = TSAFE_E_RANGE;
    fclose(f);
    if (st != TSAFE_OK) {
        free(buf);
        return st;
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return TSAFE_OK;
}
