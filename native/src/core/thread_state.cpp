#include "core/thread_state.h"

#include <atomic>
#include <cstring>
#include <vector>

#include "core/arena.h"

#if defined(_MSC_VER)
#  define WIN32_LEAN_AND_MEAN
#  include <windows.h>
#else
#  include <pthread.h>
#endif

namespace ember {
namespace {

struct ScratchBlock {
    void* data = nullptr;
    size_t size = 0;
};

std::atomic<int> g_live{0};

struct ThreadState {
    std::vector<ScratchBlock> scratch;  // by slot
    std::string last_error;
    ThreadState() { g_live.fetch_add(1, std::memory_order_relaxed); }
    ~ThreadState() {
        for (ScratchBlock& b : scratch) aligned_free(b.data);
        g_live.fetch_sub(1, std::memory_order_relaxed);
    }
    ThreadState(const ThreadState&) = delete;
    ThreadState& operator=(const ThreadState&) = delete;
};

void destroy_state(void* p) { delete static_cast<ThreadState*>(p); }

// The thread-specific-data key whose destructor frees a thread's state when it exits.
// Deleted when the library is unloaded, so that no destructor runs into unloaded code
// afterwards (states of threads still alive then are left to the process).
class StateKey {
public:
    StateKey() {
#if defined(_MSC_VER)
        index_ = FlsAlloc([](void* p) { destroy_state(p); });
        ok_ = index_ != FLS_OUT_OF_INDEXES;
#else
        ok_ = pthread_key_create(&key_, destroy_state) == 0;
#endif
    }
    ~StateKey() {
        if (!ok_) return;
#if defined(_MSC_VER)
        FlsFree(index_);
#else
        pthread_key_delete(key_);
#endif
    }
    // false where no key could be made: the state then lives until the process ends
    bool attach(ThreadState* state) {
        if (!ok_) return false;
#if defined(_MSC_VER)
        return FlsSetValue(index_, state) != 0;
#else
        return pthread_setspecific(key_, state) == 0;
#endif
    }

private:
    bool ok_ = false;
#if defined(_MSC_VER)
    DWORD index_ = FLS_OUT_OF_INDEXES;
#else
    pthread_key_t key_{};
#endif
};

thread_local ThreadState* t_state = nullptr;  // a pointer: nothing to destroy at thread exit
std::atomic<int> g_slots{0};

ThreadState& state() {
    if (!t_state) {
        static StateKey key;
        auto* s = new ThreadState;
        key.attach(s);
        t_state = s;
    }
    return *t_state;
}

}  // namespace

std::string& thread_last_error() { return state().last_error; }

namespace detail {

int live_thread_states() { return g_live.load(std::memory_order_relaxed); }

int new_scratch_slot() { return g_slots.fetch_add(1, std::memory_order_relaxed); }

void* thread_scratch(int slot, size_t bytes) {
    ThreadState& s = state();
    if ((size_t)slot >= s.scratch.size()) s.scratch.resize((size_t)slot + 1);
    ScratchBlock& b = s.scratch[(size_t)slot];
    if (bytes > b.size || !b.data) {
        void* p = aligned_malloc(bytes);  // throws Error on failure; the old block stays
        std::memset(p, 0, align_up(bytes == 0 ? kAlignment : bytes));
        aligned_free(b.data);
        b.data = p;
        b.size = bytes;
    }
    return b.data;
}

}  // namespace detail
}  // namespace ember
