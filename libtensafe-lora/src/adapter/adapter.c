/* In-memory LoRA adapter: module table, queries, dW. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adapter_internal.h"
#include "detail.h"
#include "safetensors_internal.h"

static int natural_cmp(const char *a, const char *b)
{
    while (*a && *b) {
        unsigned char ca = (unsigned char)*a, cb = (unsigned char)*b;
        if (ca >= '0' && ca <= '9' && cb >= '0' && cb <= '9') {
            while (*a == '0' && a[1] >= '0' && a[1] <= '9')
                a++;
            while (*b == '0' && b[1] >= '0' && b[1] <= '9')
                b++;
            size_t la = 0, lb = 0;
            while (a[la] >= '0' && a[la] <= '9')
                la++;
            while (b[lb] >= '0' && b[lb] <= '9')
                lb++;
            if (la != lb)
                return la < lb ? -1 : 1;
            int c = memcmp(a, b, la);
            if (c)
                return c;
            a += la;
            b += lb;
            continue;
        }
        if (ca != cb)
            return ca < cb ? -1 : 1;
        a++;
        b++;
    }
    if (*a || *b)
        return *a ? 1 : -1;
    return 0;
}

int tsafe_lora_name_cmp(const char *a, const char *b)
{
    int c = natural_cmp(a, b);
    return c ? c : strcmp(a, b); /* total order: "x.01" != "x.1" */
}

/* "layers.<n>." anywhere at a component boundary -> n; else -1. */
static int parse_index_after(const char *name, const char *word, int need_more)
{
    size_t wl = strlen(word);
    for (const char *p = name; (p = strstr(p, word)) != NULL; p++) {
        if (p != name && p[-1] != '.')
            continue;
        const char *d = p + wl;
        if (*d < '0' || *d > '9')
            continue;
        long v = 0;
        const char *q = d;
        while (*q >= '0' && *q <= '9' && v < 1000000000L)
            v = v * 10 + (*q++ - '0');
        if (*q >= '0' && *q <= '9')
            continue; /* absurdly long number */
        if (*q == '.' ? 1 : (*q == '\0' && !need_more))
            return (int)v;
    }
    return -1;
}

double tsafe_lora_scale(const tsafe_lora_adapter *a, double alpha, size_t rank)
{
    return a->cfg.use_rslora ? alpha / sqrt((double)rank)
                             : alpha / (double)rank;
}

/* index of the first non-finite value (n when none); *max = largest |v| */
static size_t first_non_finite(const float *v, size_t n, double *max)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i]))
            return i;
        m = fmax(m, fabs((double)v[i]));
    }
    *max = m;
    return n;
}

tsafe_status tsafe_lora_check_values(const tsafe_lora_adapter *a, const char *name,
                                     size_t rank, size_t in_dim, size_t out_dim,
                                     const float *A, const float *B, double alpha,
                                     tsafe_error_info *err)
{
    const tsafe_status E = TSAFE_E_VALUE_RANGE;
    double ma = 0, mb = 0;
    size_t i = first_non_finite(A, rank * in_dim, &ma);
    if (i < rank * in_dim)
        return tsafe_detail(err, E, "module '%s': lora_A[%zu][%zu] is not finite (%g)", name,
                            i / in_dim, i % in_dim, (double)A[i]);
    i = first_non_finite(B, out_dim * rank, &mb);
    if (i < out_dim * rank)
        return tsafe_detail(err, E, "module '%s': lora_B[%zu][%zu] is not finite (%g)", name,
                            i / rank, i % rank, (double)B[i]);
    if (!isfinite(alpha))
        return tsafe_detail(err, E, "module '%s': alpha is not finite (%g)", name, alpha);
    double s = fabs(tsafe_lora_scale(a, alpha, rank));
    if (!(s <= FLT_MAX))
        return tsafe_detail(err, E,
                            "module '%s': scale %g (alpha %g, rank %zu%s) is beyond float32's "
                            "range (%g): its deltas would not be finite",
                            name, s, alpha, rank, a->cfg.use_rslora ? ", rsLoRA" : "",
                            (double)FLT_MAX);
    double bound = s * mb * ma * (double)rank;
    if (!(bound <= FLT_MAX))
        return tsafe_detail(err, E,
                            "module '%s': scale %g x max|B| %g x max|A| %g x rank %zu = %g is "
                            "beyond float32's range (%g): the delta weight s*B*A would not be "
                            "finite",
                            name, s, mb, ma, rank, bound, (double)FLT_MAX);
    return TSAFE_OK;
}

