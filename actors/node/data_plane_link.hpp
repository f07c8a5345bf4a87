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
#include <memory>
#include <stdexcept>

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

// This node's data-parallel rank in `epoch`'s plan; -1 if the plan has no worker here.
int32_t rank_in_plan(const epoch_started& epoch, int64_t node_id);

// Throws rendezvous_failed when the rendezvous fails (the epoch changed meanwhile, no
// coordinator) and comm::CommError when connecting fails. `ranks`: how many of the
// epoch's ranks (the first ones) train and connect (-1: all); the others must call
// stand_by_in_rendezvous, since the rendezvous waits for every rank of the epoch.
std::unique_ptr<comm::Communicator> connect_data_plane(caf::actor_system& sys,
                                                       const epoch_started& epoch,
                                                       const config::JobConfig& config,
                                                       int32_t ranks = -1);

// The communicators of one epoch: `host` (UCX) always; `device` (NCCL, on the GPU) with
// comm.backend = "nccl", else null.
struct EpochDataPlanes {
  std::unique_ptr<comm::Communicator> host;
  std::unique_ptr<comm::Communicator> device;
};

// connect_data_plane for every rank of `epoch`, plus the NCCL communicator on CUDA device
// `device` when config.comm.backend = "nccl". Throws as connect_data_plane does.
EpochDataPlanes connect_data_planes(caf::actor_system& sys, const epoch_started& epoch,
                                    const config::JobConfig& config, int device = 0);

// At the node's start: comm.backend = "nccl" in a build without NCCL throws
// config::ConfigError naming the key.
void check_data_plane_available(const config::JobConfig& config);

// A rank past the `ranks` that train in `epoch` (it stands by): takes part in the
// rendezvous with no address, and connects nothing. Throws rendezvous_failed.
void stand_by_in_rendezvous(caf::actor_system& sys, const epoch_started& epoch,
                            const config::JobConfig& config);

}  // namespace dseek::actors
