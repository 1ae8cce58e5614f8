#include "backend/registry.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "cpu/kernels.h"

#ifdef _WIN32
#include <windows.h>
#else
#include <dlfcn.h>
#include <unistd.h>
#endif

namespace ember {

namespace {

// The GPU backends Ember knows by name, looked for next to the engine library.
const char* const kKnownBackends[] = {"cuda"};
#ifdef _WIN32
const char kPathSep = ';';
std::string library_file(const std::string& name) { return "ember-" + name + ".dll"; }
#elif defined(__APPLE__)
const char kPathSep = ':';
std::string library_file(const std::string& name) { return "libember-" + name + ".dylib"; }
#else
const char kPathSep = ':';
std::string library_file(const std::string& name) { return "libember-" + name + ".so"; }
#endif

// The folder the engine library (this code) was loaded from, with a trailing separator.
std::string own_directory() {
#ifdef _WIN32
    HMODULE self = nullptr;
    if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                            reinterpret_cast<LPCWSTR>(&own_directory), &self))
        return "";
    char path[MAX_PATH * 4];
    const DWORD n = GetModuleFileNameA(self, path, (DWORD)sizeof(path));
    if (n == 0 || n >= sizeof(path)) return "";
    std::string p(path, n);
    const size_t slash = p.find_last_of("\\/");
#else
    Dl_info info;
    if (!dladdr(reinterpret_cast<void*>(&own_directory), &info) || !info.dli_fname) return "";
    std::string p(info.dli_fname);
    const size_t slash = p.find_last_of('/');
#endif
    return slash == std::string::npos ? std::string() : p.substr(0, slash + 1);
}

bool file_exists(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return f.good();
}

// Loads a backend library and checks its table; the record says what happened.
void load_library(BackendRecord& r) {
#ifdef _WIN32
    HMODULE h = LoadLibraryA(r.path.c_str());
    if (!h) {
        r.reason = "could not load " + r.path + " (Windows error " + std::to_string(GetLastError()) + ")";
        return;
    }
    auto entry = reinterpret_cast<BackendEntryFn>(reinterpret_cast<void*>(GetProcAddress(h, EMBER_BACKEND_ENTRY)));
#else
    void* h = dlopen(r.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char* e = dlerror();
        r.reason = std::string("could not load ") + r.path + ": " + (e ? e : "unknown error");
        return;
    }
    auto entry = reinterpret_cast<BackendEntryFn>(dlsym(h, EMBER_BACKEND_ENTRY));
#endif
    if (!entry) {
        r.reason = r.path + " is not an Ember backend (it has no " EMBER_BACKEND_ENTRY ")";
        return;
    }
    const BackendIface* t = entry();
    if (!t) {
        r.reason = r.path + " returned no backend table";
        return;
    }
    if (t->abi_version != kBackendAbiVersion || t->tensor_size != sizeof(Tensor)) {
        r.reason = r.path + " was built for backend ABI " + std::to_string(t->abi_version) + " (tensor size " +
                   std::to_string(t->tensor_size) + "); this engine needs ABI " +
                   std::to_string(kBackendAbiVersion) + " (tensor size " + std::to_string(sizeof(Tensor)) +
                   "): install matching versions";
        return;
    }
    if (t->name && *t->name) r.name = t->name;
    r.label = t->label && *t->label ? t->label : r.name;
    r.score = t->score;
    char err[512] = {0};
    if (t->init(err, sizeof(err)) != 0) {
        r.reason = err[0] ? err : "its initialization failed";
        return;
    }
    const int n = t->device_count();
    if (n <= 0) {
        r.reason = "no device found";
        return;
    }
    r.iface = t;
    r.usable = true;
}