tsafe_status tsafe_lora_adapter_create(const tsafe_lora_config *cfg,
                                       tsafe_lora_adapter **out)
{
    if (!cfg || !out)
        return TSAFE_E_NULL;
    *out = NULL;
    if (cfg->r == 0 || !isfinite(cfg->lora_alpha))
        return TSAFE_E_ARG;
    tsafe_lora_adapter *a = calloc(1, sizeof *a);
    if (!a)
        return TSAFE_E_NOMEM;
    a->cfg = *cfg;
    a->cfg.use_rslora = cfg->use_rslora != 0;
    a->cfg.fan_in_fan_out = cfg->fan_in_fan_out != 0;
    *out = a;
    return TSAFE_OK;
}

void tsafe_lora_adapter_free(tsafe_lora_adapter *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++) {
        free(a->m[i].name);
        free(a->m[i].A);
        free(a->m[i].B);
    }
    free(a->m);
    for (size_t i = 0; i < a->n_targets; i++)
        free(a->targets[i]);
    free(a->targets);
    free(a->origin_path);
    free(a);
}

tsafe_status tsafe_lora_adapter_set_unsigned_path(tsafe_lora_adapter *a, const char *path)
{
    char *copy = path ? strdup(path) : NULL;
    if (path && !copy)
        return TSAFE_E_NOMEM;
    free(a->origin_path);
    memset(&a->origin, 0, sizeof a->origin);
    a->origin.kind = TSAFE_LORA_ORIGIN_UNSIGNED;
    a->origin_path = copy;
    a->origin.path = copy;
    return TSAFE_OK;
}

tsafe_status tsafe_lora_adapter_origin(const tsafe_lora_adapter *a, tsafe_lora_origin *out)
{
    if (!a || !out)
        return TSAFE_E_NULL;
    *out = a->origin;
    return TSAFE_OK;
}

