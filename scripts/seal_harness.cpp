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
// The sealed rows ("sealed ...") are the round-1 sealed product of
// `tensafe bench lora`'s "HE-LoRA sealed" row written on SEAL's BFV: see
// sealed_product() below.
//
// Build (the script does this): c++ -std=c++17 -O3 -DNDEBUG
//   -I<SEAL install>/include/SEAL-4.x seal_harness.cpp <...>/libseal-4.x.a
#include <seal/seal.h>
#include <seal/util/ntt.h>
#include <seal/util/rlwe.h>
#include <seal/util/scalingvariant.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <sstream>
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

// ---- the sealed product on SEAL's BFV (round 1 of `tensafe bench lora`'s
// "HE-LoRA sealed" row, issues 11 and 12)
//
// Same shape as ours (libtensafe-lora/src/sealed/plan.c): N = 4096, Q = q0·q1
// with q0 of 49 bits (the response modulus) and q1 of 60 bits (dropped by
// the switch), t = 2^37, 13-bit x and A, d = 2048 in 4 x-chunks of 512
// coefficients, r = 32 rows in 4 blocks of 8. Coefficient encoding: chunk c
// of x at coefficients 0..511; row o of block b at o·512 + 511 - j, so that
// coefficient o·512 + 511 of x_c·A_bc holds the partial inner product of row
// o with chunk c (the other products land elsewhere or wrap below 511).
// Per block: 4 multiply_plain + add_inplace at Q, + a fresh public-key
// encryption of zero, + a uniform mask mod t at the 8 read coefficients
// (add_plain), + flooding noise uniform in [-2^70, 2^70] at those
// coefficients (as ours: it hides the A-dependent noise to 2^-40), then
// mod_switch_to_next to q0 and serialization.
//
// How SEAL's chain is used. SEAL treats the last prime of coeff_modulus as
// the key-switching "special" prime: a context on {q0, q1} keeps its keys at
// Q, but its first *data* level is q0 alone and its Evaluator refuses
// ciphertexts at the key level, so products at Q are not possible there.
// Nothing here switches keys, so two contexts share the same primes:
//  - kctx = {q0, q1} (tc128: 109 bits is the bound at N = 4096): the
//    client's keys (sk; pk at Q, as ours), its encryption at Q (what
//    Encryptor::encrypt_symmetric does, seeded, but at the key level:
//    util::encrypt_zero_symmetric + the scaling step), the server's
//    encryptions of zero (Encryptor::encrypt_zero at the key level, with the
//    public key) and the client's decryption at q0 (kctx's first data level);
//  - ectx = {q0, q1, p} (not security-checked, and harmless: no key and no
//    ciphertext ever lives at p's level): the server's Evaluator, for which Q
//    is the first data level and q0 the next. The parms_id of Q and of q0 are
//    the same in both contexts (checked below), so ciphertexts pass between
//    them unchanged.
// Masks and flooding use std::mt19937_64 (a benchmark; ours uses a CSPRNG).
int sealed_product()
{
    using namespace seal;
    const size_t n = 4096, d = 2048, rank = 32, chunk = 512;
    const size_t n_chunks = d / chunk, rows = n / chunk, n_blocks = rank / rows;
    const uint64_t t = uint64_t(1) << 37;
    const int64_t qmax = (int64_t(1) << 12) - 1; /* 13-bit signed */
    const unsigned flood_bits = 70;
    const int reps = 41;

    EncryptionParameters kp(scheme_type::bfv);
    kp.set_poly_modulus_degree(n);
    kp.set_coeff_modulus(CoeffModulus::Create(n, {49, 60}));
    kp.set_plain_modulus(t);
    SEALContext kctx(kp, true, sec_level_type::tc128);
    EncryptionParameters ep(scheme_type::bfv);
    ep.set_poly_modulus_degree(n);
    {
        /* {q0, q1} of kctx, then any other 60-bit NTT prime as the unused p */
        std::vector<Modulus> chain = kp.coeff_modulus(), two60 = CoeffModulus::Create(n, {60, 60});
        chain.push_back(two60[0] == chain[1] ? two60[1] : two60[0]);
        ep.set_coeff_modulus(chain);
    }
    ep.set_plain_modulus(t);
    SEALContext ectx(ep, true, sec_level_type::none);
    if (!kctx.parameters_set() || !ectx.parameters_set()) {
        std::fprintf(stderr, "seal_harness: SEAL refused the sealed parameters (t = 2^37): %s / %s\n",
                     kctx.parameter_error_message(), ectx.parameter_error_message());
        return 1;
    }
    const parms_id_type top = kctx.key_parms_id();
    if (ectx.first_parms_id() != top ||
        ectx.first_context_data()->next_context_data()->parms_id() != kctx.first_parms_id()) {
        std::fprintf(stderr, "seal_harness: the two sealed contexts do not share Q and q0\n");
        return 1;
    }
    const Modulus q0 = kp.coeff_modulus()[0], q1 = kp.coeff_modulus()[1];
    std::printf("# sealed: SEAL BFV N=%zu, q0=%llu (%d bits), q1=%llu (%d bits), t=2^37, "
                "d=%zu r=%zu, %zu x-chunks x %zu blocks, flood 2^%u, %d tokens\n",
                n, (unsigned long long)q0.value(), q0.bit_count(), (unsigned long long)q1.value(),
                q1.bit_count(), d, rank, n_chunks, n_blocks, flood_bits, reps);

    KeyGenerator keygen(kctx);
    SecretKey sk = keygen.secret_key();
    PublicKey pk;
    keygen.create_public_key(pk);
    Encryptor zero_enc(kctx, pk); /* the server's: it holds the client's pk */
    Decryptor decryptor(kctx, sk);
    Evaluator ev(ectx);
    auto kdata = kctx.key_context_data();

    std::mt19937_64 rng(4242);
    std::uniform_int_distribution<int64_t> q13(-qmax, qmax);
    auto mod_t = [&](int64_t v) { return static_cast<uint64_t>(v < 0 ? v + int64_t(t) : v); };
    std::vector<int64_t> x(d), A(rank * d), u(rank, 0);
    for (auto &v : x)
        v = q13(rng);
    for (auto &v : A)
        v = q13(rng);
    for (size_t k = 0; k < rank; k++)
        for (size_t i = 0; i < d; i++)
            u[k] += A[k * d + i] * x[i]; /* |u| < 2^35: exact in int64 */
    std::vector<size_t> pos(rows);
    for (size_t o = 0; o < rows; o++)
        pos[o] = o * chunk + chunk - 1;

    // the server's adapter, prepared once (as ours): reversed-row blocks,
    // in coefficient form and in NTT form at Q
    std::vector<Plaintext> a_pt(n_blocks * n_chunks), a_ntt(n_blocks * n_chunks);
    for (size_t b = 0; b < n_blocks; b++)
        for (size_t c = 0; c < n_chunks; c++) {
            Plaintext &p = a_pt[b * n_chunks + c];
            p.resize(n);
            p.set_zero();
            for (size_t o = 0; o < rows; o++)
                for (size_t j = 0; j < chunk; j++)
                    p[o * chunk + chunk - 1 - j] = mod_t(A[(b * rows + o) * d + c * chunk + j]);
            a_ntt[b * n_chunks + c] = p;
            ev.transform_to_ntt_inplace(a_ntt[b * n_chunks + c], top);
        }

    std::vector<std::string> up(n_chunks), down(n_blocks);
    std::vector<uint64_t> R(rank), share(rank);

    auto client_encrypt = [&] {
        Plaintext p(chunk);
        for (size_t c = 0; c < n_chunks; c++) {
            for (size_t j = 0; j < chunk; j++)
                p[j] = mod_t(x[c * chunk + j]);
            Ciphertext ct;
            util::encrypt_zero_symmetric(sk, kctx, top, false, true, ct);
            util::multiply_add_plain_with_scaling_variant(p, *kdata, util::RNSIter(ct.data(), n));
            std::ostringstream os;
            ct.save(os, compr_mode_type::none);
            up[c] = os.str();
        }
    };
    auto flood = [&](Ciphertext &ct, size_t at) {
        using u128 = unsigned __int128;
        const u128 span = u128(1) << (flood_bits + 1), mask = (u128(1) << (flood_bits + 2)) - 1;
        u128 v;
        do
            v = ((u128(rng()) << 64) | rng()) & mask;
        while (v > span);
        const u128 half = u128(1) << flood_bits;
        const bool neg = v < half;
        const u128 mag = neg ? half - v : v - half;
        for (size_t i = 0; i < 2; i++) {
            const Modulus &q = kp.coeff_modulus()[i];
            const uint64_t r = uint64_t(mag % q.value());
            uint64_t &c0 = ct.data(0)[i * n + at];
            c0 = util::add_uint_mod(c0, neg ? util::negate_uint_mod(r, q) : r, q);
        }
    };
    std::uniform_int_distribution<uint64_t> mod_t_uniform(0, t - 1);
    auto server = [&](bool ntt) {
        std::vector<Ciphertext> xs(n_chunks);
        for (size_t c = 0; c < n_chunks; c++) {
            std::istringstream is(up[c]);
            xs[c].load(ectx, is);
            if (ntt)
                ev.transform_to_ntt_inplace(xs[c]);
        }
        Ciphertext acc, prod, zero;
        Plaintext mask(n);
        for (size_t b = 0; b < n_blocks; b++) {
            const std::vector<Plaintext> &a = ntt ? a_ntt : a_pt;
            ev.multiply_plain(xs[0], a[b * n_chunks], acc);
            for (size_t c = 1; c < n_chunks; c++) {
                ev.multiply_plain(xs[c], a[b * n_chunks + c], prod);
                ev.add_inplace(acc, prod);
            }
            if (ntt)
                ev.transform_from_ntt_inplace(acc);
            zero_enc.encrypt_zero(top, zero);
            ev.add_inplace(acc, zero);
            mask.set_zero();
            for (size_t o = 0; o < rows; o++)
                mask[pos[o]] = R[b * rows + o] = mod_t_uniform(rng);
            ev.add_plain_inplace(acc, mask);
            for (size_t o = 0; o < rows; o++)
                flood(acc, pos[o]);
            ev.mod_switch_to_next_inplace(acc);
            std::ostringstream os;
            acc.save(os, compr_mode_type::none);
            down[b] = os.str();
        }
    };
    auto client_decrypt = [&] {
        Ciphertext ct;
        Plaintext p;
        for (size_t b = 0; b < n_blocks; b++) {
            std::istringstream is(down[b]);
            ct.load(kctx, is);
            decryptor.decrypt(ct, p);
            for (size_t o = 0; o < rows; o++)
                share[b * rows + o] = pos[o] < p.coeff_count() ? p[pos[o]] : 0;
        }
    };
    // exact mod t: share - R = u (the server's masks are known here)
    auto check = [&](const char *what) {
        for (size_t k = 0; k < rank; k++)
            if (((share[k] - R[k]) & (t - 1)) != mod_t(u[k])) {
                std::fprintf(stderr, "seal_harness: sealed (%s): row %zu decrypts to %llu, want %llu\n",
                             what, k, (unsigned long long)((share[k] - R[k]) & (t - 1)),
                             (unsigned long long)mod_t(u[k]));
                return false;
            }
        return true;
    };

    std::vector<double> t_enc, t_srv, t_srv_ntt, t_dec, t_tot, t_tot_ntt;
    for (int it = -2; it < reps; it++) { /* two untimed warm-up tokens */
        double a = now_us();
        client_encrypt();
        double b = now_us();
        server(false);
        double c = now_us();
        client_decrypt();
        double e = now_us();
        if (!check("coefficient-form products"))
            return 1;
        double f = now_us();
        server(true);
        double g = now_us();
        client_decrypt();
        double h = now_us();
        if (!check("NTT-form products"))
            return 1;
        if (it < 0)
            continue;
        t_enc.push_back(b - a);
        t_srv.push_back(c - b);
        t_srv_ntt.push_back(g - f);
        t_dec.push_back(0.5 * ((e - c) + (h - g)));
        t_tot.push_back(e - a);
        t_tot_ntt.push_back((b - a) + (h - f));
    }
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        size_t m = v.size() / 2;
        return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
    };
    row("sealed total (server NTT-form)", median(t_tot_ntt));
    row("sealed total (server coefficient-form)", median(t_tot));
    row("sealed client encrypt (4 chunks)", median(t_enc));
    row("sealed server (NTT-form)", median(t_srv_ntt));
    row("sealed server (coefficient-form)", median(t_srv));
    row("sealed client decrypt (4 blocks)", median(t_dec));

    size_t up_bytes = 0, down_bytes = 0;
    for (auto &s : up)
        up_bytes += s.size();
    for (auto &s : down)
        down_bytes += s.size();
    const size_t seed_bytes = static_cast<size_t>(UniformRandomGeneratorInfo::SaveSize(compr_mode_type::none));
    const size_t logq = size_t(q0.bit_count() + q1.bit_count());
    row("sealed bytes up (SEAL save)", double(up_bytes));
    row("sealed bytes up (seed + c0 bit-packed)", double(n_chunks * (seed_bytes + (n * logq + 7) / 8)));
    row("sealed bytes down (SEAL save)", double(down_bytes));
    row("sealed bytes down (c1 + 8 coefficients bit-packed)",
        double(n_blocks * (((n + rows) * size_t(q0.bit_count()) + 7) / 8)));
    return 0;
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
    return sealed_product();
}
