/* Slots of reference-counted entries; hot-swap; lock-free metering. One
 * mutex guards the slot table and the list of adapter meters; entry and
 * meter lifetimes are C11 atomic reference counts. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tensafe/lora_registry.h"

enum { C_TOKENS, C_HE_OPS, C_BYTES_IN, C_BYTES_OUT, C_COUNT };

/* Counters shared by entries (and the registry): a slot's or an
 * (adapter id, price) pair's. */
typedef struct meter {
    _Atomic uint64_t c[C_COUNT];
    atomic_size_t refs;
    char *adapter_id; /* adapter meters only */
    double price;
    struct meter *next; /* registry's adapter list (under the mutex) */
} meter;

struct tsafe_registry_ref { /* an entry */
    atomic_size_t refs;
    void *object;
    tsafe_registry_destroy_fn destroy;
    char *adapter_id;
    double price;
    uint64_t generation;
    tsafe_lora_origin origin; /* path points at origin_path */
    char *origin_path;
    meter *adapter_meter;
    meter *slot_meter;
};

typedef struct slot {
    char *name;
    tsafe_registry_ref *current; /* NULL when empty */
    meter *m;
} slot;

struct tsafe_registry {
    pthread_mutex_t mu;
    slot *slots;
    size_t n_slots, cap_slots;
    meter *adapters;
    uint64_t generation;
    atomic_int allow_unsigned; /* 0: put refuses unsigned origins */
};

/* ------------------------------------------------------------ helpers */

/* Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF): names go into
 * the JSON export. */
static int utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        unsigned min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            len = 2, min = 0x80, c &= 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3, min = 0x800, c &= 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4, min = 0x10000, c &= 0x07;
        } else {
            return 0;
        }
        if (n - i < len)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            c = (c << 6) | (s[i + k] & 0x3f);
        }
        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

static int valid_name(const char *s)
{
    if (!s)
        return 0;
    size_t n = strnlen(s, TSAFE_REGISTRY_MAX_NAME + 1);
    return n > 0 && n <= TSAFE_REGISTRY_MAX_NAME &&
           utf8_valid((const unsigned char *)s, n);
}

static meter *meter_new(const char *adapter_id, double price)
{
    meter *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    if (adapter_id && !(m->adapter_id = strdup(adapter_id))) {
        free(m);
        return NULL;
    }
    m->price = price;
    for (int i = 0; i < C_COUNT; i++)
        atomic_init(&m->c[i], 0);
    atomic_init(&m->refs, 1);
    return m;
}

static void meter_retain(meter *m)
{
    atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
}

static void meter_release(meter *m)
{
    if (m && atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) == 1) {
        free(m->adapter_id);
        free(m);
    }
}

static void meter_read(const meter *m, tsafe_registry_counters *out)
{
    out->tokens = atomic_load_explicit(&m->c[C_TOKENS], memory_order_relaxed);
    out->he_ops = atomic_load_explicit(&m->c[C_HE_OPS], memory_order_relaxed);
    out->bytes_in = atomic_load_explicit(&m->c[C_BYTES_IN], memory_order_relaxed);
    out->bytes_out = atomic_load_explicit(&m->c[C_BYTES_OUT], memory_order_relaxed);
}

