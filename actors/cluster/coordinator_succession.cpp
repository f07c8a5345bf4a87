// Implementation of coordinator_succession.hpp.
#include "actors/cluster/coordinator_succession.hpp"

#include <utility>

#include <caf/actor_system.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

namespace dseek::actors {
namespace {

// Attempts on a candidate after a failover: it may be a moment from publishing (the
// survivors notice the loss within a heartbeat of each other).
constexpr std::uint32_t kAttemptsAfterFailover = 4;

}  // namespace

CoordinatorSuccession::CoordinatorSuccession(std::int64_t this_node,
                                             std::vector<coordinator_candidate> candidates,
                                             HostFunction host, LocalPrimary local_primary)
    : this_node_(this_node),
      candidates_(std::move(candidates)),
      host_(std::move(host)),
      local_primary_(std::move(local_primary)) {
  // A fresh walk: the backups first (once each), then the primary.
  if (candidates_.size() > 1) {
    index_ = 0;
    step();
  }
}

// (The node stops a hosted coordinator at its end: stop_hosting.)
CoordinatorSuccession::~CoordinatorSuccession() = default;

coordinator_candidate CoordinatorSuccession::current() const {
  std::lock_guard lock(mutex_);
  return candidates_.at(index_);
}

std::uint32_t CoordinatorSuccession::attempts_here() const {
  std::lock_guard lock(mutex_);
  if (failed_over_) return kAttemptsAfterFailover;
  return candidates_.at(index_).backup ? 1 : 0;
}

bool CoordinatorSuccession::failed_over() const {
  std::lock_guard lock(mutex_);
  return failed_over_;
}

void CoordinatorSuccession::lost() {
  std::lock_guard lock(mutex_);
  failed_over_ = true;
  lost_address_ = candidates_.at(index_).address;
  step();
}

std::string CoordinatorSuccession::take_lost() {
  std::lock_guard lock(mutex_);
  return std::exchange(lost_address_, std::string{});
}

void CoordinatorSuccession::advance() {
  std::lock_guard lock(mutex_);
  step();
}

void CoordinatorSuccession::step() {
  for (std::size_t tried = 0; tried < candidates_.size(); ++tried) {
    index_ = (index_ + 1) % candidates_.size();
    const auto& next = candidates_[index_];
    // A backup of this node's own runs only after a failover (at the job's start the
    // primary coordinates); the primary is always a candidate.
    if (next.backup && next.node_id == this_node_ && !failed_over_) continue;
    break;
  }
  if (hosted_ && hosted_index_ != index_) stop_hosting_locked();
}

std::string CoordinatorSuccession::host_if_mine(caf::actor_system& sys) {
  std::lock_guard lock(mutex_);
  const auto& here = candidates_.at(index_);
  if (!here.backup || here.node_id != this_node_ || !failed_over_) return "";
  if (hosted_ && hosted_index_ == index_) return "";
  auto started = host_(sys, here);
  if (!started) return sys.render(started.error());
  hosted_ = std::move(*started);
  hosted_index_ = index_;
  return "";
}

caf::actor CoordinatorSuccession::hosted() const {
  std::lock_guard lock(mutex_);
  return hosted_;
}

caf::actor CoordinatorSuccession::local_current(caf::actor_system& sys) const {
  std::lock_guard lock(mutex_);
  if (hosted_ && hosted_index_ == index_) return hosted_;
  const auto& here = candidates_.at(index_);
  if (!here.backup && here.node_id == this_node_ && local_primary_) return local_primary_(sys);
  return nullptr;
}

void CoordinatorSuccession::stop_hosting() {
  std::lock_guard lock(mutex_);
  stop_hosting_locked();
}

void CoordinatorSuccession::stop_hosting_locked() {
  if (hosted_) caf::anon_send_exit(hosted_, caf::exit_reason::user_shutdown);
  hosted_ = nullptr;
}

}  // namespace dseek::actors