/* Lower bound of name in the sorted table; *found set when equal. */
static size_t lower_bound(const tsafe_lora_adapter *a, const char *name,
                          int *found)
{
    size_t lo = 0, hi = a->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tsafe_lora_name_cmp(a->m[mid].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < a->n && tsafe_lora_name_cmp(a->m[lo].name, name) == 0;
    return lo;
}

/* Validates a module and fills *m (name copied; A, B adopted). */
static tsafe_status make_mod(const tsafe_lora_adapter *a, const char *name,
                             size_t rank, size_t in_dim, size_t out_dim,
                             float *A, float *B, double alpha, tsafe_dtype src,
                             tsafe_lora_mod *m)
{
    size_t na, nb;
    if (!name[0] || !tsafe_utf8_valid((const uint8_t *)name, strlen(name)))
        return TSAFE_E_ARG;
    if (rank == 0 || in_dim == 0 || out_dim == 0)
        return TSAFE_E_ARG;
    if (!tsafe_mul_size(rank, in_dim, &na) || !tsafe_mul_size(rank, out_dim, &nb))
        return TSAFE_E_SIZE_OVERFLOW;
    (void)nb;
    tsafe_status st = tsafe_lora_check_values(a, name, rank, in_dim, out_dim, A, B, alpha, NULL);
    if (st != TSAFE_OK)
        return st;
    char *nm = strdup(name);
    if (!nm)
        return TSAFE_E_NOMEM;
    memset(m, 0, sizeof *m);
    m->name = nm;
    const char *dot = strrchr(nm, '.');
    m->proj = dot ? dot + 1 : nm;
    m->layer = parse_index_after(nm, "layers.", 1);
    m->expert = parse_index_after(nm, "experts.", 1);
    m->rank = rank;
    m->in_dim = in_dim;
    m->out_dim = out_dim;
    m->alpha = alpha;
    m->scale = tsafe_lora_scale(a, alpha, rank);
    m->source_dtype = src;
    m->A = A;
    m->B = B;
    return TSAFE_OK;
}

static tsafe_status reserve(tsafe_lora_adapter *a)
{
    if (a->n < a->cap)
        return TSAFE_OK;
    size_t nc = a->cap ? 2 * a->cap : 16;
    if (nc > SIZE_MAX / sizeof *a->m)
        return TSAFE_E_SIZE_OVERFLOW;
    tsafe_lora_mod *nm = realloc(a->m, nc * sizeof *nm);
    if (!nm)
        return TSAFE_E_NOMEM;
    a->m = nm;
    a->cap = nc;
    return TSAFE_OK;
}

tsafe_status tsafe_lora_adapter_insert(tsafe_lora_adapter *a, const char *name,
                                       size_t rank, size_t in_dim,
                                       size_t out_dim, float *A, float *B,
                                       double alpha, tsafe_dtype src)
{
    int found;
    size_t pos = lower_bound(a, name, &found);
    if (found)
        return TSAFE_E_ARG;
    tsafe_status st = reserve(a);
    if (st != TSAFE_OK)
        return st;
    tsafe_lora_mod m;
    st = make_mod(a, name, rank, in_dim, out_dim, A, B, alpha, src, &m);
    if (st != TSAFE_OK)
        return st;
    memmove(&a->m[pos + 1], &a->m[pos], (a->n - pos) * sizeof *a->m);
    a->m[pos] = m;
    a->n++;
    return TSAFE_OK;
}

tsafe_status tsafe_lora_adapter_append(tsafe_lora_adapter *a, const char *name,
                                       size_t rank, size_t in_dim,
                                       size_t out_dim, float *A, float *B,
                                       double alpha, tsafe_dtype src)
{
    tsafe_status st = reserve(a);
    if (st != TSAFE_OK)
        return st;
    st = make_mod(a, name, rank, in_dim, out_dim, A, B, alpha, src, &a->m[a->n]);
    if (st != TSAFE_OK)
        return st;
    a->n++;
    return TSAFE_OK;
}

static int cmp_mods(const void *x, const void *y)
{
    return tsafe_lora_name_cmp(((const tsafe_lora_mod *)x)->name,
                               ((const tsafe_lora_mod *)y)->name);
}

tsafe_status tsafe_lora_adapter_finish(tsafe_lora_adapter *a)
{
    if (a->n > 1)
        qsort(a->m, a->n, sizeof *a->m, cmp_mods);
    for (size_t i = 1; i < a->n; i++)
        if (tsafe_lora_name_cmp(a->m[i - 1].name, a->m[i].name) == 0)
            return TSAFE_E_ADAPTER;
    return TSAFE_OK;
}

/* Names a PEFT round trip reproduces: no PEFT prefix, no LoRA/wrapper
 * components, not a fused-expert module path. */
static int canonical_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || name[0] == '.' || name[n - 1] == '.' || strstr(name, ".."))
        return 0;
    if (strncmp(name, "base_model.model.", 17) == 0 ||
        strncmp(name, "model.", 6) == 0 ||
        strncmp(name, "language_model.", 15) == 0)
        return 0;
    if (strstr(name, "base_layer") || strstr(name, "lora_"))
        return 0;
    if (strcmp(name, "experts") == 0 ||
        (n > 8 && strcmp(name + n - 8, ".experts") == 0))
        return 0;
    return 1;
}

tsafe_status tsafe_lora_adapter_add_module(tsafe_lora_adapter *a,
                                           const char *name, size_t rank,
                                           size_t in_dim, size_t out_dim,
                                           const float *A, const float *B,
                                           double alpha)
{
    if (!a || !name || !A || !B)
        return TSAFE_E_NULL;
    size_t na, nb;
    if (rank == 0 || in_dim == 0 || out_dim == 0 || !canonical_ok(name))
        return TSAFE_E_ARG;
    if (!tsafe_mul_size(rank, in_dim, &na) || !tsafe_mul_size(rank, out_dim, &nb) ||
        na > SIZE_MAX / sizeof(float) || nb > SIZE_MAX / sizeof(float))
        return TSAFE_E_SIZE_OVERFLOW;
    float *ca = malloc(na * sizeof *ca), *cb = malloc(nb * sizeof *cb);
    if (!ca || !cb) {
        free(ca);
        free(cb);
        return TSAFE_E_NOMEM;
    }
    memcpy(ca, A, na * sizeof *ca);
    memcpy(cb, B, nb * sizeof *cb);
    tsafe_status st = tsafe_lora_adapter_insert(a, name, rank, in_dim, out_dim,
                                                ca, cb, alpha, TSAFE_DTYPE_F32);
    if (st != TSAFE_OK) {
        free(ca);
        free(cb);
    }
    return st;
}

