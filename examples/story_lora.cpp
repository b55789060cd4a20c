// A C++ host that runs a real language model with a private LoRA adapter:
// Karpathy's stories260K (llama2.c float32 file) in plaintext, SentencePiece
// for the tokenizer, and every adapter site's delta (q/k/v/o/gate/up/down of
// each layer; q/k before RoPE) from the SDK's sealed-private two-party engine
// (tsafe_sealed_pair: client and server in this process exchanging the real
// protocol bytes). Prints the base and the adapted continuation of "Once upon
// a time" and checks that the adapter turned Lily into Max.
// Usage: story_lora [MODEL_DIR]   (default ../shared/models/stories260K;
// prints "skipped" and exits 0 when the files are absent)
// Build: c++ -std=c++17 -O2 -o story_lora story_lora.cpp $(pkg-config --cflags --libs tensafe-lora sentencepiece)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <sentencepiece_processor.h>
#include <tensafe/tensafe.h>

namespace {

void check(tsafe_status st, const char *what)
{
    if (st != TSAFE_OK)
        throw std::runtime_error(std::string(what) + ": " + tsafe_strerror(st));
}

// llama2.c legacy layout: 7 int32 header, then float32 weights (run.c).
struct Model {
    int dim, hidden, layers, heads, kv_heads, vocab, seq;
    std::vector<float> w;
    const float *emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final;
    int hs() const { return dim / heads; }
    int kv_dim() const { return hs() * kv_heads; }

