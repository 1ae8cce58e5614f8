// A model's weights in the four-row layout their CPU kernels read (cpu/kernels.h:
// RowGroups), copied by a thread of its own while the model is already in use.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "cpu/kernels.h"

namespace ember {

class WeightRepack {
public:
    // Called with a weight's file bytes once their copy is published: the owner may drop
    // its mapping of them (they stay in the page cache).
    using ReleaseFn = std::function<void(const void* bytes, uint64_t length)>;

    WeightRepack() = default;
    ~WeightRepack();  // stops the copier, then frees the copies
    WeightRepack(const WeightRepack&) = delete;
    WeightRepack& operator=(const WeightRepack&) = delete;

    // Hangs a copy on each of the weights isa's kernels read in four-row groups (2-D, four
    // rows or more; Tensor::extra) and fills them in the background, 1024 rows at a time,
    // publishing each piece. Call while no graph reads the weights. False (nothing done)
    // when there is nothing to copy, EMBER_NO_REPACK is set, or the copies would not fit
    // in available memory (the rows are then read as they are: same results, slower).
    bool start(Isa isa, const std::vector<Tensor*>& weights, ReleaseFn release);
    // How much of the copy is filled (1 when done, or when none is made); with wait,
    // returns when it is done.
    double progress(bool wait) const;

private:
    std::vector<std::pair<void*, size_t>> blocks_;  // aligned_malloc'd
    std::deque<RowGroups> groups_;                  // Tensor::extra, one per weight
    std::deque<std::atomic<int64_t>> filled_;       // RowGroups::filled, one per weight
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> done_{0};
    uint64_t total_ = 0;
    mutable std::mutex mu_;
    mutable std::condition_variable cv_;
    bool running_ = false;  // guarded by mu_
};

}  // namespace ember
