// Where the worker actor and its training thread meet: the actor posts every new epoch;
// the thread waits for an epoch it can train in, and registers the communicator it
// trains over so that a membership change (a node lost, or one that joins and must be
// taken in) aborts it at once: survivors fail fast instead of waiting for a collective's
// timeout. A node that left after the job ended does not abort anything (it is counted:
// a node that stands by ends with the job). Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/cluster/cluster_messages.hpp"

namespace dseek::comm {
class Communicator;
}

namespace dseek::actors {

class EpochBoard {
 public:
  // The actor side.
  void post(const epoch_started& epoch);
  // Aborts the registered communicator (if it belongs to an older epoch than `epoch`).
  // `peers_alive` (a node joined: every peer of the communicator is still there): a
  // training attached with a step-boundary flag gets the flag set instead, finishes its
  // step with its peers and stops there (an abort with live peers can leave messages half
  // received into buffers the training is about to free).
  void abort_before(std::uint64_t epoch, const std::string& why, bool peers_alive = false);
  // A member left after its training ended (node_lost "left"): a node that stands by
  // in a re-planned job (control/epoch_loop.hpp) takes it for the job's end.
  void member_finished(std::int64_t node_id);
  // Wakes every wait for good (the worker is stopping). `abort`: also abort the
  // communicator (the worker crashed: its peers must not wait for it); an orderly stop
  // leaves it to finish the step, where the replicas agree to stop together (and sets
  // the attached step-boundary flag).
  void close(bool abort);

  // The thread side. Waits until `accept(latest epoch)` is true, the board is closed
  // (nullopt) or `limit` passed (nullopt).
  std::optional<epoch_started> wait_for(const std::function<bool(const epoch_started&)>& accept,
                                        std::chrono::steady_clock::time_point limit);
  epoch_started latest() const;
  // The members that left after their training ended, so far, in that order.
  std::vector<std::int64_t> finished_members() const;
  // The communicator of `epoch` the thread trains over now (nullptr: none). A
  // communicator registered for an epoch that is already over is aborted at once (or its
  // `stop_at_step_boundary` set, when only nodes joined since). `stop_at_step_boundary`:
  // the flag the training's collective stop vote reads at each step boundary (null: the
  // training is always aborted). `companion`: another communicator of the same epoch
  // (the NCCL one the gradients go over, comm.backend = "nccl"), aborted with it.
  void attach(comm::Communicator* communicator, std::uint64_t epoch,
              std::atomic<bool>* stop_at_step_boundary = nullptr,
              comm::Communicator* companion = nullptr);

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  epoch_started latest_;
  bool closed_ = false;
  std::vector<std::int64_t> finished_members_;
  void abort_attached(const std::string& why);  // with mutex_ held, communicator_ set

  comm::Communicator* communicator_ = nullptr;
  comm::Communicator* companion_ = nullptr;
  std::uint64_t communicator_epoch_ = 0;
  std::atomic<bool>* stop_at_step_boundary_ = nullptr;
  // The newest membership change asked to abort; a communicator of an older epoch
  // attached later is aborted at once. The newest join, after which it stops at its
  // step boundary instead (when it can).
  std::uint64_t abort_epoch_ = 0;
  std::string abort_why_;
  std::uint64_t join_epoch_ = 0;
  std::string join_why_;
};

}  // namespace dseek::actors
