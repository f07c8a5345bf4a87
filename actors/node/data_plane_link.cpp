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

int32_t rank_in_plan(const epoch_started& epoch, int64_t node_id, int local_rank) {
  // The node's workers are in the plan in local-rank order.
  int seen = 0;
  for (const auto& assignment : epoch.plan)
    if (assignment.node_id == node_id && assignment.role == "worker" && seen++ == local_rank)
      return assignment.rank;
  return -1;
}

int32_t ranks_in_plan(const epoch_started& epoch) {
  int32_t ranks = 0;
  for (const auto& assignment : epoch.plan) ranks += assignment.role == "worker" ? 1 : 0;
  return ranks;
}

std::string rank_layout(const epoch_started& epoch) {
  std::string text;
  for (const auto& member : epoch.members) {
    int32_t first = -1, last = -1;
    for (const auto& assignment : epoch.plan) {
      if (assignment.node_id != member.node_id || assignment.role != "worker") continue;
      if (first < 0) first = assignment.rank;
      last = assignment.rank;
    }
    if (first < 0) continue;
    if (!text.empty()) text += ", ";
    text += "node " + std::to_string(member.node_id);
    text += first == last ? ": rank " + std::to_string(first)
                          : ": ranks " + std::to_string(first) + "-" + std::to_string(last);
  }
  return text;
}

namespace {

// Every rank's payload of `epoch`'s rendezvous, by rank.
std::vector<std::string> exchange(caf::actor_system& sys, const epoch_started& epoch,
                                  const config::JobConfig& config, int32_t rank,
                                  const std::string& mine) {
  std::vector<std::string> payloads;
  std::string failure;
  caf::scoped_actor self{sys};
  const auto agent = names::lookup(sys, names::membership);
  if (!agent) throw rendezvous_failed("no node agent to exchange data-plane addresses through");
  // Every rank must arrive: as long as the slowest node takes to build its trainer.
  const auto limit = std::chrono::milliseconds(
      static_cast<int64_t>(config.cluster.start_timeout_s * 1000));
  self->request(agent, limit, rendezvous_atom::value, epoch.epoch, rank, mine)
      .receive([&](rendezvous_result& result) { payloads = std::move(result.payloads); },
               [&](caf::error& error) { failure = sys.render(error); });
  if (!failure.empty())
    throw rendezvous_failed("data-plane rendezvous of epoch " + std::to_string(epoch.epoch) +
                            " failed: " + failure);
  return payloads;
}

int32_t planned_rank(const epoch_started& epoch, const config::JobConfig& config,
                     int local_rank) {
  const int32_t rank = rank_in_plan(epoch, config.cluster.node_id, local_rank);
  if (rank < 0)
    throw std::runtime_error("epoch " + std::to_string(epoch.epoch) + " has no worker of local "
                             "rank " + std::to_string(local_rank) + " on node " +
                             std::to_string(config.cluster.node_id));
  return rank;
}

}  // namespace

std::unique_ptr<comm::Communicator> connect_data_plane(caf::actor_system& sys,
                                                       const epoch_started& epoch,
                                                       const config::JobConfig& config,
                                                       int32_t ranks, int local_rank) {
  const int32_t rank = planned_rank(epoch, config, local_rank);
  const int32_t planned = ranks_in_plan(epoch);
  if (ranks < 0) ranks = planned;
  if (rank >= ranks || ranks > planned)
    throw std::logic_error("rank " + std::to_string(rank) + " of epoch " +
                           std::to_string(epoch.epoch) + " is not among its " +
                           std::to_string(ranks) + " connecting ranks");
  comm::CommOptions options;
  options.op_timeout = std::chrono::milliseconds(config.comm.timeout_ms);
  options.epoch = epoch.epoch;
  comm::UcxCommunicatorBuilder builder(rank, ranks, options);
  const std::string mine = comm::pack_strings({config.cluster.advertise_host, builder.address()});
  const auto payloads = exchange(sys, epoch, config, rank, mine);
  std::vector<std::string> hosts, addresses;
  for (int32_t peer = 0; peer < ranks && peer < static_cast<int32_t>(payloads.size()); ++peer) {
    auto parts = comm::unpack_strings(payloads[static_cast<size_t>(peer)]);
    if (parts.size() != 2)
      throw rendezvous_failed("malformed data-plane address of rank " + std::to_string(peer) +
                              " in the rendezvous of epoch " + std::to_string(epoch.epoch));
    hosts.push_back(parts[0]);
    addresses.push_back(parts[1]);
  }
  return builder.connect(addresses, hosts);
}

void stand_by_in_rendezvous(caf::actor_system& sys, const epoch_started& epoch,
                            const config::JobConfig& config) {
  exchange(sys, epoch, config, planned_rank(epoch, config, 0), std::string());
}

}  // namespace dseek::actors
