// What a worker does first when its worker group was restarted (a crash in it: the
// worker, a gradient_shard, the pipeline_stage): its data plane died with the old
// worker, and its peers are still inside collectives with it. It asks the coordinator,
// through the node's agent, for a new epoch with the same members, announced as
// node_lost "worker restarted: ...", which aborts the peers' collectives; every rank
// then goes on from that epoch (control/epoch_loop.hpp).
#pragma once

#include <optional>

#include <caf/fwd.hpp>

#include "actors/cluster/cluster_messages.hpp"
#include "runtime/config/job_config.hpp"

namespace dseek::actors {

// Returns the new epoch, or nothing when this node is no member now (or the
// coordinator did not answer within cluster.connect_timeout_ms: printed on stderr).
std::optional<epoch_started> announce_worker_restart(caf::actor_system& sys,
                                                     const config::JobConfig& config);

}  // namespace dseek::actors
