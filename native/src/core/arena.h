// 64-byte aligned memory: an owning buffer, and a bump arena carved out of one.
// The compute graph's intermediates and the KV cache live here, allocated once.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember {

constexpr size_t kAlignment = 64;  // cache line; also what AVX-512 loads like

inline size_t align_up(size_t n, size_t a = kAlignment) { return (n + a - 1) / a * a; }

void* aligned_malloc(size_t size);  // throws ember::Error(EMBER_ERR_OUT_OF_MEMORY)
void aligned_free(void* p);

class AlignedBuffer {
public:
    AlignedBuffer() = default;
    explicit AlignedBuffer(size_t size) { resize(size); }
    ~AlignedBuffer() { aligned_free(data_); }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
    AlignedBuffer(AlignedBuffer&& o) noexcept : data_(o.data_), size_(o.size_) {
        o.data_ = nullptr;
        o.size_ = 0;
    }

    // Discards the contents; only reallocates when growing.
    void resize(size_t size);
    void zero();
    uint8_t* data() const { return data_; }
    size_t size() const { return size_; }

private:
    uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

// Bump allocator: every allocation is 64-byte aligned; reset() frees all at once.
class Arena {
public:
    explicit Arena(size_t capacity) : buffer_(capacity) {}
    void* allocate(size_t size);  // throws EMBER_ERR_OUT_OF_MEMORY when full
    void reset() { used_ = 0; }
    size_t used() const { return used_; }
    size_t capacity() const { return buffer_.size(); }

private:
    AlignedBuffer buffer_;
    size_t used_ = 0;
};

}  // namespace ember
