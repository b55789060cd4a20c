/* Several adapters per server (lora_session.h, docs/PROTOCOL.md "Several
 * adapters per server"): the client's SELECT frame names an adapter id
 * before the server's HELLO; the server session chooses its service by
 * it. Also the host's view of a session's boundaries (partial, idle) and
 * the ERROR frame a host sends when it refuses a connection. */
#include <stdio.h>
#include <string.h>

#include "client_internal.h"
#include "server_internal.h"
#include "tsafe_check.h"

int tsafe_sess_adapter_id_ok(const char *id, size_t len)
{
    if (!id || !len || len > TSAFE_SESSION_MAX_ADAPTER_ID)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (id[i] < 0x21 || id[i] > 0x7e)
            return 0;
    return 1;
}

tsafe_status tsafe_session_server_create_select(const tsafe_session_service *const *svcs,
                                                size_t n, const tsafe_session_limits *lim,
                                                tsafe_session_server **out)
{
    TSAFE_REQUIRE(out, TSAFE_E_NULL);
    *out = NULL;
    TSAFE_REQUIRE(svcs, TSAFE_E_NULL);
    TSAFE_REQUIRE(n >= 1 && n <= TSAFE_SESSION_MAX_MODULES, TSAFE_E_RANGE);
    for (size_t i = 0; i < n; i++) {
        TSAFE_REQUIRE(svcs[i], TSAFE_E_NULL);
        TSAFE_REQUIRE(n == 1 || svcs[i]->adapter_id[0], TSAFE_E_ARG);
        for (size_t k = 0; k < i; k++)
            TSAFE_REQUIRE(strcmp(svcs[i]->adapter_id, svcs[k]->adapter_id), TSAFE_E_ARG);
    }
    tsafe_session_server *s = NULL;
    tsafe_status st = tsafe_sess_server_alloc(lim, &s);
    if (st != TSAFE_OK)
        return st;
    s->select_ok = 1;
    if (n == 1)
        st = tsafe_sess_server_open(s, svcs[0]);
    else {
        s->choices = svcs;
        s->n_choices = n;
    }
    if (st != TSAFE_OK) {
        tsafe_session_server_free(s);
        return st;
    }
    *out = s;
    return TSAFE_OK;
}

/* The service named by the id, or NULL (a single service: its own id). */
static const tsafe_session_service *chosen(const tsafe_session_server *s, const char *id)
{
    if (s->svc)
        return !strcmp(s->svc->adapter_id, id) ? s->svc : NULL;
    for (size_t i = 0; i < s->n_choices; i++)
        if (!strcmp(s->choices[i]->adapter_id, id))
            return s->choices[i];
    return NULL;
}

void tsafe_sess_server_select(tsafe_session_server *s)
{
    char id[TSAFE_SESSION_MAX_ADAPTER_ID + 1];
    if (!s->select_ok) {
        tsafe_sess_server_unexpected(s, s->svc ? "no SELECT after the first frame" : "SELECT");
        return;
    }
    s->select_ok = 0;
    if (!tsafe_sess_adapter_id_ok((const char *)s->in.body, s->in.len)) {
        tsafe_sess_session_fail(&s->end, &s->out, TSAFE_E_FORMAT, "SELECT: malformed adapter id",
                                "SELECT: malformed adapter id (%u bytes)", s->in.len);
        return;
    }
    memcpy(id, s->in.body, s->in.len);
    id[s->in.len] = 0;
    const tsafe_session_service *svc = chosen(s, id);
    if (!svc) {
        char msg[SESSION_WHAT];
        snprintf(msg, sizeof msg, "adapter '%s' is not served here", id);
        tsafe_sess_session_fail(&s->end, &s->out, TSAFE_E_NOT_FOUND, msg, "%s", msg);
        return;
    }
    tsafe_status st = s->svc ? TSAFE_OK : tsafe_sess_server_open(s, svc);
    if (st != TSAFE_OK)
        tsafe_sess_session_fail(&s->end, &s->out, st, "server could not open the adapter",
                                "open adapter '%s': %s", id, tsafe_strerror(st));
}

tsafe_status tsafe_sess_client_select(tsafe_session_client *c, const char *id)
{
    size_t len = strlen(id);
    TSAFE_REQUIRE(tsafe_sess_adapter_id_ok(id, len), TSAFE_E_ARG);
    return tsafe_sess_session_outbox_push(&c->out, TSAFE_FRAME_SELECT, (const uint8_t *)id, len,
                                          NULL, 0, NULL);
}

size_t tsafe_session_server_partial(const tsafe_session_server *s)
{
    if (!s || s->in.ready)
        return 0;
    return s->in.hdr_got < TSAFE_FRAME_HEADER ? s->in.hdr_got : TSAFE_FRAME_HEADER + s->in.got;
}

int tsafe_session_server_idle(const tsafe_session_server *s)
{
    return !s || (!tsafe_session_server_partial(s) && !s->in.ready && !s->await_second &&
                  (s->work == WORK_NONE || s->work == WORK_PREPARE) &&
                  tsafe_sess_session_outbox_empty(&s->out));
}

const char *tsafe_session_server_adapter_id(const tsafe_session_server *s)
{
    return s && s->svc ? s->svc->adapter_id : "";
}

const char *tsafe_session_service_adapter_id(const tsafe_session_service *svc)
{
    return svc ? svc->adapter_id : "";
}

size_t tsafe_session_error_frame(tsafe_status st, const char *msg, uint8_t *out, size_t cap)
{
    if (!out || cap < TSAFE_SESSION_ERROR_FRAME)
        return 0;
    size_t n = tsafe_frame_error_put(out + TSAFE_FRAME_HEADER, st, msg ? msg : tsafe_strerror(st));
    tsafe_frame_header_put(out, TSAFE_FRAME_ERROR, (uint32_t)n);
    return TSAFE_FRAME_HEADER + n;
}
