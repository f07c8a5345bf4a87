// Implementation of run_node.hpp: dseek-node's actor system and its wait for the node
// actor's result.
#include "actors/node/run_node.hpp"

#include <cstdio>
#include <optional>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/cluster/tls_files.hpp"
#include "runtime/util/exit_codes.hpp"

namespace dseek::actors {

namespace {

class node_system_config : public caf::actor_system_config {
 public:
  explicit node_system_config(const config::ClusterConfig& cluster) {
    register_node_types(*this, cluster);
  }
};

}  // namespace

int run_node(const config::JobConfig& config, const node_options& options, bool* stopped_early) {
  // libcaf_openssl terminates the process on a file it cannot load: check them before it
  // starts, with a message that names the file (spawn_node checks them too).
  const auto& cluster = config.cluster;
  if (!cluster.tls_ca.empty()) check_tls_files(cluster.tls_ca, cluster.tls_cert, cluster.tls_key);
  node_system_config system_config(cluster);
  caf::actor_system sys{system_config};
  caf::scoped_actor main{sys};
  node_options node_options = options;
  node_options.subscribers.push_back(caf::actor_cast<caf::actor>(main));
  const node_actor node = spawn_node(sys, config, node_options);
  main->monitor(node);
  // The node's events (already in its events.jsonl), its result, then its exit.
  std::optional<node_result> result;
  std::string gone;
  bool down = false;
  while (!down)
    main->receive([](node_event&) {}, [&](node_result& r) { result = std::move(r); },
                  [&](caf::down_msg& msg) {
                    down = true;
                    gone = sys.render(msg.reason);
                  });
  if (!result) {
    std::fprintf(stderr, "dseek-node: the node actor ended without a result: %s\n", gone.c_str());
    return exit_code::failed;
  }
  if (stopped_early != nullptr) *stopped_early = result->stopped_early;
  return result->exit_code;
}

}  // namespace dseek::actors
