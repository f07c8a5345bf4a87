// Implementation of checkpoint_writer.hpp.
#include "actors/node/checkpoint_writer.hpp"

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_addr.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/faults/crash_request.hpp"

namespace dseek::actors::detail {

// What a sink shares with the requests it sends: the snapshot buffer and its write's
// state. Shared, so that a request still queued when its sink is gone stays valid.
struct snapshot_slot {
  checkpoint::WriteOptions options;
  checkpoint::Snapshot snapshot;
  std::mutex mutex;
  std::condition_variable idle;
  bool pending = false;
  std::vector<checkpoint::WriteOutcome> outcomes;

  void complete(checkpoint::WriteOutcome outcome) {
    std::lock_guard lock(mutex);
    outcomes.push_back(std::move(outcome));
    pending = false;
    idle.notify_all();
  }
};

// One snapshot handed over. It completes its slot exactly once: written by run(), or,
// destroyed without having run (the actor died or was gone), as a failed write.
class persist_job {
 public:
  persist_job(std::shared_ptr<snapshot_slot> slot, bool fail_midway)
      : slot_(std::move(slot)), fail_midway_(fail_midway) {}
  persist_job(const persist_job&) = delete;
  persist_job& operator=(const persist_job&) = delete;
  ~persist_job() {
    if (!slot_) return;
    checkpoint::WriteOutcome outcome;
    outcome.step = slot_->snapshot.step;
    outcome.error = "checkpoint of step " + std::to_string(outcome.step) + " not written: " +
                    unrun_reason_;
    slot_->complete(std::move(outcome));
  }

  // On the actor's thread. The snapshot is the job's until complete().
  void run() {
    auto slot = std::move(slot_);
    slot->complete(checkpoint::write_reporting(slot->snapshot, slot->options, fail_midway_));
  }
  void set_unrun_reason(std::string reason) { unrun_reason_ = std::move(reason); }

 private:
  std::shared_ptr<snapshot_slot> slot_;
  bool fail_midway_;
  std::string unrun_reason_ = "the checkpoint_writer actor stopped before writing it";
};

// The one message of the actor. Local to the process (a pointer to host memory), so
// never announced.
struct persist_request {
  std::shared_ptr<persist_job> job;
};

}  // namespace dseek::actors::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::detail::persist_request)

namespace dseek::actors {

namespace {

using detail::persist_job;
using detail::persist_request;
using detail::snapshot_slot;

// The running checkpoint_writer of each actor system, held weakly. Not CAF's registry:
// it holds strong references, and a detached actor's thread waits for its actor to be
// destroyed, so a registered one would hang the actor system's shutdown.
class writer_directory {
 public:
  void set(caf::actor_system& sys, caf::actor_addr writer) {
    std::lock_guard lock(mutex_);
    writers_[&sys] = std::move(writer);
  }
  // The current one, or an invalid handle (none yet, or it died and is being restarted).
  caf::actor get(caf::actor_system& sys) {
    std::lock_guard lock(mutex_);
    auto found = writers_.find(&sys);
    return found == writers_.end() ? caf::actor{} : caf::actor_cast<caf::actor>(found->second);
  }

 private:
  std::mutex mutex_;
  std::map<caf::actor_system*, caf::actor_addr> writers_;
};

writer_directory& directory() {
  static writer_directory instance;
  return instance;
}

class actor_sink final : public checkpoint::CheckpointSink {
 public:
  actor_sink(caf::actor_system& sys, const checkpoint::WriteOptions& options)
      : sys_(sys), slot_(std::make_shared<snapshot_slot>()) {
    slot_->options = options;
  }
  ~actor_sink() override { wait(); }

  bool busy() const override {
    std::lock_guard lock(slot_->mutex);
    return slot_->pending;
  }
  checkpoint::Snapshot& buffer() override { return slot_->snapshot; }
  void submit(bool fail_midway) override {
    {
      std::lock_guard lock(slot_->mutex);
      slot_->pending = true;
    }
    auto job = std::make_shared<persist_job>(slot_, fail_midway);
    if (auto writer = directory().get(sys_)) {
      caf::anon_send(writer, persist_request{std::move(job)});
    } else {
      // Between a crash and its restart: this checkpoint fails, the next is tried.
      job->set_unrun_reason("no checkpoint_writer actor is running on this node");
    }
  }
  void wait() override {
    std::unique_lock lock(slot_->mutex);
    slot_->idle.wait(lock, [&] { return !slot_->pending; });
  }
  std::vector<checkpoint::WriteOutcome> take_outcomes() override {
    std::lock_guard lock(slot_->mutex);
    return std::exchange(slot_->outcomes, {});
  }
  int64_t in_flight_step() const override {
    std::lock_guard lock(slot_->mutex);
    return slot_->snapshot.step;
  }
  const char* kind() const override { return "actor"; }

 private:
  caf::actor_system& sys_;
  std::shared_ptr<snapshot_slot> slot_;
};

// The interface and the sinks' requests.
using checkpoint_writer_impl =
    checkpoint_writer_actor::extend<caf::reacts_to<persist_request>>;

struct writer_state {
  std::uint64_t run = 0;  // snapshots run
  static inline const char* name = "dseek.checkpoint_writer";
};

checkpoint_writer_impl::behavior_type checkpoint_writer(
    checkpoint_writer_impl::stateful_pointer<writer_state> self, crash_requests crash) {
  directory().set(self->system(), self->address());
  return {
      [self](const persist_request& request) {
        request.job->run();
        ++self->state.run;
      },
      [self](caf::get_atom) { return self->state.run; },
      [crash](crash_atom) { crash_now("checkpoint_writer", crash); },
  };
}

}  // namespace

caf::actor spawn_checkpoint_writer(caf::actor_system& sys, crash_requests crash) {
  return caf::actor_cast<caf::actor>(sys.spawn<caf::detached>(checkpoint_writer, crash));
}

checkpoint_writer_actor checkpoint_writer_of(caf::actor_system& sys) {
  return caf::actor_cast<checkpoint_writer_actor>(directory().get(sys));
}

checkpoint::CheckpointSinkFactory checkpoint_sink_for(caf::actor_system& sys) {
  return [&sys](const checkpoint::WriteOptions& options)
             -> std::unique_ptr<checkpoint::CheckpointSink> {
    // A worker without the node's tree (no such actor): the default writer thread.
    if (!directory().get(sys)) return nullptr;
    return std::make_unique<actor_sink>(sys, options);
  };
}

}  // namespace dseek::actors
