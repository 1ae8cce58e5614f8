/*
 * ember.h - the C ABI of Ember's inference engine (the only door into it).
 *
 * A worked example: load a model, evaluate a prompt, sample greedily.
 *
 *     ember_model *model = NULL;
 *     ember_model_params mp = ember_model_default_params();
 *     if (ember_model_load("model.gguf", &mp, &model) != EMBER_OK) {
 *         fprintf(stderr, "%s\n", ember_last_error());
 *         return 1;
 *     }
 *     ember_context *ctx = NULL;
 *     ember_context_params cp = ember_context_default_params();
 *     ember_context_create(model, &cp, &ctx);
 *
 *     ember_token ids[512];
 *     int32_t n = 0;
 *     ember_tokenize(model, "Hello", 5, true, false, ids, 512, &n);
 *     ember_decode(ctx, ids, n, 0, false);            // prompt at positions 0..n-1
 *
 *     ember_sampler_params sp = ember_sampler_default_params();
 *     sp.temperature = 0.0f;                           // greedy
 *     ember_sampler *smpl = NULL;
 *     ember_sampler_create(&sp, &smpl);
 *     ember_token next;
 *     ember_sampler_sample(smpl, ember_get_logits(ctx, -1), ember_model_n_vocab(model), &next);
 *
 *     ember_sampler_free(smpl); ember_context_free(ctx); ember_model_free(model);
 *
 * Rules: every handle is opaque; every fallible call returns an ember_status and
 * leaves a message readable with ember_last_error() (per thread) and with the
 * handle's own *_last_error() (per thread too: the message of this thread's last
 * call on that handle, so threads sharing a model never see each other's errors).
 * The tokenizer and metadata calls on one model may run on several threads at once.
 * No C++ exception ever crosses this boundary.
 * Strings are UTF-8 and are passed with explicit lengths where they may hold NULs.
 */
#ifndef EMBER_H
#define EMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#  if defined(EMBER_BUILD)
#    define EMBER_API __declspec(dllexport)
#  else
#    define EMBER_API __declspec(dllimport)
#  endif
#else
#  define EMBER_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define EMBER_ABI_VERSION 7

typedef int32_t ember_token;
typedef struct ember_model ember_model;
typedef struct ember_context ember_context;
typedef struct ember_sampler ember_sampler;
typedef struct ember_grammar ember_grammar;
typedef struct ember_embedder ember_embedder;

typedef enum ember_status {
    EMBER_OK = 0,
    EMBER_ERR_INVALID_ARGUMENT = 1, /* a NULL handle, a bad size, an id out of range */
    EMBER_ERR_IO = 2,               /* the file could not be opened, read or mapped */
    EMBER_ERR_FORMAT = 3,           /* the file is not a valid GGUF (corrupt, truncated) */
    EMBER_ERR_UNSUPPORTED = 4,      /* a valid file Ember cannot run (architecture, type) */
    EMBER_ERR_OUT_OF_MEMORY = 5,
    EMBER_ERR_CANCELLED = 6,        /* the progress callback or the cancel flag said stop */
    EMBER_ERR_CONTEXT_FULL = 7,     /* positions past n_ctx */
    EMBER_ERR_BUFFER_TOO_SMALL = 8, /* *n_out then holds the size needed */
    EMBER_ERR_INTERNAL = 9
} ember_status;

/* ---- library ------------------------------------------------------------ */

EMBER_API int32_t ember_abi_version(void);
EMBER_API const char *ember_version(void);
/* e.g. "ISA=AVX2 threads=2"; static storage. */
EMBER_API const char *ember_system_info(void);
/* Message of the last failed call on this thread ("" when none). */
EMBER_API const char *ember_last_error(void);
EMBER_API const char *ember_status_name(ember_status status);
/* The model architectures this build runs, one per line: the GGUF general.architecture
   name, a tab, the models users know it as ("llama\tLlama 1-3.x, TinyLlama, ...\n").
   Static storage. */
EMBER_API const char *ember_architectures(void);

/* ---- model -------------------------------------------------------------- */

/* Return false to cancel the load. progress is in [0, 1]. */
typedef bool (*ember_progress_fn)(float progress, void *user_data);

