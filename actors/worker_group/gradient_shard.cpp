// Implementation of gradient_shard.hpp.
#include "actors/worker_group/gradient_shard.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/faults/crash_request.hpp"
#include "actors/node/node_registry.hpp"
#include "runtime/train/update_progress.hpp"

namespace dseek::actors::detail {

// The messages of a gradient_shard. `owner` names the client (one per trainer): an actor
// restarted since, or assigned to another trainer, refuses the requests of an old one.
struct shard_assignment {
  std::uint64_t owner = 0;
  std::shared_ptr<const model::ParamLayout> layout;
  optim::AdamWSettings settings;
  std::vector<model::ParamRange> ranges;
  // Not empty: `ranges` with their decay settings (OptimizerSpec::decay_ranges).
  std::vector<optim::DecayRange> decay_ranges;
  std::shared_ptr<backend::HostMemory> host_memory;  // for the moments; null: aligned
};
struct shard_update {
  std::uint64_t owner = 0;
  float* params = nullptr;       // the trainer's whole flat buffers
  const float* grads = nullptr;
  double lr = 0, grad_norm = 0;
  std::int64_t steps_before = 0;  // AdamW's step count before this update
  // The overlapped update (OptimizerShards::start_update): report each of `chunks` to
  // `progress` as this piece's part of it is done. Both null for a plain update.
  std::shared_ptr<train::UpdateProgress> progress;
  std::shared_ptr<const std::vector<model::ParamRange>> chunks;
};
struct shard_second_moment {
  std::uint64_t owner = 0;
  const float* second_moment = nullptr;  // whole host buffer, layout order
};
struct shard_moments {
  std::uint64_t owner = 0;
  bool to_host = true;  // false: from host
  float* adam_m = nullptr;
  float* adam_v = nullptr;
};
// The client `owner` is gone: its moments are freed.
struct shard_release {
  std::uint64_t owner = 0;
};

}  // namespace dseek::actors::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::detail::shard_assignment)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::detail::shard_update)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::detail::shard_moments)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::detail::shard_second_moment)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::detail::shard_release)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::optim::StepStats)

