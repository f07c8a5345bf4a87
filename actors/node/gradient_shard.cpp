// Implementation of gradient_shard.hpp.
#include "actors/node/gradient_shard.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/faults/crash_request.hpp"
#include "actors/node/node_registry.hpp"

namespace dseek::actors::detail {

// The messages of a gradient_shard. `owner` names the client (one per trainer): an actor
// restarted since, or assigned to another trainer, refuses the requests of an old one.
struct shard_assignment {
  std::uint64_t owner = 0;
  std::shared_ptr<const model::ParamLayout> layout;
  optim::AdamWSettings settings;
  std::vector<model::ParamRange> ranges;
};
struct shard_update {
  std::uint64_t owner = 0;
  float* params = nullptr;       // the trainer's whole flat buffers
  const float* grads = nullptr;
  double lr = 0, grad_norm = 0;
  std::int64_t steps_before = 0;  // AdamW's step count before this update
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

}  // namespace dseek::actors::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::detail::shard_assignment)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::detail::shard_update)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::detail::shard_moments)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::detail::shard_second_moment)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::optim::StepStats)

namespace dseek::actors {

namespace {

using detail::shard_assignment;
using detail::shard_moments;
using detail::shard_second_moment;
using detail::shard_update;

// An update of ~1M floats takes milliseconds; this bounds a wait for an actor that is
// alive but stuck (a request to a dead one fails at once).
constexpr auto kShardAnswer = std::chrono::seconds(30);

struct shard_state {
  int index = 0;
  // Single-threaded: the shards are the parallelism.
  std::unique_ptr<backend::Backend> backend = backend::make_cpu_backend(1);
  std::shared_ptr<const model::ParamLayout> layout;  // outlives adamw, which refers to it
  std::unique_ptr<optim::AdamW> adamw;
  std::uint64_t owner = 0;
  static inline const char* name = "dseek.gradient_shard";
};

caf::error not_assigned(const shard_state& st) {
  return caf::make_error(caf::sec::invalid_argument,
                         "gradient_shard " + std::to_string(st.index) +
                             " holds no state for this trainer (it was restarted)");
}

caf::behavior gradient_shard(caf::stateful_actor<shard_state>* self, int index) {
  self->state.index = index;
  return {
      [self](shard_assignment& a) {
        auto& st = self->state;
        st.adamw.reset();
        st.layout = std::move(a.layout);
        st.adamw = std::make_unique<optim::AdamW>(*st.backend, *st.layout, a.settings,
                                                  std::move(a.ranges));
        st.owner = a.owner;
        return caf::ok_atom::value;
      },
      [self](const shard_update& u) -> caf::result<optim::StepStats> {
        auto& st = self->state;
        if (!st.adamw || u.owner != st.owner) return not_assigned(st);
        st.adamw->set_steps_taken(u.steps_before);
        return st.adamw->step_with_norm(u.params, u.grads, u.lr, u.grad_norm);
      },
      [self](const shard_moments& m) -> caf::result<caf::ok_atom> {
        auto& st = self->state;
        if (!st.adamw || m.owner != st.owner) return not_assigned(st);
        if (m.to_host)
          st.adamw->moments_to_host(m.adam_m, m.adam_v);
        else
          st.adamw->moments_from_host(m.adam_m, m.adam_v);
        return caf::ok_atom::value;
      },
      [self](const shard_second_moment& v) -> caf::result<caf::ok_atom> {
        auto& st = self->state;
        if (!st.adamw || v.owner != st.owner) return not_assigned(st);
        st.adamw->set_second_moment(v.second_moment);
        return caf::ok_atom::value;
      },
      [](crash_atom) { crash_now("gradient_shard"); },
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
    auto pieces = train::split_owned(spec.owned, static_cast<int>(shards.size()));
    auto layout = std::make_shared<const model::ParamLayout>(spec.layout);
    shards.resize(pieces.size());  // a tiny buffer may make fewer pieces than actors
    shards_ = std::move(shards);
    for_all([&](size_t i) {
      return shard_assignment{owner_, layout, spec.settings, std::move(pieces[i])};
    }, "take its piece");
  }

  optim::StepStats update(float* params, const float* grads, double lr,
                          double grad_norm) override {
    optim::StepStats stats;
    const shard_update request{owner_, params, grads, lr, grad_norm, steps_};
    std::vector<decltype(self_->request(shards_[0], kShardAnswer, request))> pending;
    for (const auto& shard : shards_) pending.push_back(self_->request(shard, kShardAnswer, request));
    std::string failure;
    for (auto& answer : pending)
      answer.receive([&](optim::StepStats& s) { stats = s; },
                     [&](caf::error& error) { failure = self_->system().render(error); });
    if (!failure.empty()) lost("update its parameters", failure);
    ++steps_;
    return stats;
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

 private:
  // Sends make(i) to shard i, all at once, and waits for every answer.
  template <class Make>
  void for_all(Make make, const char* what) {
    std::vector<decltype(self_->request(shards_[0], kShardAnswer, make(0)))> pending;
    for (size_t i = 0; i < shards_.size(); ++i)
      pending.push_back(self_->request(shards_[i], kShardAnswer, make(i)));
    std::string failure;
    for (auto& answer : pending)
      answer.receive([](caf::ok_atom) {},
                     [&](caf::error& error) { failure = self_->system().render(error); });
    if (!failure.empty()) lost(what, failure);
  }
  [[noreturn]] void lost(const char* what, const std::string& why) {
    throw gradient_shard_lost(std::string("a gradient_shard actor did not ") + what + ": " + why);
  }

  caf::scoped_actor self_;
  std::uint64_t owner_;
  std::vector<caf::actor> shards_;
  int64_t steps_ = 0;
};

}  // namespace

int gradient_shard_count(const config::JobConfig& config) {
  if (config.train.threads > 0) return static_cast<int>(config.train.threads);
  // train.threads = 0: all cores, as the trainer's backend resolves it.
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

caf::actor spawn_gradient_shard(caf::actor_system& sys, int index) {
  auto shard = sys.spawn(gradient_shard, index);
  // At once, not when the actor first runs: the worker started next looks it up.
  names::register_handle(sys, names::gradient_shard(index), shard);
  return shard;
}

std::vector<caf::actor> running_gradient_shards(caf::actor_system& sys, int count) {
  std::vector<caf::actor> shards;
  for (int i = 0; i < count; ++i) {
    auto shard = names::lookup(sys, names::gradient_shard(i));
    if (!shard) return {};
    shards.push_back(std::move(shard));
  }
  return shards;
}

train::OptimizerShardsFactory gradient_shards_for(caf::actor_system& sys, int count) {
  return [&sys, count](const train::OptimizerSpec& spec)
             -> std::unique_ptr<train::OptimizerShards> {
    auto shards = running_gradient_shards(sys, count);
    if (shards.empty()) return nullptr;
    return std::make_unique<actor_optimizer>(sys, std::move(shards), spec);
  };
}

}  // namespace dseek::actors