typedef struct ember_model_params {
    ember_progress_fn progress;      /* may be NULL */
    void *progress_user_data;
    const volatile int32_t *cancel;  /* may be NULL; nonzero cancels the load */
    bool vocab_only;                 /* read metadata + tokenizer only, no weights */
    bool metadata_only;              /* read the header only (model cards); no tokenizer */
} ember_model_params;

EMBER_API ember_model_params ember_model_default_params(void);
EMBER_API ember_status ember_model_load(const char *path, const ember_model_params *params,
                                        ember_model **out);
EMBER_API void ember_model_free(ember_model *model);
/* Message of this thread's last call on the model ("" when it succeeded or none failed);
   valid until this thread's next call on the model. */
EMBER_API const char *ember_model_last_error(const ember_model *model);

EMBER_API const char *ember_model_arch(const ember_model *model);       /* "llama" */
EMBER_API const char *ember_model_ftype_name(const ember_model *model);  /* "Q4_1" */
EMBER_API uint32_t ember_model_gguf_version(const ember_model *model);
EMBER_API uint64_t ember_model_file_size(const ember_model *model);
EMBER_API uint64_t ember_model_n_params(const ember_model *model);
EMBER_API int32_t ember_model_n_vocab(const ember_model *model);
EMBER_API int32_t ember_model_n_ctx_train(const ember_model *model);
EMBER_API int32_t ember_model_n_embd(const ember_model *model);
EMBER_API int32_t ember_model_n_layer(const ember_model *model);
/* When the first context opens, the weights its CPU multiplies are copied, by one thread in
   the background below normal priority, into the layout the kernels read fastest; decoding
   meanwhile reads the file's rows (same results, slower). How much of that copy is done: 1
   when finished, or when none is made. wait: return only when it is finished. */
EMBER_API double ember_model_layout_progress(const ember_model *model, bool wait);

/* Metadata: every GGUF key, in file order. The value is rendered as JSON
 * (numbers, strings, booleans, nested arrays); gguf_type is the GGUF value type
 * id (arrays: 9). Both strings live as long as the model. */
EMBER_API int64_t ember_model_meta_count(const ember_model *model);
EMBER_API ember_status ember_model_meta_get(const ember_model *model, int64_t index,
                                            const char **key, int32_t *gguf_type,
                                            const char **value_json);

typedef struct ember_tensor_info {
    const char *name;
    int32_t type;            /* GGUF type id */
    const char *type_name;
    int32_t n_dims;
    int64_t ne[4];           /* ne[0] is the contiguous dimension */
    uint64_t offset;         /* from the start of the file */
    uint64_t n_bytes;
} ember_tensor_info;

EMBER_API int64_t ember_model_tensor_count(const ember_model *model);
EMBER_API ember_status ember_model_tensor_get(const ember_model *model, int64_t index,
                                              ember_tensor_info *out);
/* Dequantize a whole tensor to float32 (n = element count of the tensor). */
EMBER_API ember_status ember_model_tensor_dequantize(const ember_model *model, const char *name,
                                                     float *out, int64_t n);

/* ---- element types ------------------------------------------------------ */

EMBER_API const char *ember_type_name(int32_t type);   /* NULL when unknown */
EMBER_API int64_t ember_type_block_size(int32_t type); /* elements per block; 0 when unknown */
EMBER_API int64_t ember_type_block_bytes(int32_t type);
/* 1 when a model's weights may have this type (the engine computes with it at every ISA
 * level), 0 for unknown types and for the ones used only inside the engine (Q8_1, Q8_K, I32). */
EMBER_API int32_t ember_type_is_weight(int32_t type);
/* Reference (scalar) conversions of n elements (a multiple of the block size). */
EMBER_API ember_status ember_dequantize(int32_t type, const void *src, float *dst, int64_t n);
EMBER_API ember_status ember_quantize(int32_t type, const float *src, void *dst, int64_t n);

/* ---- vocabulary --------------------------------------------------------- */

/* On success *n_out is the number of tokens written. When capacity is too small,
 * returns EMBER_ERR_BUFFER_TOO_SMALL and *n_out is the number needed. */
EMBER_API ember_status ember_tokenize(const ember_model *model, const char *text, int32_t text_len,
                                      bool add_special, bool parse_special, ember_token *tokens,
                                      int32_t capacity, int32_t *n_out);
