// A fixed pool of compute threads for the CPU backend: parallel_for splits a range
// into one contiguous chunk per thread. Chunks are a pure function of (range, thread
// count), so results that depend on the split (partial sums) are deterministic for a
// given thread count. The calling thread works as thread 0.
//
// dseek calls OpenBLAS single-threaded from inside these chunks rather than letting
// OpenBLAS run its own pool: two pools on the same cores spin against each other
// (see shared/notes/platform.md on PyTorch's 2-thread slowdown).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

namespace dseek::util {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return threads_; }

  // Calls body(begin, end, thread) for each of min(size(), ceil(n / min_chunk)) chunks
  // of [0, n), and returns when all are done. Not reentrant.
  template <class Body>
  void parallel_for(size_t n, Body&& body, size_t min_chunk = 1) {
    auto trampoline = [](void* context, size_t begin, size_t end, int thread) {
      (*static_cast<Body*>(context))(begin, end, thread);
    };
    run(n, min_chunk, trampoline, &body);
  }

  // How many chunks parallel_for(n, ..., min_chunk) makes; chunk i runs on thread i.
  int chunks_for(size_t n, size_t min_chunk) const;

  // The chunk [begin, end) that thread `index` of `chunks` gets for a range of n.
  static void chunk_bounds(size_t n, int chunks, int index, size_t& begin, size_t& end);

 private:
  using Trampoline = void (*)(void*, size_t, size_t, int);
  void run(size_t n, size_t min_chunk, Trampoline fn, void* context);
  void publish();  // makes the job fields visible and wakes the workers
  void worker_loop(int index);

  int threads_;
  std::vector<std::thread> workers_;
  // The current job, published by bumping generation_.
  Trampoline job_fn_ = nullptr;
  void* job_context_ = nullptr;
  size_t job_n_ = 0;
  int job_chunks_ = 0;
  std::atomic<unsigned> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stopping_{false};
  // Sleeping workers wait here. (Not std::atomic::wait: libstdc++ 12's can miss a
  // notification and leave a worker asleep while the caller spins for it.)
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
};

}  // namespace dseek::util
