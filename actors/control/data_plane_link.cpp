// Implementation of data_plane_link.hpp.
#include "actors/control/data_plane_link.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/node/node_registry.hpp"
#include "comm/bootstrap/bootstrap.hpp"
#include "comm/net_device.hpp"
#include "comm/ucx/ucx_communicator.hpp"
#include "runtime/config/load.hpp"
#ifdef DSEEK_HAVE_NCCL
#include "comm/nccl/nccl_communicator.hpp"
#endif

namespace dseek::actors {

int32_t rank_in_plan(const epoch_started& epoch, int64_t node_id, int local_rank) {
  // The node's workers are in the plan in local-rank order.
  int seen = 0;
  for (const auto& assignment : epoch.plan)
    if (assignment.node_id == node_id && assignment.role == "worker" && seen++ == local_rank)
      return assignment.rank;
  return -1;
}

int64_t node_of_rank(const epoch_started& epoch, int32_t rank) {
  for (const auto& assignment : epoch.plan)
    if (assignment.role == "worker" && assignment.rank == rank) return assignment.node_id;
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

// Every rank's payload of `epoch`'s rendezvous, by rank; `data_key` (optional) gets the
// key of its data plane.
std::vector<std::string> exchange(caf::actor_system& sys, const epoch_started& epoch,
                                  const config::JobConfig& config, int32_t rank,
                                  const std::string& mine, uint64_t* data_key = nullptr) {
  std::vector<std::string> payloads;
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
            payloads = std::move(result.payloads);
            if (data_key != nullptr) *data_key = result.data_key;
          },
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

// The address whose interface the data plane uses: loopback for a job of one node,
// whatever it advertises.
std::string data_plane_host(const config::JobConfig& config) {
  return config.cluster.nodes == 1 ? std::string("127.0.0.1") : config.cluster.advertise_host;
}

comm::CommOptions comm_options(const epoch_started& epoch, const config::JobConfig& config,
                               std::shared_ptr<const comm::WorkObserver> observer) {
  comm::CommOptions options;
  options.op_timeout = std::chrono::milliseconds(config.comm.timeout_ms);
  options.epoch = epoch.epoch;
  options.observer = std::move(observer);
  // UCX's network transports on the interface of the advertised address only (loopback
  // for a job of one node, whatever it advertises; a node warns at its start when no
  // interface holds it: check_advertised_interface).
  if (auto device = comm::net_device_of(data_plane_host(config))) options.net_device = *device;
  return options;
}

std::unique_ptr<comm::Communicator> connect_nccl_plane(const std::string& unique_id,
                                                       const epoch_started& epoch,
                                                       const config::JobConfig& config,
                                                       int32_t rank, int32_t ranks, int device,
                                                       std::shared_ptr<const comm::WorkObserver> observer) {
#ifdef DSEEK_HAVE_NCCL
  // The world is the connecting ranks (cluster.gpus_per_node of them a node).
  return comm::connect_nccl(unique_id, rank, ranks, device, comm_options(epoch, config, std::move(observer)));
#else
  (void)unique_id;
  (void)epoch;
  (void)rank;
  (void)ranks;
  (void)device;
  (void)observer;
  check_data_plane_available(config);
  return nullptr;
#endif
}

// Connects the UCX plane of the first options.ranks ranks; with `nccl`, rank 0's payload
// also carries a fresh NCCL unique id, returned in `nccl_id` on every rank.
std::unique_ptr<comm::Communicator> connect_ucx_plane(caf::actor_system& sys,
                                                      const epoch_started& epoch,
                                                      const config::JobConfig& config,
                                                      const ConnectOptions& options, bool nccl,
                                                      std::string& nccl_id) {
  const std::vector<int32_t>* order = options.order;
  int32_t ranks = options.ranks;
  const int32_t planned_as = planned_rank(epoch, config, options.local_rank);
  const int32_t planned = ranks_in_plan(epoch);
  if (ranks < 0) ranks = planned;
  // This rank's place among the connecting ranks: its plan rank, or where `order` puts it.
  int32_t rank = planned_as;
  if (order != nullptr) {
    const auto at = std::find(order->begin(), order->end(), planned_as);
    rank = at == order->end() ? ranks : static_cast<int32_t>(at - order->begin());
    if (static_cast<int32_t>(order->size()) != ranks)
      throw std::logic_error("a placement of " + std::to_string(order->size()) + " ranks for " +
                             std::to_string(ranks) + " connecting ranks");
  }
  if (rank >= ranks || ranks > planned)
    throw std::logic_error("rank " + std::to_string(planned_as) + " of epoch " +
                           std::to_string(epoch.epoch) + " is not among its " +
                           std::to_string(ranks) + " connecting ranks");
  comm::UcxCommunicatorBuilder builder(rank, ranks, comm_options(epoch, config, options.observer));
  std::vector<std::string> parts{config.cluster.advertise_host, builder.address()};
  if (nccl) {
    check_data_plane_available(config);
#ifdef DSEEK_HAVE_NCCL
    parts.push_back(rank == 0 ? comm::make_nccl_unique_id() : std::string());
#endif
  }
  // The coordinator's key for this rendezvous masks the data plane's tags: a process
  // that is not a member of the epoch cannot write into its receives.
  uint64_t data_key = 0;
  const auto payloads =
      exchange(sys, epoch, config, planned_as, comm::pack_strings(parts), &data_key);
  builder.set_data_key(data_key);
  std::vector<std::string> hosts, addresses;
  std::vector<int32_t> slots;  // the plan rank of each connecting rank
  const size_t expected = nccl ? 3 : 2;
  for (int32_t peer = 0; peer < ranks; ++peer) {
    const int32_t slot = order != nullptr ? (*order)[static_cast<size_t>(peer)] : peer;
    if (slot < 0 || slot >= static_cast<int32_t>(payloads.size()))
      throw rendezvous_failed("the rendezvous of epoch " + std::to_string(epoch.epoch) +
                              " has no address of rank " + std::to_string(slot));
    auto theirs = comm::unpack_strings(payloads[static_cast<size_t>(slot)]);
    if (theirs.size() != expected)
      throw rendezvous_failed("malformed data-plane address of rank " + std::to_string(peer) +
                              " in the rendezvous of epoch " + std::to_string(epoch.epoch));
    hosts.push_back(theirs[0]);
    addresses.push_back(theirs[1]);
    slots.push_back(slot);
    if (nccl && peer == 0) nccl_id = theirs[2];
  }
  // Names the rank that could not be reached by its node and host.
  const auto unreachable = [&](const comm::CommError& cause, int peer) {
    const int64_t node = node_of_rank(epoch, slots[static_cast<size_t>(peer)]);
    const std::string& host = hosts[static_cast<size_t>(peer)];
    return data_plane_unreachable(
        cause.kind(),
        "the data plane of epoch " + std::to_string(epoch.epoch) + " could not connect to node " +
            std::to_string(node) + " (rank " + std::to_string(peer) + " at " + host +
            "): " + cause.what(),
        peer, node, host);
  };
  if (options.fail_as_unreachable && ranks > 1) {
    const int peer = rank == 0 ? 1 : 0;
    throw unreachable(comm::CommError(comm::ErrorKind::peer_failed,
                                      "injected fault fail_connect: UCX error 'Destination is "
                                      "unreachable' in ucp_ep_create to rank " +
                                          std::to_string(peer),
                                      peer),
                      peer);
  }
  try {
    return builder.connect(addresses, hosts, options.while_connecting);
  } catch (const comm::CommError& failure) {
    if (failure.peer() < 0 || failure.peer() >= ranks) throw;
    throw unreachable(failure, failure.peer());
  }
}

}  // namespace

std::vector<std::string> exchange_in_rendezvous(caf::actor_system& sys, const epoch_started& epoch,
                                                const config::JobConfig& config, int local_rank,
                                                const std::string& payload) {
  return exchange(sys, epoch, config, planned_rank(epoch, config, local_rank), payload);
}

EpochDataPlanes connect_data_planes(caf::actor_system& sys, const epoch_started& epoch,
                                    const config::JobConfig& config,
                                    const ConnectOptions& options) {
  const int device = options.local_rank;  // worker group i drives CUDA device i (node_tree.hpp)
  const bool nccl = config.comm.backend == config::CommBackend::nccl;
#ifdef DSEEK_HAVE_NCCL
  if (nccl) comm::require_cuda_device(device);  // before the peers wait for this rank
#endif
  std::string nccl_id;
  EpochDataPlanes planes;
  planes.host = connect_ucx_plane(sys, epoch, config, options, nccl, nccl_id);
  if (nccl)
    planes.device = connect_nccl_plane(nccl_id, epoch, config, planes.host->rank(),
                                       planes.host->size(), device, options.observer);
  return planes;
}

void check_advertised_interface(const config::JobConfig& config) {
  if (!comm::net_device_of(data_plane_host(config)))
    std::fprintf(stderr, "dseek-node: warning: no local interface holds cluster.advertise_host "
                 "\"%s\": the data plane may use every interface\n",
                 config.cluster.advertise_host.c_str());
}

void check_data_plane_available(const config::JobConfig& config) {
#ifndef DSEEK_HAVE_NCCL
  if (config.comm.backend == config::CommBackend::nccl)
    throw config::ConfigError(config.source + ": comm.backend = \"nccl\": this build has no NCCL "
                              "(it is built with CUDA where nvcc and NCCL are found, "
                              "DSEEK_WITH_CUDA); use comm.backend = \"ucx\"");
#else
  (void)config;
#endif
}

}  // namespace dseek::actors