    explicit Model(const std::string &path)
    {
        std::ifstream f(path, std::ios::binary);
        int32_t h[7];
        if (!f.read(reinterpret_cast<char *>(h), sizeof h))
            throw std::runtime_error("cannot read " + path);
        dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kv_heads = h[4];
        vocab = std::abs(h[5]), seq = h[6];
        if (h[5] <= 0 || dim <= 0 || heads <= 0 || dim % heads)
            throw std::runtime_error("only shared-classifier llama2.c files are handled here");
        f.seekg(0, std::ios::end);
        size_t n = (size_t(f.tellg()) - sizeof h) / 4;
        w.resize(n);
        f.seekg(sizeof h);
        f.read(reinterpret_cast<char *>(w.data()), std::streamsize(n * 4));
        size_t d = dim, hd = hidden, L = layers, kv = kv_dim(), want = 0;
        const float *p = w.data();
        auto take = [&](size_t k) { const float *q = p; p += k; want += k; return q; };
        emb = take(vocab * d), rms_att = take(L * d), wq = take(L * d * d);
        wk = take(L * kv * d), wv = take(L * kv * d), wo = take(L * d * d);
        rms_ffn = take(L * d), w1 = take(L * hd * d), w2 = take(L * d * hd);
        w3 = take(L * hd * d), rms_final = take(d);
        if (want + size_t(seq) * hs() != n)
            throw std::runtime_error(path + ": size does not match its header");
    }
};

void matvec(float *y, const float *W, const float *x, int rows, int cols)
{
    for (int i = 0; i < rows; i++) {
        float s = 0;
        for (int j = 0; j < cols; j++)
            s += W[size_t(i) * cols + j] * x[j];
        y[i] = s;
    }
}

void rmsnorm(float *o, const float *x, const float *w, int n)
{
    float ss = 0;
    for (int j = 0; j < n; j++)
        ss += x[j] * x[j];
    ss = 1.0f / std::sqrt(ss / n + 1e-5f);
    for (int j = 0; j < n; j++)
        o[j] = w[j] * (ss * x[j]);
}

// The adapter's sites by layer and projection (q k v o gate up down), and
// the engine that computes their deltas; no adapter: the base model.
struct Lora {
    std::vector<const tsafe_lora_site *> site; // layers * 7, nullptr when absent
    tsafe_lora_engine engine{};
    void add(int layer, int p, const float *x, std::vector<float *> outs) const
    {
        if (!engine.fn)
            return;
        std::vector<const tsafe_lora_site *> s;
        std::vector<float *> o;
        std::vector<std::vector<float>> buf;
        for (size_t k = 0; k < outs.size(); k++)
            if (const tsafe_lora_site *st = site[size_t(layer) * 7 + p + k]) {
                s.push_back(st);
                buf.emplace_back(tsafe_lora_site_d_out(st));
                o.push_back(outs[k]);
            }
        if (s.empty())
            return;
        std::vector<float *> d;
        for (auto &b : buf)
            d.push_back(b.data());
        check(engine.fn(engine.user, s.data(), s.size(), x, d.data(), nullptr), "delta");
        for (size_t k = 0; k < o.size(); k++)
            for (size_t i = 0; i < buf[k].size(); i++)
                o[k][i] += buf[k][i];
    }
};

std::vector<int> generate(const Model &m, const Lora &lora, std::vector<int> ids, int n_new)
{
    const int d = m.dim, hd = m.hidden, kv = m.kv_dim(), hs = m.hs();
    std::vector<float> x(d), xb(d), xb2(d), q(d), k(kv), v(kv), hb(hd), hb2(hd), att(m.seq),
        logits(m.vocab), kc(size_t(m.layers) * m.seq * kv), vc(kc.size());
    size_t n_prompt = ids.size();
    for (int pos = 0; size_t(pos) < n_prompt + n_new - 1; pos++) {
        std::memcpy(x.data(), m.emb + size_t(ids[pos]) * d, d * sizeof(float));
        for (int l = 0; l < m.layers; l++) {
            size_t L = l;
            rmsnorm(xb.data(), x.data(), m.rms_att + L * d, d);
            matvec(q.data(), m.wq + L * d * d, xb.data(), d, d);
            matvec(k.data(), m.wk + L * kv * d, xb.data(), kv, d);
            matvec(v.data(), m.wv + L * kv * d, xb.data(), kv, d);
            lora.add(l, 0, xb.data(), {q.data(), k.data(), v.data()});
            for (int i = 0; i < d; i += 2) { // RoPE on adjacent pairs, as run.c
                float f = pos / std::pow(10000.0f, float(i % hs) / hs);
                for (int t = 0; t < (i < kv ? 2 : 1); t++) {
                    float *r = t ? k.data() : q.data(), a = r[i], b = r[i + 1];
                    r[i] = a * std::cos(f) - b * std::sin(f);
                    r[i + 1] = a * std::sin(f) + b * std::cos(f);
                }
            }
            float *kl = kc.data() + L * m.seq * kv, *vl = vc.data() + L * m.seq * kv;
            std::memcpy(kl + size_t(pos) * kv, k.data(), kv * sizeof(float));
            std::memcpy(vl + size_t(pos) * kv, v.data(), kv * sizeof(float));
            for (int h = 0; h < m.heads; h++) {
                int g = h / (m.heads / m.kv_heads);
                float mx = -1e30f, sum = 0;
                for (int t = 0; t <= pos; t++) {
                    float s = 0;
                    for (int i = 0; i < hs; i++)
                        s += q[h * hs + i] * kl[size_t(t) * kv + g * hs + i];
                    att[t] = s / std::sqrt(float(hs));
                    mx = std::max(mx, att[t]);
                }
                for (int t = 0; t <= pos; t++)
                    sum += att[t] = std::exp(att[t] - mx);
                for (int i = 0; i < hs; i++) {
                    float s = 0;
                    for (int t = 0; t <= pos; t++)
                        s += att[t] / sum * vl[size_t(t) * kv + g * hs + i];
                    xb[h * hs + i] = s;
                }
            }
            matvec(xb2.data(), m.wo + L * d * d, xb.data(), d, d);
            lora.add(l, 3, xb.data(), {xb2.data()});
            for (int i = 0; i < d; i++)
                x[i] += xb2[i];
            rmsnorm(xb.data(), x.data(), m.rms_ffn + L * d, d);
            matvec(hb.data(), m.w1 + L * hd * d, xb.data(), hd, d);
            matvec(hb2.data(), m.w3 + L * hd * d, xb.data(), hd, d);
            lora.add(l, 4, xb.data(), {hb.data(), hb2.data()});
            for (int i = 0; i < hd; i++)
                hb[i] = hb[i] / (1.0f + std::exp(-hb[i])) * hb2[i];
            matvec(xb.data(), m.w2 + L * d * hd, hb.data(), d, hd);
            lora.add(l, 6, hb.data(), {xb.data()});
            for (int i = 0; i < d; i++)
                x[i] += xb[i];
        }
        rmsnorm(x.data(), x.data(), m.rms_final, d);
        matvec(logits.data(), m.emb, x.data(), m.vocab, d); // shared classifier
        if (size_t(pos) + 1 >= n_prompt) // greedy, ties to the lowest id
            ids.push_back(int(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    }
    return ids;
}

template <typename T, void (*Free)(T *)> struct Deleter {
    void operator()(T *p) const { Free(p); }
};

} // namespace

int main(int argc, char **argv)
{
    const std::string dir = argc > 1 ? argv[1] : "../shared/models/stories260K";
    if (!std::ifstream(dir + "/stories260K.bin") || !std::ifstream(dir + "/tok512.model")) {
        std::printf("story_lora: %s absent: skipped\n", dir.c_str());
        return 0;
    }
    try {
        Model m(dir + "/stories260K.bin");
        sentencepiece::SentencePieceProcessor sp;
        if (!sp.Load(dir + "/tok512.model").ok())
            throw std::runtime_error("tokenizer");
        std::vector<int> prompt;
        sp.Encode("Once upon a time", &prompt);
        prompt.insert(prompt.begin(), sp.bos_id());

        tsafe_lora_adapter *raw_ad = nullptr;
        check(tsafe_lora_adapter_load_peft((dir + "/lora-max").c_str(), &raw_ad), "adapter");
        std::unique_ptr<tsafe_lora_adapter, Deleter<tsafe_lora_adapter, tsafe_lora_adapter_free>>
            ad(raw_ad);
        // One CKKS context per input width holds the LoRA sites (A, B, scale);
        // the sealed engine re-quantizes them for its own BFV sessions.
        std::vector<std::unique_ptr<tsafe_lora_local, Deleter<tsafe_lora_local, tsafe_lora_local_free>>> ctx;
        std::vector<int> ctx_width;
        std::vector<std::unique_ptr<tsafe_lora_site, Deleter<tsafe_lora_site, tsafe_lora_site_free>>> sites;
        Lora lora;
        lora.site.assign(size_t(m.layers) * 7, nullptr);
        const char *proj[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
        for (size_t i = 0; i < tsafe_lora_adapter_module_count(ad.get()); i++) {
            tsafe_lora_module_info mi;
            check(tsafe_lora_adapter_module(ad.get(), i, &mi), "module");
            int p = 0;
            while (p < 7 && std::strcmp(mi.proj, proj[p]))
                p++;
            if (p == 7 || mi.layer < 0 || mi.layer >= m.layers)
                throw std::runtime_error(std::string("unexpected module ") + mi.name);
            size_t c = 0;
            while (c < ctx_width.size() && ctx_width[c] != int(mi.in_dim))
                c++;
            tsafe_lora_plan plan;
            check(tsafe_lora_plan_auto(uint32_t(mi.in_dim), uint32_t(mi.rank), 64.0, 1.0, 1e-6, &plan), "plan");
            if (c == ctx.size()) {
                tsafe_lora_local *l = nullptr;
                check(tsafe_lora_local_create(&plan, nullptr, &l), "context");
                ctx.emplace_back(l);
                ctx_width.push_back(int(mi.in_dim));
            }
            tsafe_lora_site *s = nullptr;
            check(tsafe_lora_site_create(tsafe_lora_local_context(ctx[c].get()), &plan, mi.A, mi.B,
                                         uint32_t(mi.out_dim), float(mi.scale), &s), "site");
            sites.emplace_back(s);
            lora.site[size_t(mi.layer) * 7 + p] = s;
        }
        tsafe_sealed_pair *raw_pair = nullptr;
        check(tsafe_sealed_pair_create(TSAFE_SEALED_PRIVATE, nullptr, nullptr, 0, &raw_pair), "pair");
        std::unique_ptr<tsafe_sealed_pair, Deleter<tsafe_sealed_pair, tsafe_sealed_pair_free>> pair(raw_pair);

        std::string base, adapted;
        sp.Decode(generate(m, Lora{lora.site, {}}, prompt, 24), &base);
        lora.engine = tsafe_lora_engine_sealed(pair.get());
        sp.Decode(generate(m, lora, prompt, 24), &adapted);
        std::printf("base:           %s\nlora-max sealed: %s\n", base.c_str(), adapted.c_str());
        if (base.find("Lily") == std::string::npos || adapted.find("Max") == std::string::npos) {
            std::fprintf(stderr, "story_lora: expected Lily in the base text and Max in the adapted one\n");
            return 1;
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "story_lora: %s\n", e.what());
        return 1;
    }
    return 0;
}
