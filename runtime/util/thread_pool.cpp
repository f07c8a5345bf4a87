// Implementation of thread_pool.hpp. Workers spin briefly on the job generation (a
// step issues hundreds of parallel_for calls back to back, and waking a sleeping
// thread costs tens of microseconds) and then sleep on a condition variable.
#include "runtime/util/thread_pool.hpp"

#include <algorithm>

namespace dseek::util {

namespace {
constexpr int kSpinIterations = 20000;

inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

ThreadPool::ThreadPool(int threads) : threads_(std::max(1, threads)) {
  for (int i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  publish();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::chunk_bounds(size_t n, int chunks, int index, size_t& begin, size_t& end) {
  size_t base = n / static_cast<size_t>(chunks);
  size_t extra = n % static_cast<size_t>(chunks);
  size_t i = static_cast<size_t>(index);
  begin = i * base + std::min(i, extra);
  end = begin + base + (i < extra ? 1 : 0);
}

int ThreadPool::chunks_for(size_t n, size_t min_chunk) const {
  size_t per_chunk = std::max<size_t>(min_chunk, 1);
  size_t wanted = (n + per_chunk - 1) / per_chunk;
  return static_cast<int>(std::min<size_t>(static_cast<size_t>(threads_), wanted));
}

void ThreadPool::run(size_t n, size_t min_chunk, Trampoline fn, void* context) {
  if (n == 0) return;
  int chunks = chunks_for(n, min_chunk);
  if (chunks <= 1) {
    fn(context, 0, n, 0);
    return;
  }
  job_fn_ = fn;
  job_context_ = context;
  job_n_ = n;
  job_chunks_ = chunks;
  // Every worker acknowledges every job, even one without a chunk for it, so no worker
  // can still be reading this job's fields when the next job overwrites them.
  pending_.store(threads_ - 1, std::memory_order_relaxed);
  publish();
  size_t begin, end;
  chunk_bounds(n, chunks, 0, begin, end);
  fn(context, begin, end, 0);
  while (pending_.load(std::memory_order_acquire) != 0) cpu_relax();
}

void ThreadPool::publish() {
  {
    // Bumping under the mutex: a worker that found no new job while holding it is
    // already waiting when notify_all runs, so the wake-up cannot fall in between.
    std::lock_guard lock(sleep_mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
}

void ThreadPool::worker_loop(int index) {
  // 0, not a fresh load: a job may be published before this thread first runs.
  unsigned seen = 0;
  for (;;) {
    unsigned now = generation_.load(std::memory_order_acquire);
    for (int spin = 0; now == seen && spin < kSpinIterations; ++spin) {
      cpu_relax();
      now = generation_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      std::unique_lock lock(sleep_mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      continue;
    }
    seen = now;
    if (stopping_.load()) return;
    if (index < job_chunks_) {
      size_t begin, end;
      chunk_bounds(job_n_, job_chunks_, index, begin, end);
      job_fn_(job_context_, begin, end, index);
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace dseek::util
