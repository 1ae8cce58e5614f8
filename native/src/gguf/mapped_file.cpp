#include "gguf/mapped_file.h"

#include <cerrno>
#include <cstring>

#include "core/error.h"

#ifdef _WIN32
#  ifndef NOMINMAX
#    define NOMINMAX
#  endif
#  include <windows.h>
#else
#  include <fcntl.h>
#  include <sys/mman.h>
#  include <sys/stat.h>
#  include <unistd.h>
#endif

namespace ember {

#ifdef _WIN32

static std::string win32_error_message(DWORD code) {
    char buf[512] = {0};
    DWORD n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, nullptr,
                             code, 0, buf, sizeof(buf), nullptr);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) buf[--n] = 0;
    return n ? std::string(buf) : "error " + std::to_string(code);
}

static std::wstring utf8_to_wide(const std::string& s) {
    int n = MultiByteToWideChar(CP_UTF8, 0, s.data(), (int)s.size(), nullptr, 0);
    std::wstring w((size_t)n, L'\0');
    MultiByteToWideChar(CP_UTF8, 0, s.data(), (int)s.size(), w.data(), n);
    return w;
}

std::unique_ptr<MappedFile> MappedFile::open(const std::string& path) {
    std::unique_ptr<MappedFile> mf(new MappedFile());
    HANDLE file = CreateFileW(utf8_to_wide(path).c_str(), GENERIC_READ, FILE_SHARE_READ, nullptr,
                              OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
    if (file == INVALID_HANDLE_VALUE)
        fail(EMBER_ERR_IO, "cannot open '" + path + "': " + win32_error_message(GetLastError()));
    mf->file_handle_ = file;
    LARGE_INTEGER size;
    if (!GetFileSizeEx(file, &size))
        fail(EMBER_ERR_IO, "cannot stat '" + path + "': " + win32_error_message(GetLastError()));
    mf->size_ = (uint64_t)size.QuadPart;
    if (mf->size_ == 0) return mf;  // an empty file maps to nothing; the reader refuses it
    HANDLE mapping = CreateFileMappingW(file, nullptr, PAGE_READONLY, 0, 0, nullptr);
    if (!mapping)
        fail(EMBER_ERR_IO, "cannot map '" + path + "': " + win32_error_message(GetLastError()));
    mf->mapping_handle_ = mapping;
    void* view = MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, 0);
    if (!view)
        fail(EMBER_ERR_IO, "cannot map '" + path + "': " + win32_error_message(GetLastError()));
    mf->data_ = static_cast<const uint8_t*>(view);
    return mf;
}

MappedFile::~MappedFile() {
    if (data_) UnmapViewOfFile(data_);
    if (mapping_handle_) CloseHandle(mapping_handle_);
    if (file_handle_) CloseHandle(file_handle_);
}

void MappedFile::advise_willneed(uint64_t, uint64_t) const {}

void MappedFile::release(uint64_t offset, uint64_t length) const {
    if (!data_ || offset >= size_) return;
    const uint64_t page = 4096, b = (offset + page - 1) & ~(page - 1);
    const uint64_t e = (offset + length < size_ ? offset + length : size_) & ~(page - 1);
    // unlocking pages that are not locked takes them out of the working set
    if (e > b) VirtualUnlock(const_cast<uint8_t*>(data_) + b, (SIZE_T)(e - b));
}

#else

std::unique_ptr<MappedFile> MappedFile::open(const std::string& path) {
    std::unique_ptr<MappedFile> mf(new MappedFile());
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(EMBER_ERR_IO, "cannot open '" + path + "': " + std::strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        ::close(fd);
        fail(EMBER_ERR_IO, "cannot stat '" + path + "': " + std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        fail(EMBER_ERR_IO, "'" + path + "' is not a regular file");
    }
    mf->size_ = (uint64_t)st.st_size;
    if (mf->size_ == 0) {
        ::close(fd);
        return mf;
    }
    void* p = mmap(nullptr, (size_t)mf->size_, PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    ::close(fd);  // the mapping keeps the file alive
    if (p == MAP_FAILED) fail(EMBER_ERR_IO, "cannot map '" + path + "': " + std::strerror(e));
    mf->data_ = static_cast<const uint8_t*>(p);
    return mf;
}

MappedFile::~MappedFile() {
    if (data_) munmap(const_cast<uint8_t*>(data_), (size_t)size_);
}

void MappedFile::advise_willneed(uint64_t offset, uint64_t length) const {
    if (!data_ || offset >= size_) return;
    const uint64_t page = 4096;
    uint64_t start = offset & ~(page - 1);
    uint64_t end = offset + length < size_ ? offset + length : size_;
    madvise(const_cast<uint8_t*>(data_) + start, (size_t)(end - start), MADV_WILLNEED);
}

void MappedFile::release(uint64_t offset, uint64_t length) const {
    if (!data_ || offset >= size_) return;
    const uint64_t page = 4096, b = (offset + page - 1) & ~(page - 1);
    const uint64_t e = (offset + length < size_ ? offset + length : size_) & ~(page - 1);
    if (e > b) madvise(const_cast<uint8_t*>(data_) + b, (size_t)(e - b), MADV_DONTNEED);
}

#endif

}  // namespace ember
