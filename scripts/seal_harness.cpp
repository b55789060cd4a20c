// Microsoft SEAL side of scripts/bench-vs-seal.sh: the operations of the
// `tensafe bench` core rows and the per-token HE-LoRA delta, at the seed
// preset (CKKS, N=16384, primes [60,40,40,60], the last one special, scale
// 2^40), one thread, medians in µs. Output: one TSV row per operation,
// "seal<TAB>name<TAB>median_us", names matching the script's table.
//
// The LoRA row is the plain SEAL pipeline for u = A·x, δ = B·u with d=2048,
// r=32: x replicated into the 8192 slots (4 copies), A's 32 rows packed 4 per
// plaintext (8 plaintexts, encoded and in NTT form once, at setup); per
// token: encode + encrypt x (secret key), 8 × (multiply_plain, rescale,
// decrypt, decode, sum each 2048-slot segment), then δ = B·u in plaintext.
//
// Build (the script does this): c++ -std=c++17 -O3 -DNDEBUG
//   -I<SEAL install>/include/SEAL-4.x seal_harness.cpp <...>/libseal-4.x.a
#include <seal/seal.h>
#include <seal/util/ntt.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

namespace {

double now_us()
{
    using clk = std::chrono::steady_clock;
    return std::chrono::duration<double, std::micro>(clk::now().time_since_epoch()).count();
}

// Median of reps timed calls after warmup untimed ones; reps sized to about
// 250 ms per row (11..2001), as `tensafe bench core` does.
double median_us(const std::function<void()> &fn, int min_reps = 11, int max_reps = 2001)
{
    double t0 = now_us();
    fn();
    double one = now_us() - t0;
    int reps = one > 0 ? static_cast<int>(250e3 / one) : max_reps;
    reps = std::clamp(reps, min_reps, max_reps);
    for (int i = 0; i < 2; i++)
        fn();
    std::vector<double> t(static_cast<size_t>(reps));
    for (auto &v : t) {
        double a = now_us();
        fn();
        v = now_us() - a;
    }
    std::sort(t.begin(), t.end());
    size_t m = t.size() / 2;
    return t.size() % 2 ? t[m] : 0.5 * (t[m - 1] + t[m]);
}

void row(const char *name, double us)
{
    std::printf("seal\t%s\t%.3f\n", name, us);
    std::fflush(stdout);
}

} // namespace