static void entry_release(tsafe_registry_ref *e)
{
    if (!e || atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (e->destroy)
        e->destroy(e->object);
    meter_release(e->adapter_meter);
    meter_release(e->slot_meter);
    free(e->adapter_id);
    free(e->origin_path);
    free(e);
}

static slot *find_slot(tsafe_registry *reg, const char *name)
{
    for (size_t i = 0; i < reg->n_slots; i++)
        if (strcmp(reg->slots[i].name, name) == 0)
            return &reg->slots[i];
    return NULL;
}

/* Under the mutex. */
static slot *get_or_add_slot(tsafe_registry *reg, const char *name)
{
    slot *s = find_slot(reg, name);
    if (s)
        return s;
    if (reg->n_slots == reg->cap_slots) {
        size_t cap = reg->cap_slots ? 2 * reg->cap_slots : 8;
        if (cap > SIZE_MAX / sizeof(slot))
            return NULL;
        slot *ns = realloc(reg->slots, cap * sizeof *ns);
        if (!ns)
            return NULL;
        reg->slots = ns;
        reg->cap_slots = cap;
    }
    slot fresh = {0};
    fresh.name = strdup(name);
    fresh.m = meter_new(NULL, 0.0);
    if (!fresh.name || !fresh.m) {
        free(fresh.name);
        meter_release(fresh.m);
        return NULL;
    }
    reg->slots[reg->n_slots] = fresh;
    return &reg->slots[reg->n_slots++];
}

/* Under the mutex. Exact (id, price) match: a new price is a new row. */
static meter *get_or_add_adapter(tsafe_registry *reg, const char *id,
                                 double price)
{
    for (meter *m = reg->adapters; m; m = m->next)
        if (m->price == price && strcmp(m->adapter_id, id) == 0)
            return m;
    meter *m = meter_new(id, price);
    if (!m)
        return NULL;
    meter **tail = &reg->adapters; /* keep insertion order for the JSON */
    while (*tail)
        tail = &(*tail)->next;
    *tail = m;
    return m;
}

/* ----------------------------------------------------------- lifecycle */

tsafe_status tsafe_registry_create(tsafe_registry **out)
{
    if (!out)
        return TSAFE_E_NULL;
    *out = NULL;
    tsafe_registry *reg = calloc(1, sizeof *reg);
    if (!reg)
        return TSAFE_E_NOMEM;
    if (pthread_mutex_init(&reg->mu, NULL) != 0) {
        free(reg);
        return TSAFE_E_NOMEM;
    }
    atomic_init(&reg->allow_unsigned, 0);
    *out = reg;
    return TSAFE_OK;
}

void tsafe_registry_free(tsafe_registry *reg)
{
    if (!reg)
        return;
    for (size_t i = 0; i < reg->n_slots; i++) {
        entry_release(reg->slots[i].current);
        meter_release(reg->slots[i].m);
        free(reg->slots[i].name);
    }
    free(reg->slots);
    for (meter *m = reg->adapters, *next; m; m = next) {
        next = m->next;
        meter_release(m);
    }
    pthread_mutex_destroy(&reg->mu);
    free(reg);
}

tsafe_status tsafe_registry_set_allow_unsigned(tsafe_registry *reg, int allow)
{
    if (!reg)
        return TSAFE_E_NULL;
    atomic_store(&reg->allow_unsigned, allow != 0);
    return TSAFE_OK;
}

/* An origin put accepts as well-formed (not yet the policy). */
static int valid_origin(const tsafe_lora_origin *o)
{
    if (!o)
        return 1;
    if (o->kind == TSAFE_LORA_ORIGIN_SIGNED)
        return 1;
    if (o->kind != TSAFE_LORA_ORIGIN_UNSIGNED)
        return 0;
    if (!o->path)
        return 1;
    size_t n = strnlen(o->path, TSAFE_REGISTRY_MAX_PATH + 1);
    return n > 0 && n <= TSAFE_REGISTRY_MAX_PATH &&
           utf8_valid((const unsigned char *)o->path, n);
}

static void entry_free_unused(tsafe_registry_ref *e)
{
    free(e->adapter_id);
    free(e->origin_path);
    free(e);
}

tsafe_status tsafe_registry_put(tsafe_registry *reg, const char *slot_name,
                                void *object, tsafe_registry_destroy_fn destroy,
                                const tsafe_registry_meta *meta)
{
    if (!reg || !slot_name || !meta)
        return TSAFE_E_NULL;
    const tsafe_lora_origin *o = meta->origin;
    if (!valid_name(slot_name) || !valid_name(meta->adapter_id) ||
        !(meta->price_per_1k_tokens >= 0.0) || !isfinite(meta->price_per_1k_tokens) ||
        !valid_origin(o))
        return TSAFE_E_ARG;
    int is_signed = o && o->kind == TSAFE_LORA_ORIGIN_SIGNED;
    if (!is_signed && !atomic_load(&reg->allow_unsigned))
        return TSAFE_E_UNSIGNED;
    tsafe_registry_ref *e = calloc(1, sizeof *e);
    if (!e)
        return TSAFE_E_NOMEM;
    e->adapter_id = strdup(meta->adapter_id);
    if (o)
        e->origin = *o;
    e->origin.kind = is_signed ? TSAFE_LORA_ORIGIN_SIGNED : TSAFE_LORA_ORIGIN_UNSIGNED;
    e->origin.path = NULL; /* a signed origin carries no path, whatever was passed */
    if (!is_signed) {
        memset(e->origin.package_digest, 0, sizeof e->origin.package_digest);
        memset(e->origin.signer_key, 0, sizeof e->origin.signer_key);
        if (o && o->path)
            e->origin.path = e->origin_path = strdup(o->path);
    }
    if (!e->adapter_id || (!is_signed && o && o->path && !e->origin_path)) {
        entry_free_unused(e);
        return TSAFE_E_NOMEM;
    }
    e->object = object;
    e->destroy = destroy;
    e->price = meta->price_per_1k_tokens;
    atomic_init(&e->refs, 1); /* the slot's reference */

    pthread_mutex_lock(&reg->mu);
    slot *s = get_or_add_slot(reg, slot_name);
    meter *am = s ? get_or_add_adapter(reg, e->adapter_id, e->price) : NULL;
    if (!s || !am) {
        pthread_mutex_unlock(&reg->mu);
        entry_free_unused(e);
        return TSAFE_E_NOMEM;
    }
    meter_retain(am);
    meter_retain(s->m);
    e->adapter_meter = am;
    e->slot_meter = s->m;
    e->generation = ++reg->generation;
    tsafe_registry_ref *old = s->current;
    s->current = e;
    pthread_mutex_unlock(&reg->mu);

    entry_release(old); /* destroy outside the lock */
    return TSAFE_OK;
}

tsafe_status tsafe_registry_remove(tsafe_registry *reg, const char *slot_name)
{
    if (!reg || !slot_name)
        return TSAFE_E_NULL;
    pthread_mutex_lock(&reg->mu);
    slot *s = find_slot(reg, slot_name);
    tsafe_registry_ref *old = s ? s->current : NULL;
    if (s)
        s->current = NULL;
    pthread_mutex_unlock(&reg->mu);
    if (!old)
        return TSAFE_E_NOT_FOUND;
    entry_release(old);
    return TSAFE_OK;
}

tsafe_status tsafe_registry_acquire(tsafe_registry *reg, const char *slot_name,
                                    tsafe_registry_ref **ref)
{
    if (!ref)
        return TSAFE_E_NULL;
    *ref = NULL;
    if (!reg || !slot_name)
        return TSAFE_E_NULL;
    pthread_mutex_lock(&reg->mu);
    slot *s = find_slot(reg, slot_name);
    tsafe_registry_ref *e = s ? s->current : NULL;
    /* the slot holds a reference, so e cannot reach zero while we hold the
     * mutex: a relaxed increment is enough */
    if (e)
        atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&reg->mu);
    if (!e)
        return TSAFE_E_NOT_FOUND;
    *ref = e;
    return TSAFE_OK;
}

