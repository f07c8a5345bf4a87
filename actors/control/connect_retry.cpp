// Implementation of connect_retry.hpp.
#include "actors/control/connect_retry.hpp"

#include <algorithm>
#include <cstdio>

#include <caf/scoped_actor.hpp>

#include "actors/node/node_registry.hpp"

namespace dseek::actors {

ConnectRetry ConnectRetries::failed(int64_t node) {
  ConnectRetry next;
  next.attempt = ++failures_[node];
  next.backoff = std::min(kMaxBackoff, kFirstBackoff * (1 << std::min(next.attempt - 1, 8)));
  next.drop_peer = next.attempt >= kConnectAttempts;
  if (next.drop_peer) failures_.erase(node);
  return next;
}

std::optional<epoch_started> ask_for_replan(caf::actor_system& sys, const config::JobConfig& config,
                                            uint64_t epoch, int64_t lost_node,
                                            const std::string& why) {
  const auto agent = names::lookup(sys, names::membership);
  if (!agent) {
    std::fprintf(stderr, "dseek-node: no node agent to ask for a new epoch after epoch %llu\n",
                 static_cast<unsigned long long>(epoch));
    return std::nullopt;
  }
  std::optional<epoch_started> current;
  caf::scoped_actor self{sys};
  self->request(agent, std::chrono::milliseconds(config.cluster.connect_timeout_ms),
                replan_atom::value, epoch, lost_node, why)
      .receive([&](epoch_started& answer) { current = std::move(answer); },
               [&](caf::error& error) {
                 std::fprintf(stderr, "dseek-node: the coordinator was not asked for a new epoch "
                              "after epoch %llu: %s\n", static_cast<unsigned long long>(epoch),
                              sys.render(error).c_str());
               });
  return current;
}

}  // namespace dseek::actors
