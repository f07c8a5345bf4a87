// Implementation of world_outcome.hpp.
#include "actors/node/world_outcome.hpp"

#include "runtime/util/json_fields.hpp"

namespace dseek::actors {

void WorldOutcome::observe(std::string_view event, std::string_view fields) {
  std::lock_guard lock(mutex_);
  if (frozen_) return;
  if (event == "train_done" || event == "standby_ended") {
    frozen_ = true;
    return;
  }
  // The world this node last trained or stood by in (its epoch_layout): the epochs after
  // it are members leaving a finished job, which a standby node still hears of.
  if (event != "epoch_layout") return;
  if (const auto world = util::json_number_field(fields, "world_size"))
    world_ = static_cast<int64_t>(*world);
}

std::string WorldOutcome::shrink_without_consent() const {
  std::lock_guard lock(mutex_);
  if (world_ <= 0 || world_ >= configured_) return "";
  const std::string ended = "the job finished on " + std::to_string(world_) + " of " +
                            std::to_string(configured_) + " configured nodes";
  if (min_nodes_ == 0)
    return ended + " without consent to shrink: set elastic.min_nodes (e.g. " +
           std::to_string(world_) + ") to accept finishing on fewer nodes than cluster.nodes";
  if (world_ < min_nodes_)
    return ended + ", fewer than elastic.min_nodes (" + std::to_string(min_nodes_) + ")";
  return "";
}

}  // namespace dseek::actors
