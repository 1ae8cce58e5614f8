/*
 * dll_smoke.c - loads Ember's engine library at run time (LoadLibrary on Windows,
 * dlopen elsewhere), the way ctypes does, and drives it through the C ABI only:
 * ABI version, model load, tokenize, detokenize, then greedy generation.
 *
 *     dll_smoke LIBRARY MODEL.gguf [N_GREEDY]
 *
 * Everything printed on stdout is deterministic, so scripts/test_windows.sh compares
 * the Windows build's output (under wine) with the Linux build's, line for line.
 * Paths are UTF-8 on every system (on Windows, argv is read as UTF-16 and converted).
 * Build and system details go to stderr. Exit status 0 when every call succeeded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"

#ifdef _WIN32
#  include <windows.h>
typedef HMODULE lib_handle;
static lib_handle lib_open(const char *path) { return LoadLibraryA(path); }
static void *lib_sym(lib_handle h, const char *name) { return (void *)GetProcAddress(h, name); }
static void lib_close(lib_handle h) { FreeLibrary(h); }
/* argv as UTF-8 (the C ABI takes UTF-8 paths; Windows' argv is in the ANSI code page). */
static char **utf8_argv(int *argc) {
    LPWSTR *w = CommandLineToArgvW(GetCommandLineW(), argc);
    char **a = (char **)calloc((size_t)*argc + 1, sizeof(char *));
    for (int i = 0; w && a && i < *argc; ++i) {
        int n = WideCharToMultiByte(CP_UTF8, 0, w[i], -1, NULL, 0, NULL, NULL);
        a[i] = (char *)malloc((size_t)n);
        WideCharToMultiByte(CP_UTF8, 0, w[i], -1, a[i], n, NULL, NULL);
    }
    return a;
}
static const char *lib_error(void) {
    static char buf[64];
    snprintf(buf, sizeof buf, "Win32 error %lu", (unsigned long)GetLastError());
    return buf;
}
#else
#  include <dlfcn.h>
typedef void *lib_handle;
static lib_handle lib_open(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
static void *lib_sym(lib_handle h, const char *name) { return dlsym(h, name); }
static void lib_close(lib_handle h) { dlclose(h); }
static const char *lib_error(void) { return dlerror(); }
#endif

/* The entry points used, resolved by name like a foreign-function caller would. */
static struct {
    int32_t (*abi_version)(void);
    const char *(*version)(void);
    const char *(*system_info)(void);
    const char *(*last_error)(void);
    ember_model_params (*model_default_params)(void);
    ember_status (*model_load)(const char *, const ember_model_params *, ember_model **);
    void (*model_free)(ember_model *);
    const char *(*model_arch)(const ember_model *);
    const char *(*model_ftype_name)(const ember_model *);
    int32_t (*model_n_vocab)(const ember_model *);
    ember_status (*tokenize)(const ember_model *, const char *, int32_t, bool, bool, ember_token *,
                             int32_t, int32_t *);
    ember_status (*token_to_piece)(const ember_model *, ember_token, bool, char *, int32_t,
                                   int32_t *);
    ember_status (*detokenize)(const ember_model *, const ember_token *, int32_t, bool, bool, char *,
                               int32_t, int32_t *);
    bool (*token_is_eog)(const ember_model *, ember_token);
    ember_context_params (*context_default_params)(void);
    ember_status (*context_create)(ember_model *, const ember_context_params *, ember_context **);
    void (*context_free)(ember_context *);
    ember_status (*decode)(ember_context *, const ember_token *, int32_t, int32_t, bool);
    const float *(*get_logits)(ember_context *, int32_t);
    ember_sampler_params (*sampler_default_params)(void);
    ember_status (*sampler_create)(const ember_sampler_params *, ember_sampler **);
    void (*sampler_free)(ember_sampler *);
    ember_status (*sampler_sample)(ember_sampler *, const float *, int32_t, ember_token *);
} E;

static int resolve(lib_handle h) {
    struct { void **slot; const char *name; } syms[] = {
#define S(field) {(void **)&E.field, "ember_" #field}
        S(abi_version), S(version), S(system_info), S(last_error), S(model_default_params),
        S(model_load), S(model_free), S(model_arch), S(model_ftype_name), S(model_n_vocab),
        S(tokenize), S(token_to_piece), S(detokenize), S(token_is_eog),
        S(context_default_params), S(context_create), S(context_free), S(decode),
        S(get_logits), S(sampler_default_params), S(sampler_create), S(sampler_free),
        S(sampler_sample),
#undef S
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; ++i) {
        *syms[i].slot = lib_sym(h, syms[i].name);
        if (!*syms[i].slot) {
            fprintf(stderr, "dll_smoke: %s is not exported\n", syms[i].name);
            return 1;
        }
    }
    return 0;
}

/* Prints bytes as a JSON-style quoted string (newlines etc. escaped). */
static void print_quoted(const char *s, int32_t n) {
    putchar('"');
    for (int32_t i = 0; i < n; ++i) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

#define CHECK(call, what)                                                              \
    do {                                                                               \
        ember_status st_ = (call);                                                     \
        if (st_ != EMBER_OK) {                                                         \
            fprintf(stderr, "dll_smoke: %s failed (%d): %s\n", what, (int)st_,         \
                    E.last_error());                                                   \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

static int run(const char *model_path, int n_greedy) {
    printf("abi %d\n", (int)E.abi_version());
    fprintf(stderr, "engine %s; %s\n", E.version(), E.system_info());

    ember_model *model = NULL;
    ember_model_params mp = E.model_default_params();
    CHECK(E.model_load(model_path, &mp, &model), "ember_model_load");
    const int32_t n_vocab = E.model_n_vocab(model);
    printf("model %s %s n_vocab=%d\n", E.model_arch(model), E.model_ftype_name(model),
           (int)n_vocab);

    /* tokenize -> ids, detokenize -> the same text */
    const char *hello = "Hello world";
    ember_token ids[64];
    int32_t n = 0;
    CHECK(E.tokenize(model, hello, (int32_t)strlen(hello), false, false, ids, 64, &n),
          "ember_tokenize");
    printf("tokenize \"%s\":", hello);
    for (int32_t i = 0; i < n; ++i) printf(" %d", (int)ids[i]);
    printf("\n");
    char text[4096];
    int32_t n_text = 0;
    CHECK(E.detokenize(model, ids, n, false, false, text, (int32_t)sizeof text, &n_text),
          "ember_detokenize");
    printf("detokenize: ");
    print_quoted(text, n_text);
    printf("\n");
    if (n_text != (int32_t)strlen(hello) || memcmp(text, hello, (size_t)n_text) != 0) {
        fprintf(stderr, "dll_smoke: detokenize does not give back the text\n");
        return 1;
    }

    /* greedy continuation of a prompt, one token at a time */
    const char *prompt = "The capital of France is";
    ember_token toks[512];
    int32_t n_prompt = 0;
    CHECK(E.tokenize(model, prompt, (int32_t)strlen(prompt), true, false, toks, 512, &n_prompt),
          "ember_tokenize");
    ember_context *ctx = NULL;
    ember_context_params cp = E.context_default_params();
    cp.n_ctx = 256;
    CHECK(E.context_create(model, &cp, &ctx), "ember_context_create");
    ember_sampler_params sp = E.sampler_default_params();
    sp.temperature = 0.0f;
    ember_sampler *smpl = NULL;
    CHECK(E.sampler_create(&sp, &smpl), "ember_sampler_create");

    CHECK(E.decode(ctx, toks, n_prompt, 0, false), "ember_decode (prompt)");
    int32_t n_tok = n_prompt;
    printf("greedy \"%s\":", prompt);
    for (int i = 0; i < n_greedy && n_tok < 512; ++i) {
        ember_token next = -1;
        CHECK(E.sampler_sample(smpl, E.get_logits(ctx, -1), n_vocab, &next), "ember_sampler_sample");
        printf(" %d", (int)next);
        toks[n_tok++] = next;
        if (E.token_is_eog(model, next)) break;
        CHECK(E.decode(ctx, &next, 1, n_tok - 1, false), "ember_decode (token)");
    }
    printf("\n");
    char piece[256];
    int32_t n_piece = 0;
    CHECK(E.token_to_piece(model, toks[n_prompt], false, piece, (int32_t)sizeof piece, &n_piece),
          "ember_token_to_piece");
    printf("next token: %d ", (int)toks[n_prompt]);
    print_quoted(piece, n_piece);
    printf("\n");
    CHECK(E.detokenize(model, toks + n_prompt, n_tok - n_prompt, true, false, text,
                       (int32_t)sizeof text, &n_text),
          "ember_detokenize");
    printf("greedy text: ");
    print_quoted(text, n_text);
    printf("\n");

    E.sampler_free(smpl);
    E.context_free(ctx);
    E.model_free(model);
    return 0;
}

int main(int argc, char **argv) {
#ifdef _WIN32
    argv = utf8_argv(&argc);
#endif
    if (argc < 3) {
        fprintf(stderr, "usage: %s LIBRARY MODEL.gguf [N_GREEDY]\n", argv[0]);
        return 2;
    }
    const int n_greedy = argc > 3 ? atoi(argv[3]) : 8;
    lib_handle h = lib_open(argv[1]);
    if (!h) {
        fprintf(stderr, "dll_smoke: cannot load %s: %s\n", argv[1], lib_error());
        return 1;
    }
    int rc = resolve(h);
    if (rc == 0 && E.abi_version() != EMBER_ABI_VERSION) {
        fprintf(stderr, "dll_smoke: ABI version %d, expected %d\n", (int)E.abi_version(),
                EMBER_ABI_VERSION);
        rc = 1;
    }
    if (rc == 0) rc = run(argv[2], n_greedy);
    fflush(stdout);
    lib_close(h);
    return rc;
}
