// Implementation of checkpoint_outcomes.hpp.
#include "actors/node/checkpoint_outcomes.hpp"

#include "runtime/util/json_fields.hpp"

namespace dseek::actors {

void CheckpointOutcomes::observe(std::string_view event, std::string_view fields) {
  const bool committed = event == "checkpoint_committed";
  if (!committed && event != "checkpoint_failed") return;
  const auto step = util::json_number_field(fields, "step");
  if (!step) return;
  std::lock_guard lock(mutex_);
  const auto at = static_cast<int64_t>(*step);
  if (committed) {
    if (at > newest_committed_) newest_committed_ = at;
  } else if (at >= newest_failed_) {
    newest_failed_ = at;
    newest_failed_error_ = util::json_string_field(fields, "error").value_or("(no message)");
  }
}

std::string CheckpointOutcomes::final_failure() const {
  std::lock_guard lock(mutex_);
  if (newest_failed_ < 0 || newest_failed_ <= newest_committed_) return "";
  return "the checkpoint of step " + std::to_string(newest_failed_) +
         ", the run's last, was not written: " + newest_failed_error_ + "; " +
         (newest_committed_ < 0 ? std::string("no checkpoint of this run was committed")
                                : "the newest committed checkpoint is step " +
                                      std::to_string(newest_committed_));
}

}  // namespace dseek::actors
