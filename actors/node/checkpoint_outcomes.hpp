// What became of this node's checkpoint writes, folded from its events
// (checkpoint_committed / checkpoint_failed), so that a run whose last checkpoint was not
// written does not end with exit 0 as if nothing was lost (issue 28, finding 4: on a full
// disk every write failed with a good message and the run still said train_done, exit 0).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace dseek::actors {

class CheckpointOutcomes {
 public:
  // One event of the node's log (an EventLog listener; held by it through a shared_ptr,
  // as actors may still emit while the node shuts down).
  void observe(std::string_view event, std::string_view fields_json);

  // Why the run's last checkpoint is missing: its newest write (by step) failed. Empty
  // when it was committed or nothing was written on this node.
  std::string final_failure() const;

 private:
  mutable std::mutex mutex_;
  int64_t newest_committed_ = -1;
  int64_t newest_failed_ = -1;
  std::string newest_failed_error_;
};

}  // namespace dseek::actors
