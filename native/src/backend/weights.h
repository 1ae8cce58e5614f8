// A model's weights copied to devices (backend/sched.h offloads layers).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <tuple>

#include "backend/backend.h"

namespace ember {

// A model's weights copied to devices, shared by every context that offloads them and
// freed when the last one lets go (the model frees what is left).
class DeviceWeightCache {
public:
    DeviceWeightCache() = default;
    ~DeviceWeightCache();
    DeviceWeightCache(const DeviceWeightCache&) = delete;
    DeviceWeightCache& operator=(const DeviceWeightCache&) = delete;
    // The device copy of w, uploaded on first use (in chunks, `uploaded` told the bytes so
    // far; false from it cancels: EMBER_ERR_CANCELLED); throws ember::Error when it cannot.
    void* acquire(const BackendIface* be, int device, const Tensor* w,
                  const std::function<bool(size_t)>& uploaded = nullptr);
    void release(const BackendIface* be, int device, const Tensor* w);

private:
    struct Entry {
        void* ptr = nullptr;
        int refs = 0;
    };
    using Key = std::tuple<const BackendIface*, int, const Tensor*>;
    std::mutex mu_;
    std::map<Key, Entry> entries_;
};

}  // namespace ember
