// Connects a node's worker to the data plane for one world epoch: builds this rank's UCX
// endpoint, exchanges (host, address) with every rank through the coordinator's
// rendezvous (the node agent forwards it), and connects. Called from the worker's
// training thread (it blocks, bounded by the timeouts). Tensors then move over UCX,
// never through CAF messages (DESIGN.md). A re-planned pipeline or tensor-parallel job
// may train on fewer ranks than the epoch has: only those connect, the others stand by.
//
// With comm.backend = "nccl" (a data-parallel job on train.device = "cuda"), rank 0 adds
// a fresh NCCL unique id to its rendezvous payload, and every rank then also joins the
// epoch's NCCL communicator on the GPU it trains on: the gradients go over NCCL, the
// host-memory exchanges (state agreement, peer shard replicas) over UCX. A new epoch
// builds both anew; the caller aborts both when the epoch ends (EpochBoard).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/cluster/cluster_messages.hpp"
#include "comm/communicator.hpp"
#include "runtime/config/job_config.hpp"

namespace dseek::actors {

// The rendezvous of an epoch did not complete (the epoch changed meanwhile, or the
// coordinator is gone): try again in a later epoch.
struct rendezvous_failed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The epoch's data plane could not reach one of its ranks (UCX found no way to it:
// "Destination is unreachable" in ucp_ep_create, e.g. a link just back whose neighbour
// entries are stale, or the fail_connect fault): peer() is the rank among the
// connecting ones, `node` the node that holds it and `host` its address. Something a
// retry in a new epoch can cure (control/epoch_loop.hpp).
struct data_plane_unreachable : comm::CommError {
  data_plane_unreachable(comm::ErrorKind kind, const std::string& what, int rank,
                         int64_t peer_node, std::string peer_host)
      : comm::CommError(kind, what, rank), node(peer_node), host(std::move(peer_host)) {}
  int64_t node;
  std::string host;
};

// The data-parallel rank of this node's worker group `local_rank` (cluster.gpus_per_node
// of them) in `epoch`'s plan; -1 if the plan has no such worker here.
int32_t rank_in_plan(const epoch_started& epoch, int64_t node_id, int local_rank = 0);

// The node that holds plan rank `rank` of `epoch` (-1: none).
int64_t node_of_rank(const epoch_started& epoch, int32_t rank);

// How many data-parallel ranks `epoch`'s plan has (every member's workers).
int32_t ranks_in_plan(const epoch_started& epoch);

// Which node holds which ranks in `epoch`'s plan, for people: "node 0: ranks 0-1, node 1:
// ranks 2-3".
std::string rank_layout(const epoch_started& epoch);

// One more round of the epoch's rendezvous, before the data plane's: every rank of the
// epoch (standby ones too) contributes `payload` and gets every rank's, by plan rank.
// A rank that stands by (past the ranks that train) takes part with an empty payload
// (no address) and connects nothing. Throws rendezvous_failed as connect_data_planes does.
std::vector<std::string> exchange_in_rendezvous(caf::actor_system& sys, const epoch_started& epoch,
                                                const config::JobConfig& config, int local_rank,
                                                const std::string& payload);

// The communicators of one epoch: `host` (UCX) always; `device` (NCCL, on the GPU) with
// comm.backend = "nccl", else null.
struct EpochDataPlanes {
  std::unique_ptr<comm::Communicator> host;
  std::unique_ptr<comm::Communicator> device;
};

// How connect_data_planes places this rank and what it lets the caller see.
struct ConnectOptions {
  // The first `ranks` ranks of the epoch connect (-1: all).
  int32_t ranks = -1;
  // Which of the node's worker groups connects (its CUDA device too).
  int local_rank = 0;
  // A re-planned layout placed by memory (train/layout/memory_placement.hpp): order[k]
  // is the plan rank that connects as rank k (null: plan rank k).
  const std::vector<int32_t>* order = nullptr;
  // Gets the UCX communicator while it waits for every rank to be wired up, and nullptr
  // after (UcxCommunicatorBuilder::connect): the node's EpochBoard aborts it there when
  // the epoch is over before all ranks arrived.
  std::function<void(comm::Communicator*)> while_connecting;
  // The fail_connect fault: after the rendezvous, connecting fails as if the first other
  // connecting rank were unreachable (data_plane_unreachable), while the peers wait for
  // this rank in the connect's barrier, as with a real unreachable peer.
  bool fail_as_unreachable = false;
  // Told of every operation of the planes (CommOptions::observer: the node's trace).
  std::shared_ptr<const comm::WorkObserver> observer;
};

// Connects worker group options.local_rank (each its own UCX worker and endpoints: ranks
// of one process reach each other as ranks of two processes do) to the first
// options.ranks ranks of `epoch`: the UCX plane, plus with config.comm.backend = "nccl"
// the NCCL communicator of those ranks on CUDA device `local_rank` (the group's device).
// The other ranks must call exchange_in_rendezvous with "", since the rendezvous waits for every
// rank of the epoch. Throws rendezvous_failed when the rendezvous fails (the epoch
// changed meanwhile, no coordinator), data_plane_unreachable when a peer cannot be
// reached (naming it) and comm::CommError when connecting fails otherwise.
EpochDataPlanes connect_data_planes(caf::actor_system& sys, const epoch_started& epoch,
                                    const config::JobConfig& config,
                                    const ConnectOptions& options = {});

// At the node's start: comm.backend = "nccl" in a build without NCCL throws
// config::ConfigError naming the key.
void check_data_plane_available(const config::JobConfig& config);
// At the node's start: warns on stderr when no local interface holds
// cluster.advertise_host (the data plane may then use every interface).
void check_advertised_interface(const config::JobConfig& config);

}  // namespace dseek::actors
