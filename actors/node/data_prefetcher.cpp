// Implementation of data_prefetcher.hpp.
#include "actors/node/data_prefetcher.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/faults/crash_request.hpp"
#include "actors/node/node_registry.hpp"
#include "runtime/train/prefetch_queue.hpp"

namespace dseek::actors::detail {

// One call of BatchSource::fill without its step: which sequences of the global batch.
struct batch_slice {
  std::int64_t batch_size = 0, first = 0, count = 0, context = 0;
  auto key() const { return std::tie(batch_size, first, count, context); }
  bool operator<(const batch_slice& other) const { return key() < other.key(); }
  bool operator==(const batch_slice& other) const { return key() == other.key(); }
};

struct prepared_batch {
  std::vector<std::int32_t> inputs, targets;
};

// The training thread asks for one slice of `step`, from `source` (its run's data set).
struct batch_request {
  std::shared_ptr<train::BatchSource> source;
  std::uint64_t step = 0;
  batch_slice slice;
};
struct batch_reply {
  std::shared_ptr<const prepared_batch> batch;
  // At a step's first request: the steps with slices ready from it on (the queue depth,
  // before this one is taken); -1 on the step's later requests.
  std::int64_t queue_depth = -1;
};

}  // namespace dseek::actors::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::detail::batch_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dseek::actors::detail::batch_reply)

namespace dseek::actors {

namespace {

using detail::batch_reply;
using detail::batch_request;
using detail::batch_slice;
using detail::prepared_batch;
using build_atom = caf::atom_constant<caf::atom("dsbuild")>;
using batch_ptr = std::shared_ptr<const prepared_batch>;

batch_ptr build(train::BatchSource& source, std::uint64_t step, const batch_slice& s) {
  auto batch = std::make_shared<prepared_batch>();
  const auto tokens = static_cast<size_t>(s.count * s.context);
  batch->inputs.resize(tokens);
  batch->targets.resize(tokens);
  source.fill(step, s.batch_size, s.first, s.count, s.context, batch->inputs.data(),
              batch->targets.data());
  return batch;
}

struct prefetcher_state {
  std::int64_t depth = 1;
  std::shared_ptr<train::BatchSource> source;  // the run asking now
  std::uint64_t current_step = 0;              // the step the trainer asks for now
  std::vector<batch_slice> pattern;            // the slices of current_step so far
  std::vector<batch_slice> last_pattern;       // those of the step before: what to build
  std::uint64_t next_to_plan = 0;              // the first step not planned yet
  std::deque<std::pair<std::uint64_t, batch_slice>> to_build;
  std::map<std::pair<std::uint64_t, batch_slice>, batch_ptr> ready;
  bool build_scheduled = false;
  prefetch_stats stats;
  static inline const char* name = "dseek.data_prefetcher";

  // A new run (a restarted worker, a recovery) starts over: its slices may differ.
  void start_run(std::shared_ptr<train::BatchSource> run_source) {
    source = std::move(run_source);
    pattern.clear();
    last_pattern.clear();
    to_build.clear();
    ready.clear();
    current_step = 0;
    next_to_plan = 0;
  }

  // Distinct steps with a slice ready.
  std::int64_t steps_ready() const {
    std::int64_t steps = 0;
    for (auto it = ready.begin(); it != ready.end();
         it = ready.lower_bound({it->first.first + 1, batch_slice{}}))
      ++steps;
    return steps;
  }