/* Bytes of one token (not NUL-terminated; may be part of a UTF-8 character).
 * special=false renders control tokens as nothing. */
EMBER_API ember_status ember_token_to_piece(const ember_model *model, ember_token token,
                                            bool special, char *buf, int32_t capacity,
                                            int32_t *n_out);
EMBER_API ember_status ember_detokenize(const ember_model *model, const ember_token *tokens,
                                        int32_t n_tokens, bool remove_special,
                                        bool unparse_special, char *buf, int32_t capacity,
                                        int32_t *n_out);
EMBER_API ember_token ember_token_bos(const ember_model *model); /* -1 when none */
EMBER_API ember_token ember_token_eos(const ember_model *model);
EMBER_API ember_token ember_token_eot(const ember_model *model);
EMBER_API bool ember_token_is_eog(const ember_model *model, ember_token token);
EMBER_API bool ember_token_is_control(const ember_model *model, ember_token token);
EMBER_API const char *ember_token_text(const ember_model *model, ember_token token);
EMBER_API bool ember_vocab_add_bos(const ember_model *model);
EMBER_API bool ember_vocab_add_eos(const ember_model *model);

/* ---- context (KV cache + compute state) --------------------------------- */

/* CPU instruction-set levels for the kernels (ember_context_params.isa). */
#define EMBER_ISA_AUTO (-1) /* the best this CPU has, or the EMBER_ISA environment variable */
#define EMBER_ISA_SCALAR 0
#define EMBER_ISA_AVX2 1
#define EMBER_ISA_AVX512 2
#define EMBER_ISA_NEON 3

typedef struct ember_context_params {
    int32_t n_ctx;       /* 0: the model's n_ctx_train, capped at 4096 */
    int32_t n_batch;     /* tokens per graph evaluation (prompt chunks); 0: 512 */
    int32_t n_threads;   /* 0: physical cores */
    int32_t isa;         /* EMBER_ISA_*; a level the CPU lacks is an error */
    /* Where the layers run: NULL or "auto" (the best usable device, else the CPU), "cpu",
       or a backend by name with an optional device, "cuda", "cuda:1". A backend that cannot
       be used (library missing, no driver, no device, too little memory, an op it lacks)
       leaves the context on the CPU; ember_context_backend_note() says why. A name no
       backend has is an error. */
    const char *backend;
    /* Layers placed on the device, the output head counted as one (as llama.cpp's
       n_gpu_layers): -1 as many as fit in its free memory (with a margin), 0 none. */
    int32_t n_gpu_layers;
    /* Called as the offloaded layers' weights are copied to the device (not at all when
       everything runs on the CPU); returning false cancels the context's creation with
       EMBER_ERR_CANCELLED, leaving nothing on the device. May be NULL. */
    ember_progress_fn progress;
    void *progress_user_data;
} ember_context_params;

EMBER_API bool ember_isa_supported(int32_t isa);

/* ---- backends ------------------------------------------------------------ */

/* The CPU and the GPU backends this process found: libraries next to the engine
 * (libember-cuda.so, ember-cuda.dll) and the files in EMBER_BACKEND_PATH (':'-separated,
 * ';' on Windows). One row per usable device, one row (device -1, usable false) per backend
 * that cannot be used, with the reason. */
typedef struct ember_backend_device {
    char backend[32];   /* "cpu", "cuda", "test": what ember_context_params.backend takes */
    char label[32];     /* "CPU", "CUDA" */
    int32_t device;     /* index within the backend; -1 for an unusable backend */
    bool usable;
    int32_t score;      /* "auto" prefers the highest */
    char name[128];     /* "NVIDIA H200", the CPU's model name */
    uint64_t memory_total; /* bytes (0: unknown) */
    uint64_t memory_free;  /* bytes now (0: unknown) */
    char reason[512];   /* why unusable ("no driver", "libember-cuda.so is not installed ..."), else "" */
    char path[512];     /* the backend's library ("" for the CPU) */
} ember_backend_device;

EMBER_API int32_t ember_backend_device_count(void);
EMBER_API ember_status ember_backend_device_get(int32_t i, ember_backend_device *out);

EMBER_API ember_context_params ember_context_default_params(void);
EMBER_API ember_status ember_context_create(ember_model *model, const ember_context_params *params,
                                            ember_context **out);
