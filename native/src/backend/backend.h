// The boundary between the engine and a compute backend that lives in its own shared
// library (libember-cuda.so / ember-cuda.dll, the test backend). The library exports one
// C function, ember_backend_entry, returning a table of plain functions; the engine checks
// the table's ABI version and its Tensor size before calling anything else in it.
//
// A backend owns device memory (alloc/free, and copies to and from the host), says which
// nodes it can compute, and computes a run of graph nodes whose tensors' data pointers are
// already its own device addresses (the scheduler translates them). Every call is
// synchronous: when it returns, its copies and computations are done. Calls that can fail
// return 0 on success, else nonzero with a sentence in err (err_size bytes, NUL-terminated).
// No C++ exception crosses this boundary.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"

namespace ember {

// Bumped whenever this table, Tensor, Op or the meaning of an op's parameters changes.
constexpr uint32_t kBackendAbiVersion = 4;  // 2: six sources, Tensor::layer; 3: recurrent ops, sigmoid GLU;
                                            // 4: linear GLU, MOE_WEIGHTS' per-expert scale

struct BackendDeviceInfo {
    char name[128];         // "NVIDIA H200"
    uint64_t memory_total;  // bytes
    uint64_t memory_free;   // bytes, now
};

struct BackendIface {
    uint32_t abi_version;  // kBackendAbiVersion of the library's build
    uint32_t tensor_size;  // sizeof(Tensor) of the library's build
    const char* name;      // "cuda", "test": what users type after --backend
    const char* label;     // "CUDA": what the status line shows
    int32_t score;         // the highest scoring usable device wins under "auto"

    // Once, before anything else: 0, or a reason the backend cannot run on this machine
    // (no driver, driver too old, no device).
    int (*init)(char* err, size_t err_size);
    int (*device_count)(void);
    int (*device_info)(int device, BackendDeviceInfo* info);

    // Device memory, aligned to at least 256 bytes; null (and a reason) when it cannot.
    void* (*alloc)(int device, size_t bytes, char* err, size_t err_size);
    void (*free)(int device, void* ptr);
    int (*upload)(int device, void* dst, const void* src, size_t bytes, char* err, size_t err_size);
    int (*download)(int device, void* dst, const void* src, size_t bytes, char* err, size_t err_size);
    int (*memset_zero)(int device, void* dst, size_t bytes, char* err, size_t err_size);

    // Whether compute() handles this node (its op, type, sources' types and shapes).
    bool (*supports)(int device, const Tensor* node);

    // Per-context compute state (scratch, streams, captured graphs). max_row: the longest
    // activation row in elements; head_dim and group size for attention scratch.
    void* (*state_create)(int device, int64_t max_row, int64_t head_dim, int64_t group, char* err,
                          size_t err_size);
    void (*state_free)(void* state);
    // Computes nodes[0..n) in order (VIEW nodes need no work). cancel (may be null) may be
    // polled; returns 1 when cancelled, 0 when done, another value (and err) on failure.
    int (*compute)(void* state, const Tensor* const* nodes, int32_t n_nodes, const volatile int32_t* cancel,
                   char* err, size_t err_size);
};

// The one symbol a backend library exports, and how it exports it.
extern "C" typedef const BackendIface* (*BackendEntryFn)(void);
#define EMBER_BACKEND_ENTRY "ember_backend_entry"
#if defined(_WIN32)
#define EMBER_BACKEND_EXPORT extern "C" __declspec(dllexport)
#else
#define EMBER_BACKEND_EXPORT extern "C" __attribute__((visibility("default")))
#endif

}  // namespace ember
