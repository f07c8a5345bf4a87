// Implementation of data_plane_link.hpp.
#include "actors/node/data_plane_link.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/node/node_registry.hpp"
#include "comm/bootstrap/bootstrap.hpp"
#include "comm/ucx/ucx_communicator.hpp"

namespace dseek::actors {

int32_t rank_in_plan(const epoch_started& epoch, int64_t node_id) {
  for (const auto& assignment : epoch.plan)
    if (assignment.node_id == node_id && assignment.role == "worker") return assignment.rank;
  return -1;
}

std::unique_ptr<comm::Communicator> connect_data_plane(caf::actor_system& sys,
                                                       const epoch_started& epoch,
                                                       const config::JobConfig& config) {
  const int32_t rank = rank_in_plan(epoch, config.cluster.node_id);
  if (rank < 0)
    throw std::runtime_error("epoch " + std::to_string(epoch.epoch) + " has no worker on node " +
                             std::to_string(config.cluster.node_id));
  comm::CommOptions options;
  options.op_timeout = std::chrono::milliseconds(config.comm.timeout_ms);
  options.epoch = epoch.epoch;
  comm::UcxCommunicatorBuilder builder(rank, epoch.world_size, options);
  const std::string mine = comm::pack_strings({config.cluster.advertise_host, builder.address()});

  std::vector<std::string> hosts, addresses;
  std::string failure;
  caf::scoped_actor self{sys};
  const auto agent = names::lookup(sys, names::membership);
  if (!agent) throw rendezvous_failed("no node agent to exchange data-plane addresses through");
  // Every rank must arrive: as long as the slowest node takes to build its trainer.
  const auto limit = std::chrono::milliseconds(
      static_cast<int64_t>(config.cluster.start_timeout_s * 1000));
  self->request(agent, limit, rendezvous_atom::value, epoch.epoch, rank, mine)
      .receive(
          [&](rendezvous_result& result) {
            for (const auto& payload : result.payloads) {
              auto parts = comm::unpack_strings(payload);
              if (parts.size() != 2) {
                failure = "malformed data-plane address in the rendezvous";
                return;
              }
              hosts.push_back(parts[0]);
              addresses.push_back(parts[1]);
            }
          },
          [&](caf::error& error) { failure = sys.render(error); });
  if (!failure.empty())
    throw rendezvous_failed("data-plane rendezvous of epoch " + std::to_string(epoch.epoch) +
                            " failed: " + failure);
  return builder.connect(addresses, hosts);
}

}  // namespace dseek::actors