namespace dseek::actors {

namespace {

using detail::shard_assignment;
using detail::shard_moments;
using detail::shard_release;
using detail::shard_second_moment;
using detail::shard_update;

// An update of ~1M floats takes milliseconds; this bounds a wait for an actor that is
// alive but stuck (a request to a dead one fails at once).
constexpr auto kShardAnswer = std::chrono::seconds(30);

// One client's piece: a trainer's optimizer, or one chunk's of a pipeline stage that
// has several (interleaved schedules), all live at once.
struct shard_piece {
  // Single-threaded: the shards are the parallelism. Its memory (the moments) is the
  // trainer backend's host memory: pinned when the trainer runs on a CUDA device.
  std::unique_ptr<backend::Backend> backend;
  std::shared_ptr<const model::ParamLayout> layout;  // outlives adamw, which refers to it
  std::unique_ptr<optim::AdamW> adamw;
};

struct shard_state {
  int index = 0;
  // By client (owner); a client's destructor releases its piece.
  std::map<std::uint64_t, shard_piece> pieces;
  static inline const char* name = "dseek.gradient_shard";
};

caf::error not_assigned(const shard_state& st) {
  return caf::make_error(caf::sec::invalid_argument,
                         "gradient_shard " + std::to_string(st.index) +
                             " holds no state for this trainer (it was restarted)");
}

// The piece of client `owner`, or null.
optim::AdamW* adamw_of(shard_state& st, std::uint64_t owner) {
  const auto it = st.pieces.find(owner);
  return it == st.pieces.end() ? nullptr : it->second.adamw.get();
}

// The update in layout order, reporting each chunk of the piece as soon as the runs
// of the update passed its last element: the trainer sends it to the device at once.
caf::result<optim::StepStats> overlapped_update(shard_state& st, optim::AdamW& adamw,
                                                const shard_update& u) {
  const auto reports = train::chunk_reports(adamw.owned(), *u.chunks);
  size_t next = 0;
  try {
    const auto stats = adamw.step_with_norm(
        u.params, u.grads, u.lr, u.grad_norm, 1.0f, [&](size_t end) {
          for (; next < reports.size() && reports[next].after <= end; ++next)
            u.progress->report(reports[next].chunk);
        });
    for (; next < reports.size(); ++next) u.progress->report(reports[next].chunk);
    return stats;
  } catch (const std::exception& error) {
    // The trainer may be waiting for a chunk of this piece: wake it with the reason.
    const std::string why = "gradient_shard " + std::to_string(st.index) +
                            " failed its update: " + error.what();
    u.progress->fail(why);
    return caf::make_error(caf::sec::runtime_error, why);
  }
}

caf::behavior gradient_shard(caf::stateful_actor<shard_state>* self, int index,
                             crash_requests crash) {
  self->state.index = index;
  return {
      [self](shard_assignment& a) {
        shard_piece& piece = self->state.pieces[a.owner];
        piece.adamw.reset();
        piece.backend = a.host_memory ? backend::make_cpu_backend(1, std::move(a.host_memory))
                                      : backend::make_cpu_backend(1);
        piece.layout = std::move(a.layout);
        piece.adamw = a.decay_ranges.empty()
                          ? std::make_unique<optim::AdamW>(*piece.backend, *piece.layout,
                                                           a.settings, std::move(a.ranges))
                          : std::make_unique<optim::AdamW>(*piece.backend, a.settings,
                                                           a.decay_ranges);
        return caf::ok_atom::value;
      },
      [self](const shard_release& r) { self->state.pieces.erase(r.owner); },
      [self](const shard_update& u) -> caf::result<optim::StepStats> {
        auto& st = self->state;
        optim::AdamW* adamw = adamw_of(st, u.owner);
        if (adamw == nullptr) return not_assigned(st);
        adamw->set_steps_taken(u.steps_before);
        if (!u.progress) return adamw->step_with_norm(u.params, u.grads, u.lr, u.grad_norm);
        return overlapped_update(st, *adamw, u);
      },
      [self](const shard_moments& m) -> caf::result<caf::ok_atom> {
        auto& st = self->state;
        optim::AdamW* adamw = adamw_of(st, m.owner);
        if (adamw == nullptr) return not_assigned(st);
        if (m.to_host)
          adamw->moments_to_host(m.adam_m, m.adam_v);
        else
          adamw->moments_from_host(m.adam_m, m.adam_v);
        return caf::ok_atom::value;
      },
      [self](const shard_second_moment& v) -> caf::result<caf::ok_atom> {
        auto& st = self->state;
        optim::AdamW* adamw = adamw_of(st, v.owner);
        if (adamw == nullptr) return not_assigned(st);
        adamw->set_second_moment(v.second_moment);
        return caf::ok_atom::value;
      },
      [crash](crash_atom) { crash_now("gradient_shard", crash); },
  };
}

std::uint64_t next_owner() {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

// The training thread's side: one piece of the owned ranges per actor.
class actor_optimizer final : public train::OptimizerShards {
 public:
  actor_optimizer(caf::actor_system& sys, std::vector<caf::actor> shards,
                  const train::OptimizerSpec& spec)
      : self_(sys), owner_(next_owner()) {
    pieces_ = train::split_owned(spec.owned, static_cast<int>(shards.size()));
    auto layout = std::make_shared<const model::ParamLayout>(spec.layout);
    shards.resize(pieces_.size());  // a tiny buffer may make fewer pieces than actors
    shards_ = std::move(shards);
    for_all([&](size_t i) {
      return shard_assignment{owner_, layout, spec.settings, pieces_[i],
                              spec.decay_ranges.empty()
                                  ? std::vector<optim::DecayRange>{}
                                  : train::with_decay(pieces_[i], spec.decay_ranges),
                              spec.host_memory};
    }, "take its piece");
    // A shard that goes down wakes a training thread waiting for one of its chunks
    // (at once; a dead shard's answer would come only when the thread asks for it).
    std::weak_ptr<train::UpdateProgress> progress = progress_;
    for (size_t i = 0; i < shards_.size(); ++i)
      shards_[i]->attach_functor([progress, i](const caf::error& reason) {
        if (auto alive = progress.lock())
          alive->fail("gradient_shard " + std::to_string(i) + " went down (" +
                      caf::to_string(reason) + ")");
      });
  }
  ~actor_optimizer() override {
    // The actors write into the trainer's buffers until they answer.
    if (!pending_.empty()) {
      try {
        finish_update();
      } catch (const std::exception&) {
        // Going away after a failure: nothing is left to tell.
      }
    }
    // Each actor may serve several clients (the chunks of a pipeline stage): free ours.
    for (const auto& shard : shards_) caf::anon_send(shard, shard_release{owner_});
  }

  optim::StepStats update(float* params, const float* grads, double lr,
                          double grad_norm) override {
    if (!pending_.empty())
      throw std::logic_error("gradient_shards: update() while a started update is pending");
    // The whole update at once: no progress to report, no chunks.
    const shard_update request{owner_, params, grads, lr, grad_norm, steps_, nullptr, nullptr};
    for (const auto& shard : shards_)
      pending_.push_back(self_->request(shard, kShardAnswer, request));
    return finish_update();
  }
  void moments_to_host(float* adam_m, float* adam_v) override {
    for_all([&](size_t) { return shard_moments{owner_, true, adam_m, adam_v}; },
            "give its moments");
  }
  void moments_from_host(const float* adam_m, const float* adam_v) override {
    // The actors only read from these when asked for from_host.
    for_all([&](size_t) {
      return shard_moments{owner_, false, const_cast<float*>(adam_m), const_cast<float*>(adam_v)};
    }, "take its moments");
  }
  void set_second_moment(const float* second_moment) override {
    for_all([&](size_t) { return shard_second_moment{owner_, second_moment}; },
            "take the second moment");
  }
  int64_t steps_taken() const override { return steps_; }
  void set_steps_taken(int64_t steps) override { steps_ = steps; }
  bool updates_on_host() const override { return true; }
  std::string describe() const override {
    return std::to_string(shards_.size()) + " gradient_shard actors";
  }

  bool updates_in_chunks() const override { return true; }
  void start_update(float* params, const float* grads, double lr, double grad_norm,
                    const std::vector<model::ParamRange>& chunks) override {
    if (!pending_.empty())
      throw std::logic_error("gradient_shards: start_update() while an update is pending");
    auto shared_chunks = std::make_shared<const std::vector<model::ParamRange>>(chunks);
    progress_->begin(train::reports_per_chunk(pieces_, chunks));
    const shard_update request{owner_, params, grads, lr, grad_norm, steps_, progress_,
                               shared_chunks};
    for (const auto& shard : shards_)
      pending_.push_back(self_->request(shard, kShardAnswer, request));
  }
  bool chunk_updated(size_t chunk) const override { return progress_->updated(chunk); }
  void wait_for_chunk(size_t chunk) override {
    try {
      progress_->wait(chunk, std::chrono::duration_cast<std::chrono::milliseconds>(kShardAnswer));
    } catch (const train::UpdateFailed& failure) {
      // A dead shard's own answer says more (its exit reason): take it if it is there.
      finish_update();
      lost("update its chunks", failure.what());
    }
  }
  optim::StepStats finish_update() override {
    optim::StepStats stats;
    receive_all(pending_, [&](optim::StepStats& s) { stats = s; }, "update its parameters");
    ++steps_;
    return stats;
  }

 private:
  // Sends make(i) to shard i, all at once, and waits for every answer.
  template <class Make>
  void for_all(Make make, const char* what) {
    std::vector<decltype(self_->request(shards_[0], kShardAnswer, make(0)))> pending;
    for (size_t i = 0; i < shards_.size(); ++i)
      pending.push_back(self_->request(shards_[i], kShardAnswer, make(i)));
    receive_all(pending, [](caf::ok_atom) {}, what);
  }
  // Waits for every answer in `pending` (each to `on_answer`) and clears it; throws
  // gradient_shard_lost, with the last failure, when a shard did not `what`.
  template <class Answers, class OnAnswer>
  void receive_all(Answers& pending, OnAnswer on_answer, const char* what) {
    std::string failure;
    for (auto& answer : pending)
      answer.receive(on_answer,
                     [&](caf::error& error) { failure = self_->system().render(error); });
    pending.clear();
    if (!failure.empty()) lost(what, failure);
  }
  [[noreturn]] void lost(const char* what, const std::string& why) {
    throw gradient_shard_lost(std::string("a gradient_shard actor did not ") + what + ": " + why);
  }

  using pending_answer = decltype(std::declval<caf::scoped_actor&>()->request(
      std::declval<const caf::actor&>(), kShardAnswer, std::declval<shard_update>()));

  caf::scoped_actor self_;
  std::uint64_t owner_;
  std::vector<caf::actor> shards_;
  std::vector<std::vector<model::ParamRange>> pieces_;  // shard i's ranges
  int64_t steps_ = 0;
  // The started update (start_update) until finish_update.
  std::shared_ptr<train::UpdateProgress> progress_ = std::make_shared<train::UpdateProgress>();
  std::vector<pending_answer> pending_;
};

}  // namespace

int gradient_shard_count(const config::JobConfig& config) {
  if (!config::optimizer_offloaded(config)) return 0;  // AdamW on the device
  if (config.train.threads > 0) return static_cast<int>(config.train.threads);
  // train.threads = 0: all cores, as the trainer's backend resolves it.
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

caf::actor spawn_gradient_shard(caf::actor_system& sys, int index, int local_rank,
                                crash_requests crash) {
  auto shard = sys.spawn(gradient_shard, index, crash);
  // At once, not when the actor first runs: the worker started next looks it up.
  names::register_handle(sys, names::gradient_shard(index, local_rank), shard);
  return shard;
}

std::vector<caf::actor> running_gradient_shards(caf::actor_system& sys, int count,
                                                int local_rank) {
  std::vector<caf::actor> shards;
  for (int i = 0; i < count; ++i) {
    auto shard = names::lookup(sys, names::gradient_shard(i, local_rank));
    if (!shard) return {};
    shards.push_back(std::move(shard));
  }
  return shards;
}

train::OptimizerShardsFactory gradient_shards_for(caf::actor_system& sys, int count,
                                                  int local_rank) {
  return [&sys, count, local_rank](const train::OptimizerSpec& spec)
             -> std::unique_ptr<train::OptimizerShards> {
    auto shards = running_gradient_shards(sys, count, local_rank);
    if (shards.empty()) return nullptr;
    return std::make_unique<actor_optimizer>(sys, std::move(shards), spec);
  };
}

}  // namespace dseek::actors
