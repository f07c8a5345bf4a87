// The entry point for a process that is one replica of a data-parallel job and already
// has its communicator (through run_layout.hpp): builds the
// CommGradientReducer from the config and runs the whole job (train::run_training:
// events in run_dir/node-<config.cluster.node_id>/, evaluation, checkpoints written by
// replica 0) in one call. Every rank of `comm` calls it with the same config (except
// cluster.node_id) and the same run_dir for checkpoints.
//
// With options.replica, the ranks first agree on the freshest state they hold in memory
// and go on from it (replica_memory.hpp; options.memory_recovery says what they agreed
// on), and the rank keeps every completed step there.
#pragma once

#include "dist/reducer_settings.hpp"
#include "comm/communicator.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/train/run_training.hpp"

namespace dseek::dist {

// `settings`: the reduction (reducer_settings(config), or a test's: a small bucket
// size); options.during_reduction is its after_first_bucket unless it has one.
// `device`: the epoch's NCCL communicator (comm.backend = "nccl"), which the gradients
// then go over when settings.backend_memory (the state agreement and the peer replicas
// stay on `comm`, in host memory; compressed gradients too, ignoring `device`). options.reducer is ignored (replaced by the one built here). Throws
// config::ConfigError for settings the reducer cannot run (reducer_settings()),
// std::invalid_argument when train.batch_size does not split over comm.size() replicas,
// comm::CommError when the data plane fails (the communicator is spent then).
train::RunSummary run_data_parallel(const config::JobConfig& config, train::RunOptions options,
                                    comm::Communicator& comm, ReducerSettings settings,
                                    comm::Communicator* device = nullptr);

}  // namespace dseek::dist
