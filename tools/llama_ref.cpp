// Reference dumper over libllama (the llama.cpp library), used by tools/make_model_fixtures.py.
// Not part of the crate: built by the fixture script against a local llama.cpp build.
//
//   llama_ref logits   MODEL PROMPT_FILE OUT_F32 N_GEN   -> JSON on stdout; raw f32 logits in OUT_F32
//   llama_ref tokenize MODEL TEXTS_HEX_FILE              -> one line of ids per text and mode
//   llama_ref pieces   MODEL                             -> one line per token: id attr hex(special) hex(plain)
//   llama_ref vocab    MODEL CHAT_FILE                   -> JSON on stdout: special tokens, end-of-generation
//                                                           tokens, and llama_chat_apply_template's rendering
//                                                           of CHAT_FILE's messages (lines `role hex(content)`)
//   llama_ref quantize IN OUT q8_0|q4_k_m                -> llama_model_quantize with default parameters
//                                                           (what the llama-quantize tool calls)
//
// `logits` tokenises the prompt file's bytes (add_special = true, parse_special = false), evaluates
// the whole prompt in one batch with logits requested at every position, writes them row-major
// [n_prompt, n_vocab] as little-endian f32, then continues greedily for N_GEN tokens one token per
// decode call (argmax, lowest id on ties) and prints the ids and each step's two largest logits.
// `tokenize` reads one hex-encoded text per line and prints, per text, four lines: the ids for
// (add_special, parse_special) = (0,0), (1,0), (0,1), (1,1).
// `vocab` renders the messages with the file's own `tokenizer.chat_template` through libllama's
// built-in template detection (no Jinja; -1 where the template is not one it knows), with the
// assistant prefix added.

#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static void quiet_log(enum ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR || getenv("LLAMA_REF_VERBOSE")) fputs(text, stderr);
}

static std::string read_file(const char * path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

static std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text, bool add_special, bool parse_special) {
    int n = -llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0, add_special, parse_special);
    if (n < 0) n = -n;
    std::vector<llama_token> out(n);
    int got = llama_tokenize(vocab, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(), add_special, parse_special);
    if (got < 0) {
        fprintf(stderr, "tokenize failed\n");
        exit(1);
    }
    out.resize(got);
    return out;
}

static std::string hex(const std::string & s) {
    static const char * digits = "0123456789abcdef";
    std::string h;
    for (unsigned char c : s) {
        h += digits[c >> 4];
        h += digits[c & 15];
    }
    return h.empty() ? "-" : h;
}

static std::string unhex(const std::string & h) {
    std::string s;
    for (size_t i = 0; i + 1 < h.size(); i += 2) {
        s += (char) std::strtol(h.substr(i, 2).c_str(), nullptr, 16);
    }
    return s;
}