EMBER_API void ember_context_free(ember_context *ctx);
EMBER_API const char *ember_context_last_error(const ember_context *ctx);
EMBER_API int32_t ember_context_n_ctx(const ember_context *ctx);
EMBER_API int32_t ember_context_n_past(const ember_context *ctx);
/* The earliest position a decode may start at while keeping the cache before it: 0, except
   for models with sliding-window layers, whose caches hold only the last window plus a batch
   of positions; rewinding further than that means decoding again from position 0. */
EMBER_API int32_t ember_context_rewind_limit(const ember_context *ctx);
/* The latest position at or before pos (clamped to 0..n_past) a decode may start at while
   keeping what precedes it: pos itself for plain attention caches; for sliding-window layers
   pos or 0 (see rewind_limit); for recurrent layers (Qwen3.5's delta-net), whose state every
   token overwrites, the live position, a snapshot's (taken after each batch of more than one
   token, the last few kept), or 0. Decoding at another position is an error. */
EMBER_API int32_t ember_context_restart_point(const ember_context *ctx, int32_t pos);
/* Recurrent layers: the snapshots held now, and the bytes of one copy of their state (the
   context keeps the live state and up to 4 snapshots); 0 for models without them. */
EMBER_API int32_t ember_context_n_snapshots(const ember_context *ctx);
EMBER_API uint64_t ember_context_state_bytes(const ember_context *ctx);
/* Where the context runs, "CUDA: NVIDIA H200, 31/31 layers" or "CPU (AVX2)", and why not
   (all) on a device ("" when there is nothing to say): "CUDA: no driver". The strings live
   as long as the context. */
EMBER_API const char *ember_context_backend(const ember_context *ctx);
EMBER_API const char *ember_context_backend_note(const ember_context *ctx);
/* The backend's name ("cpu" when nothing is offloaded) and the layers on its device. */
EMBER_API const char *ember_context_backend_name(const ember_context *ctx);
EMBER_API int32_t ember_context_n_gpu_layers(const ember_context *ctx);
/* Per-op timing of the decodes that follow (off by default; enabling resets it), for
   `ember bench --profile`. The report is one line per kind of node: name, a tab, how many
   ran, a tab, seconds on the first thread (its waits at barriers are a line of their own).
   The string lives until the next call on this context. */
EMBER_API void ember_context_set_profiling(ember_context *ctx, bool on);
EMBER_API const char *ember_context_profile(ember_context *ctx);
/* The decode bound's read bandwidth, for `ember bench`: the context's threads read the
   weights a one-token decode reads, in the layout its products read them, pass after pass
   for about `seconds` (two passes at least); *gbs gets the fastest pass's GB/s (1e9 bytes)
   and *bytes (may be NULL) the bytes of a pass. EMBER_ERR_UNSUPPORTED when the context
   offloads layers to a device. */
EMBER_API ember_status ember_context_read_bandwidth(ember_context *ctx, double seconds, double *gbs,
                                                    uint64_t *bytes);
/* The engine polls *flag between batches and layers; nonzero -> EMBER_ERR_CANCELLED. */
EMBER_API void ember_context_set_cancel_flag(ember_context *ctx, const volatile int32_t *flag);

/* Evaluates tokens at positions pos0 .. pos0+n_tokens-1. The KV cache keeps
 * positions < pos0 (so a caller reuses a common prefix by passing its length)
 * and pos0 must be <= n_past. all_logits: keep logits of every token, else only
 * of the last one. Batches longer than n_batch are split internally. */
EMBER_API ember_status ember_decode(ember_context *ctx, const ember_token *tokens, int32_t n_tokens,
                                    int32_t pos0, bool all_logits);
/* Logits of the i-th token of the last decode (-1: the last one); NULL when absent.
 * Valid until the next decode. n_vocab floats. */
EMBER_API const float *ember_get_logits(ember_context *ctx, int32_t i);

/* ---- embeddings (encoder models: the bert family) ----------------------- */

