/* A llama2.c-format language model (Karpathy's run.c, legacy float32
 * layout) run in plaintext float32, with a hook at every projection a LoRA
 * adapter can target, for `tensafe generate`.
 *
 * File: 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
 * vocab_size, seq_len; a negative vocab_size means a separate classifier),
 * then float32 tok_emb [vocab x dim], rms_att [L x dim], wq [L x dim x dim],
 * wk, wv [L x kv_dim x dim], wo [L x dim x dim], rms_ffn [L x dim],
 * w1 [L x hidden x dim], w2 [L x dim x hidden], w3 [L x hidden x dim],
 * rms_final [dim], RoPE tables (seq_len x head_size, unused: recomputed as
 * run.c does), then the classifier when not shared. Every weight matrix is
 * row-major [out, in] (y = W x).
 *
 * The hook sees each group of projections that read the same input, in
 * forward order: QKV (q, k, v of the normed x; before RoPE), O (the
 * attention output), GATE_UP (w1 = gate, w3 = up of the normed x; before
 * SiLU and the product) and DOWN (w2 = down of silu(gate) * up). It adds
 * its deltas to out[] (one buffer per projection of the group).
 *
 * Ownership: l2_model owns its weights; l2_state is per sequence. Neither
 * is thread-safe; a model may be read by several states one thread each. */
#ifndef TENSAFE_TOOL_LLAMA2_H
#define TENSAFE_TOOL_LLAMA2_H

#include <stddef.h>
#include <stdint.h>

#include "tensafe/status.h"

typedef struct {
    uint32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    uint32_t head_size, kv_dim;
    int shared_classifier;
} l2_config;

/* The seven adapter targets, in the order of L2_GROUP_SLOTS. */
typedef enum { L2_Q = 0, L2_K, L2_V, L2_O, L2_GATE, L2_UP, L2_DOWN, L2_N_PROJ } l2_proj;
typedef enum { L2_QKV = 0, L2_ATT_O, L2_GATE_UP, L2_FFN_DOWN, L2_N_GROUPS } l2_group;

/* First slot and count of each group's projections in l2_proj order. */
void l2_group_slots(l2_group g, l2_proj *first, uint32_t *count);
/* "q_proj", "k_proj", ... (the PEFT / Hugging Face module names). */
const char *l2_proj_name(l2_proj p);
/* Input width of a projection (dim, or hidden_dim for down) and output. */
uint32_t l2_proj_in(const l2_config *c, l2_proj p);
uint32_t l2_proj_out(const l2_config *c, l2_proj p);

typedef tsafe_status (*l2_hook)(void *user, uint32_t layer, l2_group g, const float *x,
                                float *const *out);

typedef struct l2_model l2_model;
typedef struct l2_state l2_state;

/* Reads and validates the file (sizes against the header, finite values).
 * TSAFE_E_NOT_FOUND / TSAFE_E_IO / TSAFE_E_FORMAT (header out of range) /
 * TSAFE_E_SHAPE (file size) / TSAFE_E_VALUE_RANGE (non-finite weight). */
tsafe_status l2_model_load(const char *path, l2_model **out);
void l2_model_free(l2_model *m);
const l2_config *l2_model_config(const l2_model *m);

tsafe_status l2_state_create(const l2_model *m, l2_state **out);
void l2_state_free(l2_state *s);
/* Feeds token at position pos (0.. seq_len-1, in order) and returns the
 * vocab_size logits (borrowed, valid until the next call). hook may be
 * NULL (base model); its error stops the step and is returned. */
tsafe_status l2_forward(l2_state *s, uint32_t token, uint32_t pos, l2_hook hook, void *user,
                        const float **logits);

#endif
