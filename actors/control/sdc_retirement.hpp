// What a node the SDC audit evicted does when it hosts the coordinator
// (cluster.coordinator_node): with no coordinator failover, leaving would end the job, so
// it stops training instead and goes on coordinating the others. The coordinator is
// asked (through the node's agent, retire_atom) for a new epoch with no worker of this
// node in its plan; the node's worker groups then stand by until the job ends, and the
// node exits with exit_code::evicted after it, like any evicted node.
#pragma once

#include <string>

#include <caf/fwd.hpp>

#include "runtime/config/job_config.hpp"

namespace dseek::actors {

// Whether the node evicted as `node_id` stays to coordinate (it hosts the coordinator).
bool retires_instead_of_leaving(const config::JobConfig& config, int64_t node_id);

// Asks the coordinator to take this node out of its plans (bounded by
// cluster.connect_timeout_ms); false, with a line on stderr, when the request failed.
bool retire_from_training(caf::actor_system& sys, const config::JobConfig& config,
                          const std::string& why);

}  // namespace dseek::actors
