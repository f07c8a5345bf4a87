// The entry point for a process that is one replica of a data-parallel job and already
// has its communicator (the node's worker actor; tests/dp/dp_rank_main.cpp): builds the
// CommGradientReducer from the config and runs the whole job (train::run_training:
// events in run_dir/node-<config.cluster.node_id>/, evaluation, checkpoints written by
// replica 0) in one call. Every rank of `comm` calls it with the same config (except
// cluster.node_id) and the same run_dir for checkpoints.
#pragma once

#include "dist/reducer_settings.hpp"
#include "comm/communicator.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/train/run_training.hpp"

namespace dseek::dist {

// Throws config::ConfigError for settings the reducer cannot run (reducer_settings()),
// std::invalid_argument when train.batch_size does not split over comm.size() replicas,
// comm::CommError when the data plane fails (the communicator is spent then).
// options.reducer is ignored (replaced by the one built here).
train::RunSummary run_data_parallel(const config::JobConfig& config, train::RunOptions options,
                                    comm::Communicator& comm);
// The same with the reduction settings given (tests: a small bucket size; the NCCL
// plane); options.during_reduction is their after_first_bucket unless they have one.
train::RunSummary run_data_parallel(const config::JobConfig& config, train::RunOptions options,
                                    comm::Communicator& comm, ReducerSettings settings);

}  // namespace dseek::dist
