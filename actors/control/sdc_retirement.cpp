// Implementation of sdc_retirement.hpp.
#include "actors/control/sdc_retirement.hpp"

#include <chrono>
#include <cstdio>

#include <caf/scoped_actor.hpp>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/node/node_registry.hpp"

namespace dseek::actors {

bool retires_instead_of_leaving(const config::JobConfig& config, int64_t node_id) {
  return node_id == config.cluster.coordinator_node;
}

bool retire_from_training(caf::actor_system& sys, const config::JobConfig& config,
                          const std::string& why) {
  const auto agent = names::lookup(sys, names::membership);
  if (!agent) {
    std::fprintf(stderr, "dseek-node: no node agent to take this node out of training\n");
    return false;
  }
  bool done = false;
  caf::scoped_actor self{sys};
  self->request(agent, std::chrono::milliseconds(config.cluster.connect_timeout_ms),
                retire_atom::value, why)
      .receive([&](epoch_started&) { done = true; },
               [&](caf::error& error) {
                 std::fprintf(stderr, "dseek-node: the coordinator did not take this node out "
                              "of training: %s\n", sys.render(error).c_str());
               });
  return done;
}

}  // namespace dseek::actors
