// What the training paths that cannot lose a node and go on (pipeline_stage_training,
// tensor_parallel_training) do around their run, as the worker's thread runs them: wait
// for the whole world (cluster.start_timeout_s), connect the data plane for that epoch,
// keep the communicator attached to the EpochBoard (board_attachment.hpp) while the run
// goes, and fail the job at once, with "recovery of <kind> jobs is not written yet", when
// the data plane fails (a node died or hung and the epoch moved on).
#pragma once

#include <atomic>
#include <functional>
#include <string_view>

#include <caf/fwd.hpp>

#include "actors/node/epoch_board.hpp"
#include "actors/node/node_messages.hpp"
#include "actors/node/worker.hpp"
#include "comm/communicator.hpp"
#include "runtime/train/run_training.hpp"

namespace dseek::actors {

struct FixedWorldPath {
  std::string_view group;      // "the <group> did not start"
  std::string_view jobs;       // "recovery of <jobs> jobs is not written yet"
  std::string_view member;     // the abort's "this <member>'s training failed"
  std::string_view rank_field; // worker_started's field naming the rank ("stage")
  // Runs the training over the connected data plane with `session` (the job's config,
  // progress off on every rank but 0).
  std::function<train::RunSummary(comm::Communicator& communicator,
                                  const config::JobConfig& session,
                                  const train::RunOptions& options)>
      run;
};

job_finished run_on_fixed_world(const worker_setup& setup, caf::actor_system& sys,
                                EpochBoard& board, const std::atomic<bool>& stop,
                                const FixedWorldPath& path);

}  // namespace dseek::actors
