// Implementation of update_progress.hpp.
#include "runtime/train/update_progress.hpp"

#include <utility>

namespace dseek::train {

void UpdateProgress::begin(std::vector<int> reports_needed) {
  std::lock_guard<std::mutex> lock(mutex_);
  missing_ = std::move(reports_needed);
}

void UpdateProgress::report(size_t chunk) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (chunk >= missing_.size() || missing_[chunk] <= 0)
      throw std::logic_error("UpdateProgress: chunk " + std::to_string(chunk) +
                             " reported more often than its pieces hold it");
    --missing_[chunk];
  }
  changed_.notify_all();
}

void UpdateProgress::fail(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_.empty()) failure_ = why.empty() ? "the update failed" : why;
  }
  changed_.notify_all();
}

bool UpdateProgress::updated(size_t chunk) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return chunk < missing_.size() && missing_[chunk] == 0;
}

void UpdateProgress::wait(size_t chunk, std::chrono::milliseconds limit) const {
  std::unique_lock<std::mutex> lock(mutex_);
  if (chunk >= missing_.size())
    throw std::out_of_range("UpdateProgress: no chunk " + std::to_string(chunk) + " of " +
                            std::to_string(missing_.size()));
  const bool ended = changed_.wait_for(lock, limit, [&] {
    return missing_[chunk] == 0 || !failure_.empty();
  });
  if (!failure_.empty()) throw UpdateFailed(failure_);
  if (!ended)
    throw UpdateFailed("chunk " + std::to_string(chunk) + " of the optimizer update was not "
                       "updated within " + std::to_string(limit.count()) + " ms");
}

}  // namespace dseek::train