tsafe_status tsafe_lora_adapter_config(const tsafe_lora_adapter *a,
                                       tsafe_lora_config *out)
{
    if (!a || !out)
        return TSAFE_E_NULL;
    *out = a->cfg;
    return TSAFE_OK;
}

size_t tsafe_lora_adapter_target_count(const tsafe_lora_adapter *a)
{
    return a ? a->n_targets : 0;
}

const char *tsafe_lora_adapter_target(const tsafe_lora_adapter *a, size_t i)
{
    return (a && i < a->n_targets) ? a->targets[i] : NULL;
}

size_t tsafe_lora_adapter_module_count(const tsafe_lora_adapter *a)
{
    return a ? a->n : 0;
}

tsafe_status tsafe_lora_adapter_module(const tsafe_lora_adapter *a, size_t i,
                                       tsafe_lora_module_info *out)
{
    if (!a || !out)
        return TSAFE_E_NULL;
    if (i >= a->n)
        return TSAFE_E_RANGE;
    const tsafe_lora_mod *m = &a->m[i];
    out->name = m->name;
    out->proj = m->proj;
    out->layer = m->layer;
    out->expert = m->expert;
    out->rank = m->rank;
    out->in_dim = m->in_dim;
    out->out_dim = m->out_dim;
    out->alpha = m->alpha;
    out->scale = m->scale;
    out->source_dtype = m->source_dtype;
    out->A = m->A;
    out->B = m->B;
    return TSAFE_OK;
}

tsafe_status tsafe_lora_adapter_find(const tsafe_lora_adapter *a,
                                     const char *name, size_t *index)
{
    if (!a || !name || !index)
        return TSAFE_E_NULL;
    int found;
    size_t pos = lower_bound(a, name, &found);
    if (!found)
        return TSAFE_E_NOT_FOUND;
    *index = pos;
    return TSAFE_OK;
}

tsafe_status tsafe_lora_module_delta_w(const tsafe_lora_module_info *m,
                                       double *out)
{
    if (!m || !out || !m->A || !m->B)
        return TSAFE_E_NULL;
    size_t cells;
    if (!tsafe_mul_size(m->out_dim, m->in_dim, &cells))
        return TSAFE_E_SIZE_OVERFLOW;
    memset(out, 0, cells * sizeof *out);
    for (size_t o = 0; o < m->out_dim; o++) {
        double *row = out + o * m->in_dim;
        for (size_t j = 0; j < m->rank; j++) {
            double b = (double)m->B[o * m->rank + j] * m->scale;
            const float *arow = m->A + j * m->in_dim;
            for (size_t i = 0; i < m->in_dim; i++)
                row[i] += b * (double)arow[i];
        }
    }
    return TSAFE_OK;
}

tsafe_status tsafe_lora_module_apply(const tsafe_lora_module_info *m, const float *x,
                                     float *delta)
{
    if (!m || !x || !delta || !m->A || !m->B)
        return TSAFE_E_NULL;
    for (size_t j = 0; j < m->in_dim; j++)
        if (!isfinite(x[j]))
            return TSAFE_E_VALUE_RANGE;
    double *u = malloc((m->rank ? m->rank : 1) * sizeof *u);
    if (!u)
        return TSAFE_E_NOMEM;
    for (size_t r = 0; r < m->rank; r++) {
        double s = 0;
        const float *a = m->A + r * m->in_dim;
        for (size_t j = 0; j < m->in_dim; j++)
            s += (double)a[j] * x[j];
        u[r] = s;
    }
    tsafe_status st = TSAFE_OK;
    for (size_t o = 0; o < m->out_dim; o++) {
        double s = 0;
        const float *b = m->B + o * m->rank;
        for (size_t r = 0; r < m->rank; r++)
            s += (double)b[r] * u[r];
        s *= m->scale;
        /* the cast of a double beyond FLT_MAX is undefined: check first */
        if (!(fabs(s) <= FLT_MAX)) {
            st = TSAFE_E_VALUE_RANGE;
            s = 0;
        }
        delta[o] = (float)s;
    }
    free(u);
    return st;
}