/* An embedder turns whole token sequences into one vector each (n_embd floats):
 *
 *     ember_embedder *emb = NULL;
 *     ember_embedder_params ep = ember_embedder_default_params();
 *     if (ember_embedder_create(model, &ep, &emb) != EMBER_OK) ...  // a chat model: UNSUPPORTED
 *     ember_token ids[512];
 *     int32_t lens[2];
 *     ember_tokenize(model, "first text", 10, true, false, ids, 512, &lens[0]);
 *     ember_tokenize(model, "second", 6, true, false, ids + lens[0], 512 - lens[0], &lens[1]);
 *     float vec[2 * 384];
 *     ember_embed(emb, ids, lens, 2, true, vec, 2 * 384);   // L2-normalised
 *
 * Every token attends to every token of its own sequence (no causal mask, no KV cache);
 * the sequence's last hidden states are pooled as the file says (pooling_type: mean, the
 * first token (CLS) or the last) unless the params choose. Sequences share a graph
 * evaluation while they fit in n_batch tokens. One embedder is used by one thread at a time. */

#define EMBER_POOLING_UNSPECIFIED (-1) /* the file's */
#define EMBER_POOLING_NONE 0           /* per-token states: no sentence vector (refused) */
#define EMBER_POOLING_MEAN 1
#define EMBER_POOLING_CLS 2
#define EMBER_POOLING_LAST 3

typedef struct ember_embedder_params {
    int32_t n_threads; /* 0: physical cores */
    int32_t isa;       /* EMBER_ISA_*; a level the CPU lacks is an error */
    int32_t n_batch;   /* tokens per graph evaluation; 0: 1024 (never fewer than n_seq_max) */
    int32_t pooling;   /* EMBER_POOLING_*; UNSPECIFIED: the file's */
} ember_embedder_params;

/* The pooling an embedder on this model uses by default (EMBER_POOLING_MEAN, _CLS, _LAST,
   or _NONE when the file says none); -1 for a model that makes no embeddings (a causal
   language model: ember_embedder_create refuses it). */
EMBER_API int32_t ember_model_pooling(const ember_model *model);
EMBER_API ember_embedder_params ember_embedder_default_params(void);
/* EMBER_ERR_UNSUPPORTED for a text-generation model, or pooling none. */
EMBER_API ember_status ember_embedder_create(ember_model *model, const ember_embedder_params *params,
                                             ember_embedder **out);
EMBER_API void ember_embedder_free(ember_embedder *embedder);
EMBER_API const char *ember_embedder_last_error(const ember_embedder *embedder);
EMBER_API int32_t ember_embedder_n_embd(const ember_embedder *embedder);
/* The most tokens one sequence may have (the model's position table). */
EMBER_API int32_t ember_embedder_n_seq_max(const ember_embedder *embedder);
EMBER_API int32_t ember_embedder_pooling(const ember_embedder *embedder);
/* Polled between the graph's nodes; nonzero -> EMBER_ERR_CANCELLED. */
EMBER_API void ember_embedder_set_cancel_flag(ember_embedder *embedder, const volatile int32_t *flag);
/* tokens: n_seqs sequences one after another (seq_lens[i] tokens each, 1..n_seq_max; the
   caller adds [CLS]/[SEP], as ember_tokenize with add_special does); out: n_seqs * n_embd
   floats (out_capacity floats available), sequence i's vector at i * n_embd, unit length
   when normalize. A sequence longer than n_seq_max: EMBER_ERR_CONTEXT_FULL; an empty one or
   an id outside the vocabulary: EMBER_ERR_INVALID_ARGUMENT; nothing is computed then. */
EMBER_API ember_status ember_embed(ember_embedder *embedder, const ember_token *tokens, const int32_t *seq_lens,
                                   int32_t n_seqs, bool normalize, float *out, int64_t out_capacity);

/* ---- sampler ------------------------------------------------------------ */

typedef struct ember_sampler_params {
    float temperature;        /* <= 0: greedy */
    int32_t top_k;            /* <= 0: off */
    float top_p;              /* >= 1: off */
    float min_p;              /* <= 0: off */
    float repeat_penalty;     /* 1: off */
    float presence_penalty;   /* 0: off */
    float frequency_penalty;  /* 0: off */
    int32_t penalty_last_n;   /* window of recent tokens the penalties look at */
    uint64_t seed;
} ember_sampler_params;