void tsafe_registry_release(tsafe_registry_ref *ref)
{
    entry_release(ref);
}

void *tsafe_registry_ref_object(const tsafe_registry_ref *ref)
{
    return ref ? ref->object : NULL;
}

const char *tsafe_registry_ref_adapter_id(const tsafe_registry_ref *ref)
{
    return ref ? ref->adapter_id : NULL;
}

double tsafe_registry_ref_price(const tsafe_registry_ref *ref)
{
    return ref ? ref->price : 0.0;
}

tsafe_status tsafe_registry_ref_origin(const tsafe_registry_ref *ref, tsafe_lora_origin *out)
{
    if (!ref || !out)
        return TSAFE_E_NULL;
    *out = ref->origin;
    return TSAFE_OK;
}

uint64_t tsafe_registry_ref_generation(const tsafe_registry_ref *ref)
{
    return ref ? ref->generation : 0;
}

/* ------------------------------------------------------------- metering */

tsafe_status tsafe_registry_meter(tsafe_registry_ref *ref, uint64_t tokens,
                                  uint64_t he_ops, uint64_t bytes_in,
                                  uint64_t bytes_out)
{
    if (!ref)
        return TSAFE_E_NULL;
    const uint64_t add[C_COUNT] = {tokens, he_ops, bytes_in, bytes_out};
    meter *ms[2] = {ref->adapter_meter, ref->slot_meter};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < C_COUNT; i++)
            if (add[i])
                atomic_fetch_add_explicit(&ms[k]->c[i], add[i],
                                          memory_order_relaxed);
    return TSAFE_OK;
}

tsafe_status tsafe_registry_slot_counters(tsafe_registry *reg,
                                          const char *slot_name,
                                          tsafe_registry_counters *out)
{
    if (!reg || !slot_name || !out)
        return TSAFE_E_NULL;
    pthread_mutex_lock(&reg->mu);
    slot *s = find_slot(reg, slot_name);
    if (s)
        meter_read(s->m, out);
    pthread_mutex_unlock(&reg->mu);
    return s ? TSAFE_OK : TSAFE_E_NOT_FOUND;
}

tsafe_status tsafe_registry_adapter_counters(tsafe_registry *reg,
                                             const char *adapter_id,
                                             tsafe_registry_counters *out)
{
    if (!reg || !adapter_id || !out)
        return TSAFE_E_NULL;
    tsafe_registry_counters sum = {0, 0, 0, 0}, one;
    int found = 0;
    pthread_mutex_lock(&reg->mu);
    for (meter *m = reg->adapters; m; m = m->next) {
        if (strcmp(m->adapter_id, adapter_id) != 0)
            continue;
        meter_read(m, &one);
        sum.tokens += one.tokens;
        sum.he_ops += one.he_ops;
        sum.bytes_in += one.bytes_in;
        sum.bytes_out += one.bytes_out;
        found = 1;
    }
    pthread_mutex_unlock(&reg->mu);
    if (!found)
        return TSAFE_E_NOT_FOUND;
    *out = sum;
    return TSAFE_OK;
}