int main()
{
    using namespace seal;
    const size_t n = 16384, slots = n / 2, d = 2048, rank = 32;
    const double scale = std::pow(2.0, 40);

    EncryptionParameters parms(scheme_type::ckks);
    parms.set_poly_modulus_degree(n);
    parms.set_coeff_modulus(CoeffModulus::Create(n, {60, 40, 40, 60}));
    SEALContext context(parms, true, sec_level_type::tc128);
    if (!context.parameters_set()) {
        std::fprintf(stderr, "seal_harness: SEAL refused the parameters: %s\n",
                     context.parameter_error_message());
        return 1;
    }
    std::printf("# SEAL %d.%d.%d, N=%zu, primes [60,40,40,60], scale 2^40\n", SEAL_VERSION_MAJOR,
                SEAL_VERSION_MINOR, SEAL_VERSION_PATCH, n);

    KeyGenerator keygen(context);
    SecretKey sk = keygen.secret_key();
    Encryptor encryptor(context, sk);
    Decryptor decryptor(context, sk);
    Evaluator evaluator(context);
    CKKSEncoder encoder(context);

    std::mt19937_64 rng(12345);
    std::uniform_real_distribution<double> unit(-1.0, 1.0);

    // ---- NTT of one limb: the first data prime (60 bits) and the second
    // (40 bits; SEAL without HEXL runs the same 64-bit code for both)
    for (size_t i = 0; i < 2; i++) {
        auto cd = context.first_context_data();
        const util::NTTTables &t = cd->small_ntt_tables()[i];
        uint64_t q = cd->parms().coeff_modulus()[i].value();
        std::vector<uint64_t> limb(n);
        for (auto &v : limb)
            v = rng() % q;
        const bool b60 = i == 0;
        row(b60 ? "ntt forward (1 limb) 60b" : "ntt forward (1 limb) 40b",
            median_us([&] { util::ntt_negacyclic_harvey(limb.data(), t); }));
        row(b60 ? "ntt inverse (1 limb) 60b" : "ntt inverse (1 limb) 40b",
            median_us([&] { util::inverse_ntt_negacyclic_harvey(limb.data(), t); }));
    }

    // ---- core operations at the top level (3 data primes)
    std::vector<double> values(slots), decoded;
    for (auto &v : values)
        v = unit(rng);
    Plaintext pt, pt_mul, dec;
    Ciphertext ct, prod, out;
    encoder.encode(values, scale, pt);
    encoder.encode(values, scale, pt_mul);
    encryptor.encrypt_symmetric(pt, ct);
    evaluator.multiply_plain(ct, pt_mul, prod);

    row("encode", median_us([&] { encoder.encode(values, scale, pt); }));
    row("decode", median_us([&] { encoder.decode(pt, decoded); }));
    row("encrypt (secret key)", median_us([&] { encryptor.encrypt_symmetric(pt, out); }));
    row("ct x pt", median_us([&] { evaluator.multiply_plain(ct, pt_mul, out); }));
    row("rescale", median_us([&] { evaluator.rescale_to_next(prod, out); }));
    row("decrypt + decode (top)", median_us([&] {
            decryptor.decrypt(ct, dec);
            encoder.decode(dec, decoded);
        }));

    // ---- per-token HE-LoRA delta, d=2048, r=32, 8 batches of 4 rows
    {
        const size_t rows_per_pt = slots / d, batches = rank / rows_per_pt;
        std::vector<float> A(rank * d), B(d * rank), x(d), u(rank), delta(d);
        for (auto &v : A)
            v = static_cast<float>(0.05 * unit(rng));
        for (auto &v : B)
            v = static_cast<float>(0.05 * unit(rng));
        for (auto &v : x)
            v = static_cast<float>(unit(rng));
        std::vector<Plaintext> a_pts(batches);
        std::vector<double> packed(slots);
        for (size_t b = 0; b < batches; b++) {
            for (size_t j = 0; j < rows_per_pt; j++)
                for (size_t i = 0; i < d; i++)
                    packed[j * d + i] = A[(b * rows_per_pt + j) * d + i];
            encoder.encode(packed, scale, a_pts[b]);
        }
        Ciphertext x_ct, p, r;
        Plaintext y;
        std::vector<double> xs(slots), ys;
        auto token = [&] {
            for (size_t j = 0; j < rows_per_pt; j++)
                for (size_t i = 0; i < d; i++)
                    xs[j * d + i] = x[i];
            encoder.encode(xs, scale, y);
            encryptor.encrypt_symmetric(y, x_ct);
            for (size_t b = 0; b < batches; b++) {
                evaluator.multiply_plain(x_ct, a_pts[b], p);
                evaluator.rescale_to_next(p, r);
                decryptor.decrypt(r, y);
                encoder.decode(y, ys);
                for (size_t j = 0; j < rows_per_pt; j++) {
                    double s = 0;
                    for (size_t i = 0; i < d; i++)
                        s += ys[j * d + i];
                    u[b * rows_per_pt + j] = static_cast<float>(s);
                }
            }
            for (size_t o = 0; o < d; o++) {
                float s = 0;
                for (size_t k = 0; k < rank; k++)
                    s += B[o * rank + k] * u[k];
                delta[o] = s;
            }
        };
        token();
        // correctness guard: u must match A·x in plaintext
        double worst = 0;
        for (size_t k = 0; k < rank; k++) {
            double s = 0;
            for (size_t i = 0; i < d; i++)
                s += static_cast<double>(A[k * d + i]) * x[i];
            worst = std::max(worst, std::abs(s - u[k]));
        }
        if (worst > 1e-3) {
            std::fprintf(stderr, "seal_harness: LoRA u differs from A·x by %g\n", worst);
            return 1;
        }
        row("lora delta d=2048 r=32 (8 products)", median_us(token, 41, 41));
    }
    return 0;
}
