#include "core/arena.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

#ifdef _WIN32
#  include <malloc.h>
#endif

namespace ember {

void* aligned_malloc(size_t size) {
    if (size == 0) size = kAlignment;
    size = align_up(size);
#ifdef _WIN32
    void* p = _aligned_malloc(size, kAlignment);
#else
    void* p = std::aligned_alloc(kAlignment, size);
#endif
    if (!p) fail(EMBER_ERR_OUT_OF_MEMORY, "out of memory allocating " + std::to_string(size) + " bytes");
    return p;
}

void aligned_free(void* p) {
#ifdef _WIN32
    _aligned_free(p);
#else
    std::free(p);
#endif
}

void AlignedBuffer::resize(size_t size) {
    if (size <= size_ && data_) return;
    uint8_t* p = static_cast<uint8_t*>(aligned_malloc(size));
    aligned_free(data_);
    data_ = p;
    size_ = size;
}

void AlignedBuffer::zero() {
    if (data_) std::memset(data_, 0, size_);
}

void* Arena::allocate(size_t size) {
    const size_t need = align_up(size);
    if (need > buffer_.size() - used_)
        fail(EMBER_ERR_OUT_OF_MEMORY, "arena of " + std::to_string(buffer_.size()) +
                                          " bytes is full (" + std::to_string(size) + " more wanted)");
    void* p = buffer_.data() + used_;
    used_ += need;
    return p;
}

}  // namespace ember
