// Persistent worker threads. run() executes one job on every thread (the caller
// is thread 0) and returns when all are done; inside a job, barrier() lines the
// threads up between graph nodes (spin first, then yield, then sleep).
// Optional pinning (Linux): worker i runs only on the i-th CPU the process may use; the
// caller (thread 0) is left alone, since it belongs to the application.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ember {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads, bool pin = false);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }
    // job(ith, nth) runs on every thread; exceptions are captured and rethrown here.
    void run(const std::function<void(int, int)>& job);
    void barrier();
    // Workers pinned to one CPU each (false where pinning was not asked for, is not
    // supported here, or the process may use fewer CPUs than there are threads).
    bool pinned() const { return pinned_; }

    // Background work on the calling thread (the loader's four-row copy) gives way to
    // graph threads: below normal priority where the OS allows, else unchanged.
    static void lower_this_thread();

    // Physical cores where the OS tells, else the logical count.
    static int default_thread_count();

private:
    void worker_main(int ith);

    int n_threads_;
    bool pinned_ = false;
    std::vector<int> cpus_;  // worker i's CPU is cpus_[i] when pinned_
    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable done_;
    const std::function<void(int, int)>* job_ = nullptr;
    uint64_t generation_ = 0;  // guarded by mutex_
    int running_ = 0;          // guarded by mutex_
    bool stop_ = false;
    std::exception_ptr error_;

    alignas(64) std::atomic<int> barrier_count_{0};
    alignas(64) std::atomic<uint32_t> barrier_phase_{0};
};

}  // namespace ember
