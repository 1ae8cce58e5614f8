// The backends this process can use: the CPU (built in, always usable) and the GPU
// backends that live in their own shared libraries, found next to the engine library
// (libember-cuda.so, ember-cuda.dll) or named in EMBER_BACKEND_PATH (a list of library
// files, ':'-separated, ';' on Windows). Each library is loaded once, its table checked
// (ABI version, Tensor size) and initialized; one that cannot be used stays in the list
// with the reason, so users and the app can be told why the CPU runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace ember {

struct BackendRecord {
    std::string name;   // "cpu", "cuda", "test"
    std::string label;  // "CPU", "CUDA"
    std::string path;   // the library ("" for the CPU)
    const BackendIface* iface = nullptr;  // null for the CPU and for unusable backends
    bool usable = false;
    std::string reason;  // why not usable
    int32_t score = 0;
};

// Loaded on first use, thread-safe, never unloaded.
const std::vector<BackendRecord>& backend_registry();

// One row per usable device, and one row (device -1) per unusable backend.
struct BackendDeviceRow {
    const BackendRecord* backend = nullptr;
    int device = -1;
    BackendDeviceInfo info{};
};
std::vector<BackendDeviceRow> backend_devices();

// "cuda" -> its record (null when no backend of that name was found).
const BackendRecord* find_backend(const std::string& name);

}  // namespace ember