EMBER_API ember_sampler_params ember_sampler_default_params(void);
EMBER_API ember_status ember_sampler_create(const ember_sampler_params *params, ember_sampler **out);
EMBER_API void ember_sampler_free(ember_sampler *sampler);
EMBER_API void ember_sampler_reset(ember_sampler *sampler); /* history and RNG (to the seed) */
/* Adds a token to the penalty history (prompt tokens and generated ones). */
EMBER_API void ember_sampler_accept(ember_sampler *sampler, ember_token token);
EMBER_API ember_status ember_sampler_sample(ember_sampler *sampler, const float *logits,
                                            int32_t n_vocab, ember_token *out);
/* The distribution ember_sampler_sample would draw from for these logits (the penalties over
 * the history, top-k, top-p, min-p, the temperature; at temperature <= 0 the first maximum
 * with probability 1), without drawing: the RNG does not move. Writes up to `capacity` kept
 * candidates' ids and probabilities (in no particular order; n_vocab always suffices) and
 * sets *n_kept to how many were kept. Speculative decoding's accept/reject rule reads it. */
EMBER_API ember_status ember_sampler_distribution(ember_sampler *sampler, const float *logits,
                                                  int32_t n_vocab, ember_token *ids, float *probs,
                                                  int32_t capacity, int32_t *n_kept);

/* ---- grammar (constrained sampling) -------------------------------------- */

/* A GBNF grammar (llama.cpp's notation: rules `name ::= ...`, "literals", [classes],
 * [^negated], `.`, ( groups ), * + ? {m,n}, # comments) and the state of a text matched
 * against it. Before each draw, ember_grammar_apply sets to -inf the logit of every token
 * whose text cannot continue the text so far (end-of-generation tokens stay only where the
 * grammar may end); after it, ember_grammar_accept advances past the drawn token:
 *
 *     ember_grammar *g = NULL;
 *     if (ember_grammar_create(model, gbnf, gbnf_len, "root", &g) != EMBER_OK) ...  // line, column
 *     float *row = copy_of(ember_get_logits(ctx, -1));
 *     ember_grammar_apply(g, row, n_vocab, NULL);
 *     ember_sampler_sample(smpl, row, n_vocab, &next);
 *     if (!ember_token_is_eog(model, next)) ember_grammar_accept(g, next);
 *
 * model may be NULL: the grammar then takes text only (ember_grammar_accept_text), not
 * tokens. root_rule NULL means "root". A left-recursive rule, an undefined one, bad syntax:
 * EMBER_ERR_INVALID_ARGUMENT with a message naming the line and column. The first grammar
 * on a model indexes its vocabulary (once; later grammars share it). One grammar is used by
 * one thread at a time. */
EMBER_API ember_status ember_grammar_create(const ember_model *model, const char *gbnf, int32_t gbnf_len,
                                            const char *root_rule, ember_grammar **out);
EMBER_API void ember_grammar_free(ember_grammar *grammar);
/* Back to the empty text. */
EMBER_API ember_status ember_grammar_reset(ember_grammar *grammar);
/* Masks logits (n_vocab floats, written in place; ids past the vocabulary are masked too);
 * *n_allowed (may be NULL) gets how many tokens stay. A token whose text would need more
 * than 1024 parses at once (a very ambiguous grammar) is masked. EMBER_ERR_INVALID_ARGUMENT
 * when no token can continue the text. */
EMBER_API ember_status ember_grammar_apply(ember_grammar *grammar, float *logits, int32_t n_vocab,
                                           int32_t *n_allowed);
/* Advances past a token; EMBER_ERR_INVALID_ARGUMENT, the state unchanged, when its text
 * cannot continue the text (an end-of-generation token: where the grammar cannot end). */
EMBER_API ember_status ember_grammar_accept(ember_grammar *grammar, ember_token token);
/* Advances past UTF-8 bytes (they may end inside a character); errors as accept's. */
EMBER_API ember_status ember_grammar_accept_text(ember_grammar *grammar, const char *text, int32_t text_len);
/* The text so far matches the whole grammar (it may still go on). */
EMBER_API bool ember_grammar_can_end(const ember_grammar *grammar);
/* It matches and nothing may follow, or an end-of-generation token was accepted. */
EMBER_API bool ember_grammar_is_done(const ember_grammar *grammar);

#ifdef __cplusplus
}
#endif

#endif /* EMBER_H */
