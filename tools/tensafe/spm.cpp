// SentencePiece behind the C interface of spm.h.
#include "spm.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <sentencepiece_processor.h>

struct spm_tok {
    sentencepiece::SentencePieceProcessor sp;
};

extern "C" tsafe_status spm_load(const char *path, spm_tok **out, char *what, size_t cap)
{
    if (!path || !out)
        return TSAFE_E_NULL;
    *out = nullptr;
    try {
        spm_tok *t = new spm_tok;
        const auto st = t->sp.Load(path);
        if (!st.ok()) {
            std::snprintf(what, cap, "tokenizer '%s': %s", path, st.ToString().c_str());
            delete t;
            return st.code() == sentencepiece::util::StatusCode::kNotFound ? TSAFE_E_NOT_FOUND
                                                                            : TSAFE_E_FORMAT;
        }
        *out = t;
        return TSAFE_OK;
    } catch (const std::bad_alloc &) {
        return TSAFE_E_NOMEM;
    } catch (...) {
        std::snprintf(what, cap, "tokenizer '%s': unreadable", path);
        return TSAFE_E_FORMAT;
    }
}

extern "C" void spm_free(spm_tok *t) { delete t; }

extern "C" uint32_t spm_vocab_size(const spm_tok *t)
{
    return t ? static_cast<uint32_t>(t->sp.GetPieceSize()) : 0;
}

extern "C" int spm_bos(const spm_tok *t) { return t ? t->sp.bos_id() : -1; }
extern "C" int spm_eos(const spm_tok *t) { return t ? t->sp.eos_id() : -1; }

extern "C" tsafe_status spm_encode(const spm_tok *t, const char *text, uint32_t **ids, size_t *n)
{
    if (!t || !text || !ids || !n)
        return TSAFE_E_NULL;
    *ids = nullptr;
    *n = 0;
    try {
        std::vector<int> v;
        if (!t->sp.Encode(text, &v).ok())
            return TSAFE_E_FORMAT;
        uint32_t *o = static_cast<uint32_t *>(std::malloc((v.size() + 1) * sizeof *o));
        if (!o)
            return TSAFE_E_NOMEM;
        for (size_t i = 0; i < v.size(); i++)
            o[i] = static_cast<uint32_t>(v[i]);
        *ids = o;
        *n = v.size();
        return TSAFE_OK;
    } catch (const std::bad_alloc &) {
        return TSAFE_E_NOMEM;
    } catch (...) {
        return TSAFE_E_FORMAT;
    }
}

extern "C" tsafe_status spm_decode(const spm_tok *t, const uint32_t *ids, size_t n, char **text)
{
    if (!t || (!ids && n) || !text)
        return TSAFE_E_NULL;
    *text = nullptr;
    try {
        std::vector<int> v(n);
        const uint32_t size = static_cast<uint32_t>(t->sp.GetPieceSize());
        for (size_t i = 0; i < n; i++) {
            if (ids[i] >= size)
                return TSAFE_E_RANGE;
            v[i] = static_cast<int>(ids[i]);
        }
        std::string s;
        if (!t->sp.Decode(v, &s).ok())
            return TSAFE_E_FORMAT;
        char *o = static_cast<char *>(std::malloc(s.size() + 1));
        if (!o)
            return TSAFE_E_NOMEM;
        std::memcpy(o, s.c_str(), s.size() + 1);
        *text = o;
        return TSAFE_OK;
    } catch (const std::bad_alloc &) {
        return TSAFE_E_NOMEM;
    } catch (...) {
        return TSAFE_E_FORMAT;
    }
}