static json_t *jint(uint64_t v)
{
    return json_integer(v > (uint64_t)INT64_MAX ? (json_int_t)INT64_MAX
                                                : (json_int_t)v);
}

static json_t *jhex(const uint8_t *b, size_t n)
{
    char hex[2 * 32 + 1];
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n && i < 32; i++) {
        hex[2 * i] = digits[b[i] >> 4];
        hex[2 * i + 1] = digits[b[i] & 15];
    }
    hex[2 * (n < 32 ? n : 32)] = '\0';
    return json_string(hex);
}

/* {"kind":"signed","package_digest","signer_key"} or
 * {"kind":"unsigned","path"}; NULL on allocation failure. */
static json_t *origin_json(const tsafe_lora_origin *o)
{
    json_t *j = json_object();
    int bad = !j;
    if (!bad && o->kind == TSAFE_LORA_ORIGIN_SIGNED) {
        bad |= json_object_set_new(j, "kind", json_string("signed"));
        bad |= json_object_set_new(j, "package_digest", jhex(o->package_digest, 32));
        bad |= json_object_set_new(j, "signer_key", jhex(o->signer_key, 32));
    } else if (!bad) {
        bad |= json_object_set_new(j, "kind", json_string("unsigned"));
        bad |= json_object_set_new(j, "path", o->path ? json_string(o->path) : json_null());
    }
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static int add_counters(json_t *o, const tsafe_registry_counters *c)
{
    int bad = 0;
    bad |= json_object_set_new(o, "tokens", jint(c->tokens));
    bad |= json_object_set_new(o, "he_ops", jint(c->he_ops));
    bad |= json_object_set_new(o, "bytes_in", jint(c->bytes_in));
    bad |= json_object_set_new(o, "bytes_out", jint(c->bytes_out));
    return bad;
}

tsafe_status tsafe_registry_metering_json(tsafe_registry *reg, char **json)
{
    if (!reg || !json)
        return TSAFE_E_NULL;
    *json = NULL;
    tsafe_status st = TSAFE_E_NOMEM;
    json_t *root = json_object(), *ad = json_array(), *sl = json_array();
    json_t *tot = json_object();
    tsafe_registry_counters t = {0, 0, 0, 0}, c;
    double cost_total = 0.0;
    int bad = !root || !ad || !sl || !tot;

    pthread_mutex_lock(&reg->mu);
    for (meter *m = reg->adapters; m && !bad; m = m->next) {
        meter_read(m, &c);
        double cost = (double)c.tokens / 1000.0 * m->price;
        json_t *o = json_object();
        bad |= !o || json_array_append_new(ad, o);
        if (bad)
            break;
        bad |= json_object_set_new(o, "adapter_id", json_string(m->adapter_id));
        bad |= json_object_set_new(o, "price_per_1k_tokens", json_real(m->price));
        bad |= add_counters(o, &c);
        bad |= json_object_set_new(o, "cost", json_real(cost));
        t.tokens += c.tokens;
        t.he_ops += c.he_ops;
        t.bytes_in += c.bytes_in;
        t.bytes_out += c.bytes_out;
        cost_total += cost;
    }
    for (size_t i = 0; i < reg->n_slots && !bad; i++) {
        slot *s = &reg->slots[i];
        meter_read(s->m, &c);
        json_t *o = json_object();
        bad |= !o || json_array_append_new(sl, o);
        if (bad)
            break;
        bad |= json_object_set_new(o, "slot", json_string(s->name));
        bad |= json_object_set_new(o, "adapter_id",
                                   s->current ? json_string(s->current->adapter_id)
                                              : json_null());
        bad |= json_object_set_new(o, "generation",
                                   jint(s->current ? s->current->generation : 0));
        json_t *org = s->current ? origin_json(&s->current->origin) : json_null();
        bad |= !org || json_object_set_new(o, "origin", org);
        bad |= add_counters(o, &c);
    }
    pthread_mutex_unlock(&reg->mu);

    if (!bad) {
        bad |= add_counters(tot, &t);
        bad |= json_object_set_new(tot, "cost", json_real(cost_total));
        bad |= json_object_set(root, "adapters", ad);
        bad |= json_object_set(root, "slots", sl);
        bad |= json_object_set(root, "totals", tot);
    }
    if (!bad) {
        char *s = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(17));
        if (s) {
            /* hand out a plain malloc'd copy, whatever jansson allocates with */
            size_t n = strlen(s) + 1;
            *json = malloc(n);
            if (*json) {
                memcpy(*json, s, n);
                st = TSAFE_OK;
            }
            json_malloc_t jm;
            json_free_t jf;
            json_get_alloc_funcs(&jm, &jf);
            jf(s);
        }
    }
    json_decref(root);
    json_decref(ad);
    json_decref(sl);
    json_decref(tot);
    return st;
}
