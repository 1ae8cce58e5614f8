// Per-thread state of the engine: the kernels' scratch arrays (prefill panels, prepared
// activations) and the API's last error message.
//
// No thread_local object in native/ has a destructor, and none may: with mingw-w64's
// emulated TLS (GCC before 16, the Windows build) the storage of a thread_local is freed
// at thread exit before its destructor runs (GCC bug 80816), so the destructor works on
// freed memory; ember.dll crashed that way in a worker thread's exit under wine. Here a
// plain thread_local pointer reaches the thread's state, and the state is freed at thread
// exit by a thread-specific-data destructor (pthread key; FLS callback with MSVC) that is
// handed the pointer itself and never touches TLS.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>

namespace ember {

// The calling thread's last API error (ember_last_error).
std::string& thread_last_error();

namespace detail {
int live_thread_states();  // threads whose state exists now (tests: freed at thread exit)
int new_scratch_slot();
void* thread_scratch(int slot, size_t bytes);
}  // namespace detail

// n elements of T for this thread and this Site (a distinct type per call site, e.g. a
// struct declared in the calling function, so per template instantiation too), 64-byte
// aligned. The array grows to the largest request and is reused by later calls on the
// same thread; it is zero-filled when it grows, and otherwise holds what the thread left
// there. Valid until the next request for the same Site on this thread.
template <class T, class Site>
T* thread_scratch(size_t n) {
    static_assert(std::is_trivially_copyable<T>::value && std::is_trivially_destructible<T>::value,
                  "scratch elements are raw memory");
    static_assert(alignof(T) <= 64, "scratch is 64-byte aligned");
    static const int slot = detail::new_scratch_slot();
    return static_cast<T*>(detail::thread_scratch(slot, n * sizeof(T)));
}

}  // namespace ember
