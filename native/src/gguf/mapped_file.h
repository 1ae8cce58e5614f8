// Read-only file mapping: POSIX mmap, or CreateFileMapping/MapViewOfFile on Windows.
// Weights are used in place from the mapping, never copied.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace ember {

class MappedFile {
public:
    // Throws ember::Error(EMBER_ERR_IO) with the OS reason when the file cannot be mapped.
    static std::unique_ptr<MappedFile> open(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    uint64_t size() const { return size_; }
    // Hint that the range will be read soon (sequential prefetch of weights).
    void advise_willneed(uint64_t offset, uint64_t length) const;
    // Drops this process's mapping of the whole pages in the range (they stay in the page
    // cache and map back when read): for ranges copied elsewhere.
    void release(uint64_t offset, uint64_t length) const;

private:
    MappedFile() = default;
    const uint8_t* data_ = nullptr;
    uint64_t size_ = 0;
#ifdef _WIN32
    void* file_handle_ = nullptr;
    void* mapping_handle_ = nullptr;
#endif
};

}  // namespace ember