static std::string piece(const llama_vocab * vocab, llama_token t, bool special) {
    char buf[512];
    int n = llama_token_to_piece(vocab, t, buf, sizeof(buf), 0, special);
    if (n < 0) {
        fprintf(stderr, "piece too long\n");
        exit(1);
    }
    return std::string(buf, n);
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: llama_ref logits|tokenize|pieces MODEL ...\n");
        return 2;
    }
    const std::string mode = argv[1];
    llama_log_set(quiet_log, nullptr);
    llama_backend_init();

    if (mode == "quantize") {
        if (argc < 5) return 2;
        llama_model_quantize_params qp = llama_model_quantize_default_params();
        const std::string type = argv[4];
        if (type == "q8_0") {
            qp.ftype = LLAMA_FTYPE_MOSTLY_Q8_0;
        } else if (type == "q4_k_m") {
            qp.ftype = LLAMA_FTYPE_MOSTLY_Q4_K_M;
        } else if (type == "q5_k_m") {
            qp.ftype = LLAMA_FTYPE_MOSTLY_Q5_K_M;
        } else {
            fprintf(stderr, "unknown type %s\n", type.c_str());
            return 2;
        }
        return llama_model_quantize(argv[2], argv[3], &qp) == 0 ? 0 : 1;
    }

    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = mode != "logits";
    llama_model * model = llama_model_load_from_file(argv[2], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[2]);
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    if (mode == "pieces") {
        for (int t = 0; t < n_vocab; t++) {
            printf("%d %d %s %s\n", t, (int) llama_vocab_get_attr(vocab, t), hex(piece(vocab, t, true)).c_str(), hex(piece(vocab, t, false)).c_str());
        }
    } else if (mode == "tokenize") {
        if (argc < 4) return 2;
        std::ifstream f(argv[3]);
        std::string line;
        while (std::getline(f, line)) {
            const std::string text = unhex(line);
            for (int parse = 0; parse < 2; parse++) {
                for (int add = 0; add < 2; add++) {
                    auto ids = tokenize(vocab, text, add, parse);
                    for (size_t i = 0; i < ids.size(); i++) printf(i ? " %d" : "%d", ids[i]);
                    printf("\n");
                }
            }
        }
    } else if (mode == "vocab") {
        if (argc < 4) return 2;
        std::ifstream f(argv[3]);
        std::string line;
        std::vector<std::string> roles, contents;
        while (std::getline(f, line)) {
            const size_t sp = line.find(' ');
            if (sp == std::string::npos) continue;
            roles.push_back(line.substr(0, sp));
            contents.push_back(unhex(line.substr(sp + 1)));
        }
        std::vector<llama_chat_message> msgs;
        for (size_t i = 0; i < roles.size(); i++) msgs.push_back({roles[i].c_str(), contents[i].c_str()});
        const char * tmpl = llama_model_chat_template(model, nullptr);
        int32_t n = -1;
        std::string rendered;
        if (tmpl) {
            std::vector<char> buf(1 << 16);
            n = llama_chat_apply_template(tmpl, msgs.data(), msgs.size(), true, buf.data(), (int32_t) buf.size());
            if (n > 0 && n <= (int32_t) buf.size()) rendered.assign(buf.data(), n);
        }
        printf("{\"bos\": %d, \"eos\": %d, \"eot\": %d, \"pad\": %d, \"add_bos\": %d, \"add_eos\": %d, \"eog\": [",
               llama_vocab_bos(vocab), llama_vocab_eos(vocab), llama_vocab_eot(vocab), llama_vocab_pad(vocab),
               (int) llama_vocab_get_add_bos(vocab), (int) llama_vocab_get_add_eos(vocab));
        bool first = true;
        for (int t = 0; t < n_vocab; t++) {
            if (llama_vocab_is_eog(vocab, t)) {
                printf(first ? "%d" : ", %d", t);
                first = false;
            }
        }
        printf("], \"has_template\": %d, \"chat_rc\": %d, \"chat_hex\": \"%s\"}\n", tmpl != nullptr, n, hex(rendered).c_str());
    } else if (mode == "logits") {
        if (argc < 6) return 2;
        const std::string prompt = read_file(argv[3]);
        const int n_gen = atoi(argv[5]);
        auto toks = tokenize(vocab, prompt, true, false);
        const int n_prompt = (int) toks.size();

        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = (uint32_t) (n_prompt + n_gen + 8);
        cp.n_batch = cp.n_ctx;
        cp.n_ubatch = cp.n_ctx;
        cp.n_threads = 2;
        cp.n_threads_batch = 2;
        llama_context * ctx = llama_init_from_model(model, cp);
        if (!ctx) {
            fprintf(stderr, "cannot create context\n");
            return 1;
        }

        llama_batch batch = llama_batch_init(n_prompt, 0, 1);
        for (int i = 0; i < n_prompt; i++) {
            batch.token[i] = toks[i];
            batch.pos[i] = i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = 1;
        }
        batch.n_tokens = n_prompt;
        if (llama_decode(ctx, batch) != 0) {
            fprintf(stderr, "decode failed\n");
            return 1;
        }
        FILE * out = fopen(argv[4], "wb");
        if (!out) return 1;
        for (int i = 0; i < n_prompt; i++) {
            fwrite(llama_get_logits_ith(ctx, i), sizeof(float), n_vocab, out);
        }
        fclose(out);

        std::vector<llama_token> gen;
        std::vector<std::pair<float, float>> top2;
        const float * logits = llama_get_logits_ith(ctx, n_prompt - 1);
        llama_batch one = llama_batch_init(1, 0, 1);
        for (int step = 0; step < n_gen; step++) {
            int best = 0;
            for (int v = 1; v < n_vocab; v++) {
                if (logits[v] > logits[best]) best = v;
            }
            float second = -1e30f;
            for (int v = 0; v < n_vocab; v++) {
                if (v != best && logits[v] > second) second = logits[v];
            }
            gen.push_back(best);
            top2.push_back({logits[best], second});
            if (step + 1 == n_gen) break;
            one.token[0] = best;
            one.pos[0] = n_prompt + step;
            one.n_seq_id[0] = 1;
            one.seq_id[0][0] = 0;
            one.logits[0] = 1;
            one.n_tokens = 1;
            if (llama_decode(ctx, one) != 0) {
                fprintf(stderr, "decode failed\n");
                return 1;
            }
            logits = llama_get_logits_ith(ctx, 0);
        }

        printf("{\"n_vocab\": %d, \"n_swa\": %d, \"prompt_tokens\": [", n_vocab, llama_model_n_swa(model));
        for (int i = 0; i < n_prompt; i++) printf(i ? ", %d" : "%d", toks[i]);
        printf("], \"greedy_tokens\": [");
        for (size_t i = 0; i < gen.size(); i++) printf(i ? ", %d" : "%d", gen[i]);
        printf("], \"greedy_top2\": [");
        for (size_t i = 0; i < top2.size(); i++) printf(i ? ", [%.9g, %.9g]" : "[%.9g, %.9g]", top2[i].first, top2[i].second);
        printf("]}\n");

        llama_batch_free(one);
        llama_batch_free(batch);
        llama_free(ctx);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode.c_str());
        return 2;
    }
    llama_model_free(model);
    return 0;
}
