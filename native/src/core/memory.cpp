#include "core/memory.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#elif defined(__APPLE__)
#include <sys/resource.h>
#include <sys/sysctl.h>
#else
#include <sys/resource.h>
#endif

namespace ember {

namespace {

void tighten(MemoryBound& bound, uint64_t bytes, const std::string& source) {
    if (bytes < bound.bytes) bound = {bytes, source};
}

#if !defined(_WIN32) && !defined(__APPLE__)
// A "Key:   123 kB" line of /proc/meminfo or /proc/self/status, in bytes (0: absent).
uint64_t proc_kb(const char* file, const char* key) {
    std::ifstream f(file);
    std::string line;
    const std::string prefix = std::string(key) + ":";
    while (std::getline(f, line))
        if (line.compare(0, prefix.size(), prefix) == 0) return std::strtoull(line.c_str() + prefix.size(), nullptr, 10) * 1024;
    return 0;
}

// A cgroup file holding one number, or "max" (returns false then, and when unreadable).
bool read_cgroup_number(const std::string& path, uint64_t& out) {
    std::ifstream f(path);
    std::string word;
    if (!(f >> word) || word == "max") return false;
    char* end = nullptr;
    out = std::strtoull(word.c_str(), &end, 10);
    return end && *end == '\0';
}

// cgroup v2: the limit of this process's group and of every group above it applies.
void cgroup_v2_limits(MemoryLimits& m) {
    std::ifstream f("/proc/self/cgroup");
    std::string line, path;
    while (std::getline(f, line))
        if (line.compare(0, 3, "0::") == 0) path = line.substr(3);
    if (path.empty()) return;
    for (;;) {
        const std::string dir = "/sys/fs/cgroup" + (path == "/" ? std::string() : path);
        uint64_t max = 0, current = 0;
        if (read_cgroup_number(dir + "/memory.max", max)) {
            tighten(m.total, max, "cgroup memory.max");
            if (read_cgroup_number(dir + "/memory.current", current))
                tighten(m.available, max > current ? max - current : 0, "cgroup memory.max less memory.current");
        }
        if (path == "/" || path.empty()) break;
        const size_t slash = path.find_last_of('/');
        path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
}

void cgroup_v1_limits(MemoryLimits& m) {
    uint64_t limit = 0, usage = 0;
    // v1 reports "no limit" as a huge number near 2^63
    if (!read_cgroup_number("/sys/fs/cgroup/memory/memory.limit_in_bytes", limit) || limit >= (1ull << 60)) return;
    tighten(m.total, limit, "cgroup memory.limit_in_bytes");
    if (read_cgroup_number("/sys/fs/cgroup/memory/memory.usage_in_bytes", usage))
        tighten(m.available, limit > usage ? limit - usage : 0, "cgroup memory.limit_in_bytes less usage");
}
#endif

#if !defined(_WIN32)
void address_space_limit(MemoryLimits& m, uint64_t mapped_now) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return;
    const uint64_t limit = (uint64_t)rl.rlim_cur;
    tighten(m.address_space, limit > mapped_now ? limit - mapped_now : 0, "RLIMIT_AS (ulimit -v) less the address space in use");
}
#endif

}  // namespace

std::string format_bytes(uint64_t bytes) {
    char buf[32];
    if (bytes >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", (double)bytes / (1ull << 30));
    else std::snprintf(buf, sizeof buf, "%.0f MiB", (double)bytes / (1ull << 20));
    return buf;
}

MemoryLimits memory_limits() {
    MemoryLimits m;
#if defined(_WIN32)
    MEMORYSTATUSEX s;
    s.dwLength = sizeof s;
    if (GlobalMemoryStatusEx(&s)) {
        tighten(m.available, s.ullAvailPhys, "available physical memory");
        tighten(m.total, s.ullTotalPhys, "physical memory");
        tighten(m.address_space, s.ullAvailVirtual, "available address space");
    }
#elif defined(__APPLE__)
    uint64_t total = 0;
    size_t len = sizeof total;
    if (sysctlbyname("hw.memsize", &total, &len, nullptr, 0) == 0) {
        // macOS compresses and swaps rather than refusing; only the total is a hard bound
        tighten(m.total, total, "physical memory");
        tighten(m.available, total, "physical memory");
    }
    address_space_limit(m, 0);
#else
    if (const uint64_t avail = proc_kb("/proc/meminfo", "MemAvailable")) tighten(m.available, avail, "MemAvailable");
    if (const uint64_t total = proc_kb("/proc/meminfo", "MemTotal")) tighten(m.total, total, "MemTotal");
    cgroup_v2_limits(m);
    cgroup_v1_limits(m);
    address_space_limit(m, proc_kb("/proc/self/status", "VmSize"));
#endif
    return m;
}

void check_memory_fits(const MemoryNeed& need, const MemoryLimits& limits) {
    const uint64_t allocated = need.kv_cache + need.state + need.compute;
    const uint64_t mapped = std::max(need.mapped, need.weights);
    const uint64_t all = need.weights + allocated, span = mapped + allocated;
    const MemoryBound* short_of = nullptr;
    uint64_t needed = 0;
    if (span > limits.address_space.bytes) short_of = &limits.address_space, needed = span;
    else if (allocated > limits.available.bytes) short_of = &limits.available, needed = allocated;
    else if (all > limits.total.bytes) short_of = &limits.total, needed = all;
    if (!short_of) return;

    std::ostringstream parts;
    if (short_of == &limits.address_space && mapped) {
        parts << "weights " << format_bytes(mapped);  // the whole file is mapped
    } else if (short_of == &limits.total && need.weights) {
        parts << "weights " << format_bytes(need.weights);
        if (mapped > need.weights) parts << " read per token, of " << format_bytes(mapped) << " mapped";
    }
    if (need.n_ctx > 0) {
        if (parts.tellp() > 0) parts << " + ";
        parts << "KV cache " << format_bytes(need.kv_cache) << " for " << need.n_ctx << " tokens";
        if (need.state)
            parts << " + recurrent state " << format_bytes(need.state) << " (" << need.n_state_copies
                  << " copies: the live one and its snapshots)";
        parts << " + compute buffer " << format_bytes(need.compute);
    }
    std::string msg = std::string(need.n_ctx > 0 ? "not enough memory for this context: it needs "
                                                 : "not enough memory for this model: it needs ") +
                      format_bytes(needed) + " (" + parts.str() + ") but " + format_bytes(short_of->bytes) +
                      " is available (" + short_of->source + ")";
    if (need.n_ctx > 0) msg += "; try a smaller context size";
    msg += ". EMBER_NO_MEMORY_CHECK=1 skips this check.";
    fail(EMBER_ERR_OUT_OF_MEMORY, msg);
}

void check_memory_fits(const MemoryNeed& need) {
    const char* off = std::getenv("EMBER_NO_MEMORY_CHECK");
    if (off && *off && std::string(off) != "0") return;
    check_memory_fits(need, memory_limits());
}

}  // namespace ember
