// A C++ host embedding the C API: RAII wrappers around the opaque handles,
// proving the public headers are C++-clean (extern "C", no C-only syntax).
// Build: c++ -std=c++17 -o host_embed host_embed.cpp $(pkg-config --cflags --libs tensafe-lora)
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>

#include <tensafe/tensafe.h>

namespace {

void check(tsafe_status st, const char *what)
{
    if (st != TSAFE_OK)
        throw std::runtime_error(std::string(what) + ": " + tsafe_strerror(st));
}

template <typename T, void (*Free)(T *)> struct Deleter {
    void operator()(T *p) const { Free(p); }
};
using Local = std::unique_ptr<tsafe_lora_local, Deleter<tsafe_lora_local, tsafe_lora_local_free>>;
using Site = std::unique_ptr<tsafe_lora_site, Deleter<tsafe_lora_site, tsafe_lora_site_free>>;

} // namespace

int main()
{
    try {
        const uint32_t d = 1536, r = 16; // Qwen2.5-1.5B hidden size
        tsafe_lora_plan plan;
        check(tsafe_lora_plan_auto(d, r, 1.0, 0.04, 1e-7, &plan), "plan");
        tsafe_lora_local *raw = nullptr;
        check(tsafe_lora_local_create(&plan, nullptr, &raw), "local");
        Local local(raw);

        std::vector<float> A(size_t(r) * d), B(size_t(d) * r), x(d), delta(d), ref(d);
        for (size_t i = 0; i < A.size(); i++) A[i] = 0.04f * std::sin(0.37f * float(i));
        for (size_t i = 0; i < B.size(); i++) B[i] = 0.02f * std::cos(0.11f * float(i));
        for (size_t i = 0; i < x.size(); i++) x[i] = std::sin(0.01f * float(i));

        tsafe_lora_site *site_raw = nullptr;
        check(tsafe_lora_site_create(tsafe_lora_local_context(local.get()), &plan, A.data(),
                                     B.data(), d, 2.0f, &site_raw), "site");
        Site site(site_raw);
        const tsafe_lora_site *sites[] = {site.get()};
        float *outs[] = {delta.data()};
        tsafe_lora_stats stats{};
        check(tsafe_lora_local_delta(local.get(), sites, 1, x.data(), outs, &stats), "delta");
        check(tsafe_lora_site_plain_delta(site.get(), x.data(), ref.data()), "plain");

        double num = 0, den = 0;
        for (uint32_t i = 0; i < d; i++) {
            num += double(delta[i] - ref[i]) * (delta[i] - ref[i]);
            den += double(ref[i]) * ref[i];
        }
        std::printf("tensafe %s from C++: plan %s, HE-LoRA delta rel L2 error %.3g, %.0f us\n",
                    tsafe_version_string(), plan.name, std::sqrt(num / den),
                    stats.encrypt_us + stats.products_us + stats.decrypt_us + stats.sums_us +
                        stats.bu_us);
        return std::sqrt(num / den) <= 1e-5 ? 0 : 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "host_embed: %s\n", e.what());
        return 1;
    }
}
