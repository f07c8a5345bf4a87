// Implementation of worker_restart.hpp.
#include "actors/worker_group/worker_restart.hpp"

#include <chrono>
#include <cstdio>
#include <string>

#include <caf/scoped_actor.hpp>

#include "actors/node/node_registry.hpp"

namespace dseek::actors {

std::optional<epoch_started> announce_worker_restart(caf::actor_system& sys,
                                                     const config::JobConfig& config) {
  const auto agent = names::lookup(sys, names::membership);
  if (!agent) return std::nullopt;
  std::optional<epoch_started> fresh;
  caf::scoped_actor self{sys};
  self->request(agent, std::chrono::milliseconds(config.cluster.connect_timeout_ms),
                restarted_atom::value, std::string("its worker group was restarted"))
      .receive([&](epoch_started& epoch) { fresh = std::move(epoch); },
               [&](caf::error& error) {
                 std::fprintf(stderr, "dseek-node: the coordinator was not told of this node's "
                              "restarted worker group: %s\n", sys.render(error).c_str());
               });
  return fresh;
}

}  // namespace dseek::actors
