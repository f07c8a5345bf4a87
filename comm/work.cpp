// The completion state shared by an operation and its handle.
#include "comm/work.hpp"

#include <atomic>

namespace dseek::comm {

void WorkState::complete() {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = true;
    finished_at_ = std::chrono::steady_clock::now();
    done_.store(true, std::memory_order_release);
    cv_.notify_all();
  }
  observe_end();
}

void WorkState::fail(ErrorKind kind, const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = true;
    finished_at_ = std::chrono::steady_clock::now();
    error_.emplace(kind, name_ + ": " + why);
    done_.store(true, std::memory_order_release);
    cv_.notify_all();
  }
  observe_end();
}

bool WorkState::wait_until(std::chrono::steady_clock::time_point until) const {
  if (finished()) return true;
  if (driver_) {
    driver_->drive(*this, until);
    if (finished()) return true;
  }
  std::unique_lock lock(mutex_);
  return cv_.wait_until(lock, until, [&] { return finished_; });
}

void WorkState::rethrow() const {
  std::lock_guard lock(mutex_);
  if (error_) throw *error_;
}

std::optional<CommError> WorkState::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

std::chrono::nanoseconds WorkState::duration() const {
  std::lock_guard lock(mutex_);
  if (!finished_) return std::chrono::nanoseconds{0};
  return finished_at_ - issued_;
}

namespace {
const std::string kNoName = "(empty work)";
void require(const std::shared_ptr<WorkState>& s) {
  if (!s) throw CommError(ErrorKind::invalid_argument, "wait on an empty Work handle");
}
}  // namespace

bool Work::test() const {
  require(state_);
  state_->poke();
  if (!state_->finished()) return false;
  state_->rethrow();
  return true;
}

bool Work::wait(std::chrono::milliseconds timeout) const {
  require(state_);
  if (!state_->wait_until(std::chrono::steady_clock::now() + timeout)) return false;
  state_->rethrow();
  return true;
}

void Work::wait() const {
  require(state_);
  // The progress thread fails the operation at its deadline; the grace period only
  // covers a progress thread that is itself stuck (then we report the timeout here).
  if (!state_->wait_until(state_->deadline() + std::chrono::seconds(5)))
    throw CommError(ErrorKind::timeout, state_->name() + ": no completion by its deadline");
  state_->rethrow();
}

const std::string& Work::name() const { return state_ ? state_->name() : kNoName; }
uint64_t Work::bytes_sent() const { return state_ ? state_->bytes_sent() : 0; }
uint64_t Work::bytes_received() const { return state_ ? state_->bytes_received() : 0; }
std::chrono::nanoseconds Work::duration() const {
  return state_ ? state_->duration() : std::chrono::nanoseconds{0};
}

}  // namespace dseek::comm
