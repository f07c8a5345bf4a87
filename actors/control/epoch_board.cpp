// Implementation of epoch_board.hpp.
#include "actors/control/epoch_board.hpp"

#include "comm/communicator.hpp"

namespace dseek::actors {

void EpochBoard::post(const epoch_started& epoch) {
  std::lock_guard lock(mutex_);
  if (!is_newer_epoch(epoch, latest_)) return;
  if (epoch.coordinator_id != latest_.coordinator_id) {
    // A new coordinator (the old one's node died and came back): its epochs are numbered
    // afresh, and the world of the old one is over.
    abort_epoch_ = 0;
    join_epoch_ = 0;
    if (communicator_ != nullptr && latest_.coordinator_id != 0)
      abort_attached("the coordinator changed");
  }
  latest_ = epoch;
  changed_.notify_all();
}

void EpochBoard::abort_before(std::uint64_t epoch, const std::string& why, bool peers_alive) {
  std::lock_guard lock(mutex_);
  const bool gently = peers_alive && stop_at_step_boundary_ != nullptr;
  if (peers_alive) {
    if (epoch > join_epoch_) {
      join_epoch_ = epoch;
      join_why_ = why;
    }
  } else if (epoch > abort_epoch_) {
    abort_epoch_ = epoch;
    abort_why_ = why;
  }
  if (communicator_ == nullptr || communicator_epoch_ >= epoch) return;
  if (gently)
    *stop_at_step_boundary_ = true;
  else
    abort_attached(why);
}

void EpochBoard::member_finished(std::int64_t node_id) {
  std::lock_guard lock(mutex_);
  finished_members_.push_back(node_id);
  changed_.notify_all();
}

std::vector<std::int64_t> EpochBoard::finished_members() const {
  std::lock_guard lock(mutex_);
  return finished_members_;
}

void EpochBoard::close(bool abort) {
  std::lock_guard lock(mutex_);
  closed_ = true;
  if (abort && communicator_ != nullptr) abort_attached("the worker stopped");
  if (!abort && stop_at_step_boundary_ != nullptr) *stop_at_step_boundary_ = true;
  changed_.notify_all();
}

std::optional<epoch_started> EpochBoard::wait_for(
    const std::function<bool(const epoch_started&)>& accept,
    std::chrono::steady_clock::time_point limit) {
  std::unique_lock lock(mutex_);
  // Re-checks at least every 100 ms: `accept` may depend on the time too.
  while (!closed_) {
    if (accept(latest_)) return latest_;
    if (std::chrono::steady_clock::now() >= limit) return std::nullopt;
    changed_.wait_for(lock, std::chrono::milliseconds(100));
  }
  return std::nullopt;
}

epoch_started EpochBoard::latest() const {
  std::lock_guard lock(mutex_);
  return latest_;
}

void EpochBoard::abort_attached(const std::string& why) {
  communicator_->abort(why);
  if (companion_ != nullptr) companion_->abort(why);
}

void EpochBoard::attach(comm::Communicator* communicator, std::uint64_t epoch,
                        std::atomic<bool>* stop_at_step_boundary,
                        comm::Communicator* companion) {
  std::lock_guard lock(mutex_);
  communicator_ = communicator;
  companion_ = communicator == nullptr ? nullptr : companion;
  communicator_epoch_ = epoch;
  stop_at_step_boundary_ = communicator == nullptr ? nullptr : stop_at_step_boundary;
  if (communicator_ == nullptr) return;
  if (abort_epoch_ > epoch) {
    abort_attached(abort_why_);
  } else if (join_epoch_ > epoch) {
    if (stop_at_step_boundary_ != nullptr)
      *stop_at_step_boundary_ = true;
    else
      abort_attached(join_why_);
  }
  if (closed_ && stop_at_step_boundary_ != nullptr) *stop_at_step_boundary_ = true;
}

}  // namespace dseek::actors
