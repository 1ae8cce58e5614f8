// How much memory this process may still use, and the check that refuses a model or a
// context before it is loaded or allocated when it cannot fit (EMBER_ERR_OUT_OF_MEMORY,
// with what it needs and what there is).
//
// Two kinds of memory, judged differently:
//  - allocated bytes (the KV cache, the compute buffer) must be resident: they are checked
//    against what is *available* now (MemAvailable, cgroup memory.max minus memory.current);
//  - mapped weights are file pages the kernel may evict, so they need not fit in what is
//    free, but decode reads its weights once per token: weights that cannot all stay in
//    RAM make each token a disk read. What a decode reads (every weight of a dense model;
//    of a mixture of experts the shared weights and the used share of the experts, k of n)
//    plus allocations is checked against the *total* RAM the process may have (MemTotal,
//    cgroup memory.max): a 30 GB file whose tokens each read 3 GB runs on a 24 GB machine,
//    as llama.cpp runs it (tokens that pick experts not read lately wait for the disk).
// A mapping also takes address space: the whole file and the allocations count against
// RLIMIT_AS.
// EMBER_NO_MEMORY_CHECK=1 turns the check off (for swap-backed or overcommitted setups).
#pragma once

#include <cstdint>
#include <string>

namespace ember {

// One bound on memory, with where it came from ("MemAvailable", "cgroup memory.max", ...).
struct MemoryBound {
    uint64_t bytes = UINT64_MAX;  // UINT64_MAX: no such bound on this system
    std::string source;
};

struct MemoryLimits {
    MemoryBound available;      // what may still be allocated and kept resident now
    MemoryBound total;          // what may be resident at all (RAM, or a cgroup's limit)
    MemoryBound address_space;  // what may still be mapped (RLIMIT_AS headroom)
};

MemoryLimits memory_limits();

// What a model and a context need, for the message.
struct MemoryNeed {
    uint64_t mapped = 0;   // the file's bytes (address space)
    uint64_t weights = 0;  // of those, what a decode reads (resident)
    uint64_t kv_cache = 0;
    uint64_t state = 0;    // recurrent layers' state, live and snapshot copies (reserved)
    int32_t n_state_copies = 0;
    uint64_t compute = 0;  // graph intermediates and logits, an estimate
    int32_t n_ctx = 0;     // 0: the check is for the weights alone (model load)
};

// Throws ember::Error(EMBER_ERR_OUT_OF_MEMORY) when need cannot fit in limits.
void check_memory_fits(const MemoryNeed& need, const MemoryLimits& limits);
// The same against this process's limits, unless EMBER_NO_MEMORY_CHECK is set.
void check_memory_fits(const MemoryNeed& need);

// "1.25 GiB", "340 MiB"
std::string format_bytes(uint64_t bytes);

}  // namespace ember
