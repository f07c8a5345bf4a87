// Implementation of world_policy.hpp.
#include "actors/control/world_policy.hpp"

#include "actors/control/data_plane_link.hpp"

namespace dseek::actors {

double ms_since(WorldClock::time_point t) {
  return std::chrono::duration<double, std::milli>(WorldClock::now() - t).count();
}

bool WorldPolicy::accepts(const epoch_started& e) const {
  const bool later = e.coordinator_id != after_coordinator || e.epoch > after_epoch;
  if (!later || e.epoch == 0 || rank_in_plan(e, config.cluster.node_id) < 0) return false;
  if (e.world_size >= config.cluster.nodes - evicted) return true;
  if (first) return false;
  const double waited_s = ms_since(failed_at) / 1000.0;
  return waited_s >= config.elastic.rejoin_seconds && e.world_size >= config.elastic.min_nodes;
}

WorldClock::time_point WorldPolicy::wait_limit(WorldClock::time_point waited_from) const {
  return waited_from +
         std::chrono::milliseconds(static_cast<int64_t>(config.cluster.start_timeout_s * 1000)) +
         std::chrono::milliseconds(
             static_cast<int64_t>(first ? 0 : config.elastic.rejoin_seconds * 1000));
}

}  // namespace dseek::actors
