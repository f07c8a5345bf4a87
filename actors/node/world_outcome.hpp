// How many nodes this node's job ended with, folded from its events (the world_size of
// its last epoch_layout, up to its training's end), against the consent to shrink that elastic.min_nodes gives: a job
// configured for N nodes that finishes on fewer without that consent lost capacity (and a
// node's share of the work) silently before; now that is an error (issue 28, "no silent
// loss"), named in the node's last lines and its node_failed event.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace dseek::actors {

class WorldOutcome {
 public:
  WorldOutcome(int64_t configured_nodes, int64_t min_nodes)
      : configured_(configured_nodes), min_nodes_(min_nodes) {}

  // One event of the node's log (an EventLog listener). The world is frozen at the
  // node's first train_done or standby_ended: later epochs are the members leaving.
  void observe(std::string_view event, std::string_view fields_json);

  // Why the finished job is not a success: it ended with fewer members than
  // cluster.nodes without consent (elastic.min_nodes = 0), or with fewer than
  // elastic.min_nodes. Empty when it is fine or no epoch was seen.
  std::string shrink_without_consent() const;

 private:
  const int64_t configured_;
  const int64_t min_nodes_;
  mutable std::mutex mutex_;
  int64_t world_ = 0;  // the members of the epoch last planned in (0: none yet)
  bool frozen_ = false;
};

}  // namespace dseek::actors
