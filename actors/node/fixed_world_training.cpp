// Implementation of fixed_world_training.hpp.
#include "actors/node/fixed_world_training.hpp"

#include <chrono>
#include <memory>
#include <string>

#include "actors/node/board_attachment.hpp"
#include "actors/node/data_plane_link.hpp"
#include "comm/types.hpp"
#include "runtime/metrics/event_log.hpp"

namespace dseek::actors {

job_finished run_on_fixed_world(const worker_setup& setup, caf::actor_system& sys,
                                EpochBoard& board, const std::atomic<bool>& stop,
                                const FixedWorldPath& path) {
  const auto& config = setup.config;
  job_finished result;
  const auto limit = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(config.cluster.start_timeout_s * 1000));
  auto epoch = board.wait_for(
      [&](const epoch_started& e) {
        return e.epoch > 0 && e.world_size >= config.cluster.nodes &&
               rank_in_plan(e, config.cluster.node_id) >= 0;
      },
      limit);
  if (!epoch) {
    result.stopped_early = stop.load();
    result.ok = result.stopped_early;
    if (!result.ok)
      result.error = "the " + std::string(path.group) + " did not start: the world of " +
                     std::to_string(config.cluster.nodes) + " nodes did not form within " +
                     "cluster.start_timeout_s";
    return result;
  }
  const std::string recovery =
      "recovery of " + std::string(path.jobs) + " jobs is not written yet: the data plane";
  std::unique_ptr<comm::Communicator> communicator;
  try {
    communicator = connect_data_plane(sys, *epoch, config);
    BoardAttachment attachment(board, communicator.get(), epoch->epoch);
    config::JobConfig session = config;
    const int rank = communicator->rank();
    if (rank != 0) session.metrics.progress = "off";  // one progress display per job
    setup.events->emit("worker_started",
                       util::JsonLine().add("epoch", epoch->epoch)
                           .add("world_size", static_cast<int64_t>(epoch->world_size))
                           .add("rank", static_cast<int64_t>(rank))
                           .add(path.rank_field, static_cast<int64_t>(rank)));
    const train::RunSummary summary =
        path.run(*communicator, session, node_run_options(setup, sys, stop));
    result.stopped_early = summary.stopped_early;
    result.steps_done = summary.steps_done;
    result.params_sha256 = summary.params_sha256;
    return result;
  } catch (const comm::CommError& error) {
    result.ok = false;
    result.error = recovery + " failed (" + error.what() + ")";
  } catch (const rendezvous_failed& error) {
    result.ok = false;
    result.error = recovery + "'s rendezvous failed (" + error.what() + ")";
  }
  // Its orderly teardown would wait for the peers that are gone.
  if (communicator) communicator->abort("this " + std::string(path.member) + "'s training failed");
  setup.events->emit("training_interrupted",
                     util::JsonLine().add("epoch", epoch->epoch).add("error", result.error));
  return result;
}

}  // namespace dseek::actors
