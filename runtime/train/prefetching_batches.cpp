// Implementation of prefetching_batches.hpp.
#include "runtime/train/prefetching_batches.hpp"

#include "runtime/train/prefetch_queue.hpp"

#include <algorithm>
#include <cstring>

namespace dseek::train {

PrefetchingBatches::PrefetchingBatches(BatchSource& source, int64_t depth)
    : source_(source), depth_(std::max<int64_t>(depth, 1)), thread_([this] { run(); }) {}

PrefetchingBatches::~PrefetchingBatches() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void PrefetchingBatches::fill(uint64_t step, int64_t batch_size, int64_t first, int64_t count,
                              int64_t context, int32_t* inputs, int32_t* targets) {
  const Call call{batch_size, first, count, context};
  const size_t tokens = static_cast<size_t>(count * context);
  {
    std::unique_lock lock(mutex_);
    if (step != current_step_) {
      // A new step: the calls of the one before are the pattern to prefetch with, and
      // batches of steps gone by are of no use any more.
      if (!pattern_.empty()) last_pattern_ = pattern_;
      pattern_.clear();
      current_step_ = step;
      ready_.erase(ready_.begin(), ready_.lower_bound({step, Call{}}));
      if (next_to_prefetch_ <= step) next_to_prefetch_ = step + 1;
      wake_.notify_all();
    }
    if (pattern_.empty()) note_prefetch_queue_depth(steps_ready());  // the step's first call
    pattern_.push_back(call);
    if (auto it = ready_.find({step, call}); it != ready_.end()) {
      std::memcpy(inputs, it->second.inputs.data(), tokens * sizeof(int32_t));
      std::memcpy(targets, it->second.targets.data(), tokens * sizeof(int32_t));
      ready_.erase(it);
      ++stats_.hits;
      return;
    }
    ++stats_.misses;
  }
  source_.fill(step, batch_size, first, count, context, inputs, targets);
}

int64_t PrefetchingBatches::steps_ready() const {
  int64_t steps = 0;
  for (auto it = ready_.begin(); it != ready_.end(); it = ready_.lower_bound({it->first.first + 1, Call{}}))
    ++steps;
  return steps;
}

PrefetchingBatches::Stats PrefetchingBatches::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void PrefetchingBatches::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] {
      return stopping_ || (!last_pattern_.empty() &&
                           next_to_prefetch_ <= current_step_ + static_cast<uint64_t>(depth_));
    });
    if (stopping_) return;
    const uint64_t step = next_to_prefetch_++;
    const std::vector<Call> calls = last_pattern_;
    lock.unlock();
    // Filled outside the lock: the trainer keeps taking what is ready meanwhile.
    std::vector<std::pair<Call, Ready>> filled;
    for (const Call& c : calls) {
      Ready r;
      const size_t tokens = static_cast<size_t>(c.count * c.context);
      r.inputs.resize(tokens);
      r.targets.resize(tokens);
      source_.fill(step, c.batch_size, c.first, c.count, c.context, r.inputs.data(),
                   r.targets.data());
      filled.emplace_back(c, std::move(r));
    }
    lock.lock();
    if (step < current_step_) continue;  // the trainer got there first
    for (auto& [c, r] : filled) ready_.emplace(std::make_pair(step, c), std::move(r));
  }
}

}  // namespace dseek::train