std::vector<BackendRecord> load_all() {
    std::vector<BackendRecord> out;
    BackendRecord cpu;
    cpu.name = "cpu";
    cpu.label = "CPU";
    cpu.usable = true;
    out.push_back(cpu);

    std::vector<std::string> paths;
    if (const char* env = std::getenv("EMBER_BACKEND_PATH")) {
        std::string s(env);
        size_t start = 0;
        while (start <= s.size()) {
            size_t end = s.find(kPathSep, start);
            if (end == std::string::npos) end = s.size();
            if (end > start) paths.push_back(s.substr(start, end - start));
            start = end + 1;
        }
    }
    for (const std::string& p : paths) {
        BackendRecord r;
        r.path = p;
        // until its table says, the name is the file's: libember-NAME.so / ember-NAME.dll
        const size_t slash = p.find_last_of("/\\");
        r.name = slash == std::string::npos ? p : p.substr(slash + 1);
        for (const char* prefix : {"libember-", "ember-"})
            if (r.name.rfind(prefix, 0) == 0) {
                r.name = r.name.substr(std::strlen(prefix));
                break;
            }
        const size_t dot = r.name.find('.');
        if (dot != std::string::npos && dot > 0) r.name = r.name.substr(0, dot);
        r.label = r.name;
        if (!file_exists(p)) r.reason = p + " does not exist (EMBER_BACKEND_PATH)";
        else load_library(r);
        out.push_back(r);
    }
    const std::string dir = own_directory();
    for (const char* name : kKnownBackends) {
        bool named = false;
        for (const BackendRecord& r : out) named = named || r.name == name;
        if (named) continue;  // EMBER_BACKEND_PATH gave one of this name
        BackendRecord r;
        r.name = name;
        r.label = std::strcmp(name, "cuda") == 0 ? "CUDA" : name;
        r.path = dir + library_file(name);
        if (!file_exists(r.path)) r.reason = "this Ember has no " + r.label + " backend (" + library_file(name) +
                                             " is not installed next to the engine)";
        else load_library(r);
        out.push_back(r);
    }
    return out;
}

void cpu_info(BackendDeviceInfo& info) {
    std::memset(&info, 0, sizeof(info));
    std::string name = std::string("CPU (") + isa_label(active_isa()) + ")";
#if defined(__linux__)
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("model name", 0) == 0) {
            const size_t colon = line.find(':');
            if (colon != std::string::npos) name = line.substr(colon + 2) + " (" + isa_label(active_isa()) + ")";
            break;
        }
#endif
    std::strncpy(info.name, name.c_str(), sizeof(info.name) - 1);
#ifdef _WIN32
    MEMORYSTATUSEX ms;
    ms.dwLength = sizeof(ms);
    if (GlobalMemoryStatusEx(&ms)) {
        info.memory_total = ms.ullTotalPhys;
        info.memory_free = ms.ullAvailPhys;
    }
#elif defined(_SC_PHYS_PAGES)
    const long page = sysconf(_SC_PAGESIZE);
    const long total = sysconf(_SC_PHYS_PAGES);
    if (page > 0 && total > 0) info.memory_total = (uint64_t)total * (uint64_t)page;
#if defined(_SC_AVPHYS_PAGES)
    const long avail = sysconf(_SC_AVPHYS_PAGES);
    if (page > 0 && avail > 0) info.memory_free = (uint64_t)avail * (uint64_t)page;
#endif
#endif
}

}  // namespace

const std::vector<BackendRecord>& backend_registry() {
    static std::once_flag once;
    static std::vector<BackendRecord>* records = nullptr;
    std::call_once(once, [] { records = new std::vector<BackendRecord>(load_all()); });  // never freed: libraries stay loaded
    return *records;
}

std::vector<BackendDeviceRow> backend_devices() {
    std::vector<BackendDeviceRow> rows;
    for (const BackendRecord& r : backend_registry()) {
        if (r.name == "cpu") {
            BackendDeviceRow row;
            row.backend = &r;
            row.device = 0;
            cpu_info(row.info);
            rows.push_back(row);
            continue;
        }
        if (!r.usable) {
            BackendDeviceRow row;
            row.backend = &r;
            rows.push_back(row);
            continue;
        }
        const int n = r.iface->device_count();
        for (int d = 0; d < n; ++d) {
            BackendDeviceRow row;
            row.backend = &r;
            row.device = d;
            if (r.iface->device_info(d, &row.info) != 0) std::memset(&row.info, 0, sizeof(row.info));
            row.info.name[sizeof(row.info.name) - 1] = 0;
            rows.push_back(row);
        }
    }
    return rows;
}

const BackendRecord* find_backend(const std::string& name) {
    for (const BackendRecord& r : backend_registry())
        if (r.name == name) return &r;
    return nullptr;
}

}  // namespace ember
