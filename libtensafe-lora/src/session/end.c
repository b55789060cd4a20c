/* How a session ends, shared by both machines (session_internal.h). */
#include <stdarg.h>
#include <stdio.h>

#include "session_internal.h"

void tsafe_sess_session_fail(session_end *e, session_outbox *o, tsafe_status st, const char *peer_msg,
                  const char *fmt, ...)
{
    if (e->failed || e->done)
        return;
    e->failed = 1;
    e->st = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->what, sizeof e->what, fmt, ap);
    va_end(ap);
    if (peer_msg) /* one ERROR for the peer; nothing else will be queued */
        tsafe_sess_session_outbox_error(o, st, peer_msg);
}

unsigned tsafe_sess_session_wants(const session_end *e, const session_outbox *o, int work, int ready)
{
    unsigned w = tsafe_sess_session_outbox_empty(o) ? 0 : TSAFE_SESSION_WANT_WRITE;
    if (e->failed)
        return w | TSAFE_SESSION_FAILED;
    if (e->done)
        return w | TSAFE_SESSION_DONE;
    if (work)
        return w | TSAFE_SESSION_WANT_WORK | (work == 2 ? TSAFE_SESSION_WANT_READ : 0);
    return w | (ready ? TSAFE_SESSION_READY : TSAFE_SESSION_WANT_READ);
}

uint32_t tsafe_sess_session_max_frame(const tsafe_session_limits *lim)
{
    return lim && lim->max_frame && lim->max_frame < TSAFE_SESSION_MAX_FRAME
               ? lim->max_frame
               : TSAFE_SESSION_MAX_FRAME;
}

const char *tsafe_session_protocol_name(tsafe_session_protocol p)
{
    switch (p) {
    case TSAFE_SESSION_SEALED: return "sealed";
    case TSAFE_SESSION_SEALED_PRIVATE: return "sealed-private";
    case TSAFE_SESSION_PLAIN_ZERO_MOAI: return "plain-zero-moai";
    }
    return "unknown";
}
