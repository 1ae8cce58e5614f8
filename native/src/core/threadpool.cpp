#include "core/threadpool.h"

#include <fstream>
#include <set>
#include <string>
#include <utility>

#if defined(__linux__)
#  include <pthread.h>
#  include <sched.h>
#  include <sys/resource.h>
#  include <sys/syscall.h>
#  include <unistd.h>
#elif defined(_WIN32)
#  ifndef WIN32_LEAN_AND_MEAN
#    define WIN32_LEAN_AND_MEAN
#  endif
#  ifndef NOMINMAX
#    define NOMINMAX
#  endif
#  include <windows.h>
#elif defined(__APPLE__)
#  include <pthread.h>
#endif

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#  include <immintrin.h>
#  define EMBER_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#  define EMBER_CPU_RELAX() __asm__ __volatile__("yield")
#else
#  define EMBER_CPU_RELAX() ((void)0)
#endif

namespace ember {

ThreadPool::ThreadPool(int n_threads, bool pin) : n_threads_(n_threads < 1 ? 1 : n_threads) {
#if defined(__linux__)
    if (pin && n_threads_ > 1) {
        cpu_set_t allowed;
        CPU_ZERO(&allowed);
        if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
            for (int c = 0; c < CPU_SETSIZE && (int)cpus_.size() < n_threads_; ++c)
                if (CPU_ISSET(c, &allowed)) cpus_.push_back(c);
        pinned_ = (int)cpus_.size() >= n_threads_;
    }
#else
    (void)pin;
#endif
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back(&ThreadPool::worker_main, this, i);
}

void ThreadPool::lower_this_thread() {
#if defined(__linux__)
    // per thread on Linux; at nice 19 it takes little from busy graph threads and the
    // idle cores between decodes (measured: decoding while it copies runs at about the
    // speed of reading the rows as they are)
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
#elif defined(_WIN32)
    (void)SetThreadPriority(GetCurrentThread(), THREAD_PRIORITY_BELOW_NORMAL);
#elif defined(__APPLE__)
    (void)pthread_set_qos_class_self_np(QOS_CLASS_UTILITY, 0);
#endif
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::worker_main(int ith) {
#if defined(__linux__)
    if (pinned_) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus_[(size_t)ith], &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);  // a hint: on failure, run unpinned
    }
#endif
    uint64_t seen = 0;
    for (;;) {
        const std::function<void(int, int)>* job;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            job = job_;
        }
        try {
            (*job)(ith, n_threads_);
        } catch (...) {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!error_) error_ = std::current_exception();
        }
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (--running_ == 0) done_.notify_one();
        }
    }
}

void ThreadPool::run(const std::function<void(int, int)>& job) {
    if (n_threads_ == 1) {
        job(0, 1);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        job_ = &job;
        running_ = n_threads_ - 1;
        error_ = nullptr;
        ++generation_;
    }
    wake_.notify_all();
    std::exception_ptr mine;
    try {
        job(0, n_threads_);
    } catch (...) {
        mine = std::current_exception();
    }
    std::exception_ptr theirs;
    {
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [&] { return running_ == 0; });
        job_ = nullptr;
        theirs = error_;
    }
    if (mine) std::rethrow_exception(mine);
    if (theirs) std::rethrow_exception(theirs);
}

void ThreadPool::barrier() {
    if (n_threads_ == 1) return;
    const uint32_t phase = barrier_phase_.load(std::memory_order_relaxed);
    if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) == n_threads_ - 1) {
        barrier_count_.store(0, std::memory_order_relaxed);
        barrier_phase_.fetch_add(1, std::memory_order_release);
        return;
    }
    // Graph nodes are short: spinning wins; after a while give the core away.
    for (int spins = 0; barrier_phase_.load(std::memory_order_acquire) == phase; ++spins) {
        if (spins < 4096)
            EMBER_CPU_RELAX();
        else
            std::this_thread::yield();
    }
}

int ThreadPool::default_thread_count() {
    int logical = (int)std::thread::hardware_concurrency();
    if (logical <= 0) logical = 1;
#if defined(__linux__)
    // count distinct (physical id, core id) pairs
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::set<std::pair<std::string, std::string>> cores;
    std::string line, phys = "0";
    while (std::getline(cpuinfo, line)) {
        auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
        std::string val = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
        if (key == "physical id") phys = val;
        if (key == "core id") cores.insert({phys, val});
    }
    if (!cores.empty() && (int)cores.size() <= logical) return (int)cores.size();
#endif
    return logical;
}

}  // namespace ember