  void enter_step(std::uint64_t step) {
    // The slices of the step before are the pattern to build ahead with; batches of
    // steps gone by are of no use any more.
    if (!pattern.empty()) last_pattern = pattern;
    pattern.clear();
    current_step = step;
    ready.erase(ready.begin(), ready.lower_bound({step, batch_slice{}}));
    if (next_to_plan <= step) next_to_plan = step + 1;
    while (!last_pattern.empty() && next_to_plan <= step + static_cast<std::uint64_t>(depth)) {
      for (const auto& slice : last_pattern) to_build.emplace_back(next_to_plan, slice);
      ++next_to_plan;
    }
  }
};

// The interface, the batch requests and the actor's own build messages.
using data_prefetcher_impl = data_prefetcher_actor::extend<
    caf::replies_to<batch_request>::with<batch_reply>, caf::reacts_to<build_atom>>;

data_prefetcher_impl::behavior_type data_prefetcher(
    data_prefetcher_impl::stateful_pointer<prefetcher_state> self, std::int64_t depth,
    crash_requests crash) {
  self->state.depth = std::max<std::int64_t>(depth, 1);
  auto schedule_build = [self] {
    auto& st = self->state;
    if (st.build_scheduled || st.to_build.empty()) return;
    st.build_scheduled = true;
    // Behind the requests already queued: one slice per message.
    self->send(self, build_atom::value);
  };
  return {
      [self, schedule_build](batch_request& request) {
        auto& st = self->state;
        if (request.source != st.source) st.start_run(std::move(request.source));
        std::int64_t queue_depth = -1;
        if (request.step != st.current_step || st.pattern.empty()) {
          st.enter_step(request.step);
          queue_depth = st.steps_ready();
        }
        st.pattern.push_back(request.slice);
        batch_ptr batch;
        if (auto it = st.ready.find({request.step, request.slice}); it != st.ready.end()) {
          batch = std::move(it->second);
          st.ready.erase(it);
          ++st.stats.hits;
        } else {
          batch = build(*st.source, request.step, request.slice);
          ++st.stats.misses;
        }
        schedule_build();
        return batch_reply{std::move(batch), queue_depth};
      },
      [self, schedule_build](build_atom) {
        auto& st = self->state;
        st.build_scheduled = false;
        while (!st.to_build.empty()) {
          auto [step, slice] = st.to_build.front();
          st.to_build.pop_front();
          if (step < st.current_step || st.ready.count({step, slice}) > 0) continue;
          st.ready.emplace(std::make_pair(step, slice), build(*st.source, step, slice));
          ++st.stats.built_ahead;
          break;
        }
        schedule_build();
      },
      [self](caf::get_atom) {
        auto stats = self->state.stats;
        stats.ready_through =
            self->state.ready.empty() ? -1 : static_cast<std::int64_t>(self->state.ready.rbegin()->first.first);
        return stats;
      },
      [crash](crash_atom) { crash_now("data_prefetcher", crash); },
  };
}

// The training thread's side.
class actor_batches final : public train::BatchSource {
 public:
  actor_batches(caf::actor_system& sys, std::shared_ptr<train::BatchSource> source,
                std::chrono::milliseconds wait, caf::atom_value prefetcher_name)
      : sys_(sys), self_(sys), source_(std::move(source)), wait_(wait),
        prefetcher_name_(prefetcher_name) {}

  void fill(uint64_t step, int64_t batch_size, int64_t first, int64_t count, int64_t context,
            int32_t* inputs, int32_t* targets) override {
    const size_t tokens = static_cast<size_t>(count * context);
    batch_ptr batch;
    std::int64_t queue_depth = -1;
    if (auto prefetcher = names::lookup(sys_, prefetcher_name_)) {
      self_->request(prefetcher, wait_,
                     batch_request{source_, step, batch_slice{batch_size, first, count, context}})
          .receive(
              [&](batch_reply& reply) {
                batch = std::move(reply.batch);
                queue_depth = reply.queue_depth;
              },
              [](caf::error&) {});
    }
    // The step's queue depth (prefetch_queue.hpp); none ready when the actor did not answer.
    if (queue_depth >= 0) train::note_prefetch_queue_depth(queue_depth);
    else if (!batch && step != last_step_) train::note_prefetch_queue_depth(0);
    last_step_ = step;
    if (batch && batch->inputs.size() == tokens) {
      std::memcpy(inputs, batch->inputs.data(), tokens * sizeof(int32_t));
      std::memcpy(targets, batch->targets.data(), tokens * sizeof(int32_t));
      return;
    }
    // No prefetcher now (restarting) or none in time: the data set itself.
    source_->fill(step, batch_size, first, count, context, inputs, targets);
  }

  int64_t vocab() const override { return source_->vocab(); }

 private:
  caf::actor_system& sys_;
  caf::scoped_actor self_;
  std::shared_ptr<train::BatchSource> source_;
  std::chrono::milliseconds wait_;
  caf::atom_value prefetcher_name_;
  uint64_t last_step_ = ~uint64_t{0};  // the step of the last fill
};

}  // namespace

caf::actor spawn_data_prefetcher(caf::actor_system& sys, std::int64_t depth, int local_rank,
                                 crash_requests crash) {
  auto prefetcher = caf::actor_cast<caf::actor>(sys.spawn(data_prefetcher, depth, crash));
  // At once, not when the actor first runs: a training that starts next finds it.
  names::register_handle(sys, names::data_prefetcher_of(local_rank), prefetcher);
  return prefetcher;
}

data_prefetcher_actor data_prefetcher_of(caf::actor_system& sys, int local_rank) {
  return caf::actor_cast<data_prefetcher_actor>(
      names::lookup(sys, names::data_prefetcher_of(local_rank)));
}

std::function<std::unique_ptr<train::BatchSource>(std::shared_ptr<train::BatchSource> source)>
prefetcher_for(caf::actor_system& sys, std::chrono::milliseconds wait, int local_rank) {
  const caf::atom_value name = names::data_prefetcher_of(local_rank);
  return [&sys, wait, name](std::shared_ptr<train::BatchSource> source)
             -> std::unique_ptr<train::BatchSource> {
    if (!names::lookup(sys, name)) return nullptr;
    return std::make_unique<actor_batches>(sys, std::move(source), wait, name);
  };
}

}  // namespace dseek::actors
