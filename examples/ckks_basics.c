/* CKKS basics: keygen, encrypt a vector, ct x pt, rescale, decrypt, print
 * the error. -lm is for this program's own fmax/fabs (math.h).
 * Build: cc -o ckks_basics ckks_basics.c $(pkg-config --cflags --libs tensafe-he-core) -lm */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <tensafe/tensafe.h>

#define CHECK(call)                                                            \
    do {                                                                       \
        tsafe_status st_ = (call);                                             \
        if (st_ != TSAFE_OK) {                                                 \
            fprintf(stderr, "%s: %s\n", #call, tsafe_strerror(st_));           \
            return 1;                                                          \
        }                                                                      \
    } while (0)

int main(void)
{
    tsafe_params params;
    tsafe_context *ctx = NULL;
    CHECK(tsafe_params_preset("seed-n16384", &params));
    CHECK(tsafe_context_create(&params, &ctx));
    size_t slots = tsafe_context_slots(ctx);
    uint32_t top = tsafe_context_max_level(ctx);
    printf("tensafe %s, N=%zu, log2 Q=%.1f, arithmetic: %s\n", tsafe_version_string(),
           tsafe_context_n(ctx), tsafe_context_log2_q(ctx), tsafe_context_arith_path(ctx));

    tsafe_secret_key *sk = NULL;
    CHECK(tsafe_secret_key_generate(ctx, NULL, &sk)); /* NULL: fresh CSPRNG seed */

    double *x = malloc(slots * sizeof *x), *w = malloc(slots * sizeof *w);
    double *out = malloc(slots * sizeof *out);
    if (!x || !w || !out)
        return 1;
    for (size_t i = 0; i < slots; i++) {
        x[i] = sin(0.001 * (double)i);
        w[i] = cos(0.002 * (double)i);
    }
    tsafe_plaintext *pt = NULL, *pw = NULL;
    tsafe_ciphertext *ct = NULL;
    CHECK(tsafe_plaintext_create(ctx, &pt));
    CHECK(tsafe_plaintext_create(ctx, &pw));
    CHECK(tsafe_ciphertext_create(ctx, &ct));
    CHECK(tsafe_ckks_encode(ctx, x, slots, params.scale, top, pt));
    CHECK(tsafe_ckks_encrypt_symmetric(ctx, sk, pt, NULL, ct));
    CHECK(tsafe_ckks_encode(ctx, w, slots, params.scale, top, pw));
    CHECK(tsafe_ckks_mul_plain(ctx, ct, pw, ct)); /* scale 2^80 */
    CHECK(tsafe_ckks_rescale(ctx, ct, ct));       /* back to ~2^40, one level down */
    CHECK(tsafe_ckks_decrypt(ctx, sk, ct, pt));
    CHECK(tsafe_ckks_decode(ctx, pt, out, slots));

    double worst = 0;
    for (size_t i = 0; i < slots; i++)
        worst = fmax(worst, fabs(out[i] - x[i] * w[i]));
    printf("x*w over %zu slots: level %u, scale 2^%.2f, max abs error %.3g\n", slots,
           tsafe_ciphertext_level(ct), log2(tsafe_ciphertext_scale(ct)), worst);

    tsafe_ciphertext_free(ct);
    tsafe_plaintext_free(pt);
    tsafe_plaintext_free(pw);
    tsafe_secret_key_free(sk);
    tsafe_context_free(ctx);
    free(x);
    free(w);
    free(out);
    return worst < 1e-6 ? 0 : 1;
}
