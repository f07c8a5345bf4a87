// Implementation of fault_plan.hpp.
#include "actors/faults/fault_plan.hpp"

namespace dseek::actors {

FaultPlan::FaultPlan(const std::vector<config::FaultSpec>& faults, int64_t node_id,
                     int64_t incarnation) {
  if (incarnation > 0) return;
  for (const auto& fault : faults) {
    // fail_checkpoint_write is injected by the checkpoint code itself.
    if (fault.kind == config::FaultKind::fail_checkpoint_write) continue;
    if (fault.node == -1 || fault.node == node_id) faults_.push_back(fault);
  }
  fired_.assign(faults_.size(), false);
}

std::vector<config::FaultSpec> FaultPlan::due_at_step(int64_t step) {
  std::lock_guard lock(mutex_);
  std::vector<config::FaultSpec> due;
  for (size_t i = 0; i < faults_.size(); ++i) {
    if (fired_[i] || faults_[i].step < 0 || faults_[i].step > step) continue;
    if (faults_[i].during == config::FaultDuring::reduction) continue;
    fired_[i] = true;
    due.push_back(faults_[i]);
  }
  return due;
}

std::vector<config::FaultSpec> FaultPlan::due_in_reduction(int64_t step) {
  std::lock_guard lock(mutex_);
  std::vector<config::FaultSpec> due;
  for (size_t i = 0; i < faults_.size(); ++i) {
    if (fired_[i] || faults_[i].during != config::FaultDuring::reduction || faults_[i].step != step) continue;
    fired_[i] = true;
    due.push_back(faults_[i]);
  }
  return due;
}

std::vector<std::pair<size_t, config::FaultSpec>> FaultPlan::pending_timed() {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<size_t, config::FaultSpec>> out;
  for (size_t i = 0; i < faults_.size(); ++i)
    if (!fired_[i] && faults_[i].step < 0 && faults_[i].after_seconds >= 0)
      out.emplace_back(i, faults_[i]);
  return out;
}

bool FaultPlan::claim(size_t index) {
  std::lock_guard lock(mutex_);
  if (index >= fired_.size() || fired_[index]) return false;
  fired_[index] = true;
  return true;
}

}  // namespace dseek::actors
