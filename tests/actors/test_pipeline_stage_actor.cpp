// The pipeline_stage actor (actors/worker_group/pipeline_stage.hpp) in one actor system: a
// 2-stage pipeline, each stage on its own thread with in-memory links
// (support/in_memory_pipeline_links.hpp), trained once by LocalPipelineStage and once by
// two pipeline_stage actors driven through the same train::PipelineStage interface.
// The actor runs the same trainer on another thread, so every step's loss, the
// validation loss and the final parameters must be the same bits (tolerance: none).
// Also: the actor's typed interface used directly, as an embedding application would;
// and a crashed pipeline_stage names its stage in its exit reason and fails the next
// request at once with pipeline_stage_lost.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "actors/faults/crash_request.hpp"
#include "actors/message_types.hpp"
#include "actors/node/node_registry.hpp"
#include "actors/worker_group/pipeline_stage.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/train/pipeline/plan.hpp"
#include "runtime/train/pipeline/stage.hpp"
#include "support/in_memory_pipeline_links.hpp"

using namespace dseek;
using namespace std::chrono_literals;

namespace {

struct node_system_config : caf::actor_system_config {
  node_system_config() { actors::register_message_types(*this); }
};

constexpr int64_t kStages = 2;
constexpr int64_t kSteps = 6;

// A tiny GPT, 2 blocks (one per stage), 1F1B over 4 micro-batches of 2.
config::JobConfig tiny_pipeline() {
  config::JobConfig config;
  config.model.dim = 32;
  config.model.layers = 2;
  config.model.heads = 2;
  config.model.context = 16;
  config.model.vocab = 64;
  config.train.batch_size = 8;
  config.train.micro_batch_size = 2;
  config.train.threads = 1;
  config.train.steps = kSteps;
  config.train.warmup_steps = 2;
  config.train.lr = 3e-3;
  config.parallel.pipeline = kStages;
  config.parallel.schedule = config::Schedule::one_f_one_b;
  return config;
}

// Batches that are a function of (step, sequence, position) only: every stage (and
// every run) sees the same, and the next token is predictable enough to learn.
class PatternBatches final : public train::BatchSource {
 public:
  PatternBatches(int64_t vocab, uint64_t salt) : vocab_(vocab), salt_(salt) {}
  void fill(uint64_t step, int64_t, int64_t first, int64_t count, int64_t context,
            int32_t* inputs, int32_t* targets) override {
    for (int64_t s = 0; s < count; ++s) {
      const uint64_t start = (step * 7919 + static_cast<uint64_t>(first + s) * 104729 + salt_) % 97;
      for (int64_t t = 0; t < context; ++t) {
        inputs[s * context + t] = token(start + static_cast<uint64_t>(t));
        targets[s * context + t] = token(start + static_cast<uint64_t>(t) + 1);
      }
    }
  }

 private:
  int32_t token(uint64_t position) const {
    return static_cast<int32_t>((position * 5 + position / 3) % static_cast<uint64_t>(vocab_));
  }
  int64_t vocab_;
  uint64_t salt_;
};

struct StageRun {
  std::vector<double> losses;
  std::vector<double> step_ms;  // wall time of each train_step call
  double val_loss = 0;
  std::vector<float> params;
};

// Trains kSteps on each of the two stages, each on its own thread, the stage made by
// factories[stage] (empty: LocalPipelineStage).
std::vector<StageRun> train_pipeline(const std::vector<train::PipelineStageFactory>& factories,
                                     int64_t steps = kSteps) {
  const config::JobConfig config = tiny_pipeline();
  testing::InMemoryPipelineHub hub(kStages);
  std::vector<StageRun> runs(kStages);
  std::vector<std::exception_ptr> failures(kStages);
  std::vector<std::thread> threads;
  for (int64_t s = 0; s < kStages; ++s) {
    threads.emplace_back([&, s] {
      try {
        testing::InMemoryPipelineLinks links(hub, s);
        PatternBatches batches(config.model.vocab, 0), validation(config.model.vocab, 11);
        auto backend = backend::make_cpu_backend(1);
        const train::PipelinePlan plan = train::plan_pipeline(config, links, *backend);
        auto stage = train::make_pipeline_stage(
            factories[static_cast<size_t>(s)],
            train::PipelineStageSpec{config, batches, links, plan, nullptr});
        REQUIRE(stage->info().stage == s);
        for (int64_t step = 0; step < steps; ++step) {
          const auto start = std::chrono::steady_clock::now();
          runs[static_cast<size_t>(s)].losses.push_back(stage->train_step(step).step.loss);
          runs[static_cast<size_t>(s)].step_ms.push_back(std::chrono::duration<double, std::milli>(
              std::chrono::steady_clock::now() - start).count());
        }
        runs[static_cast<size_t>(s)].val_loss = stage->evaluate(validation, 2, nullptr, nullptr);
        runs[static_cast<size_t>(s)].params = stage->gather_params();
      } catch (...) {
        failures[static_cast<size_t>(s)] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& failure : failures)
    if (failure) std::rethrow_exception(failure);
  return runs;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("pipeline_stage actors train a 2-stage pipeline bit for bit as local stages",
          "[actors][pp]") {
  const auto local = train_pipeline({{}, {}});

  node_system_config cfg;
  caf::actor_system sys{cfg};
  std::vector<actors::pipeline_stage_actor> stages;
  std::vector<train::PipelineStageFactory> factories;
  for (int64_t s = 0; s < kStages; ++s) {
    stages.push_back(actors::spawn_pipeline_stage(sys));
    factories.push_back(actors::pipeline_stage_of(sys, stages.back()));
  }
  const auto acted = train_pipeline(factories);

  for (int64_t s = 0; s < kStages; ++s) {
    INFO("stage " << s);
    const auto& a = acted[static_cast<size_t>(s)];
    const auto& l = local[static_cast<size_t>(s)];
    REQUIRE(a.losses.size() == static_cast<size_t>(kSteps));
    for (size_t step = 0; step < a.losses.size(); ++step) {
      INFO("step " << step);
      CHECK(a.losses[step] == l.losses[step]);  // bit for bit
      // Every stage reports the global batch's mean loss.
      CHECK(a.losses[step] == acted[0].losses[step]);
    }
    CHECK(a.val_loss == l.val_loss);
    CHECK(same_bits(a.params, l.params));
    CHECK(same_bits(a.params, acted[0].params));  // the whole model, on every stage
  }
  // It trained: the loss moved down from its start (ln 64 = 4.16 at random init).
  CHECK(std::isfinite(local[0].losses.back()));
  CHECK(local[0].losses.back() < local[0].losses.front());

  // (The actors take their name out of the registry as they end, or the system's
  // destructor would wait for their threads forever.)
  for (auto& stage : stages) caf::anon_send_exit(stage, caf::exit_reason::user_shutdown);
}

// What README.md's embedding example does: another CAF application spawns a
// pipeline_stage and drives it with the typed messages itself.
TEST_CASE("pipeline_stage: embedded through its typed interface, and a crash names the stage",
          "[actors][pp][faults]") {
  node_system_config cfg;
  caf::actor_system sys{cfg};
  const config::JobConfig config = tiny_pipeline();
  testing::InMemoryPipelineHub hub(kStages);
  testing::InMemoryPipelineLinks links(hub, 1);  // stage 1 alone: building is not collective
  PatternBatches batches(config.model.vocab, 0);
  auto backend = backend::make_cpu_backend(1);
  const train::PipelinePlan plan = train::plan_pipeline(config, links, *backend);
  const train::PipelineStageSpec spec{config, batches, links, plan, nullptr};

  actors::pipeline_stage_actor stage = actors::spawn_pipeline_stage(sys);
  caf::scoped_actor self{sys};
  self->request(stage, 30s, actors::stage_build{&spec})
      .receive(
          [&](actors::stage_reply<actors::stage_built>& built) {
            REQUIRE_FALSE(built.failure);
            CHECK(built.value.info.stage == 1);
            CHECK(built.value.info.owned_params > 0);
            CHECK(built.value.whole_layout->total() > built.value.info.owned_params);
          },
          [&](caf::error& error) { FAIL("no answer: " << sys.render(error)); });
  // A collective with a stage that never comes is the stage's failure, passed back as
  // its exception, not the actor's end: here no stage 0 ever sums, so this would wait
  // out the links' bound; ask for something local instead.
  self->request(stage, 30s, actors::stage_optimizer_steps{})
      .receive([&](actors::stage_reply<std::int64_t>& steps) { CHECK(steps.value == 0); },
               [&](caf::error& error) { FAIL("no answer: " << sys.render(error)); });

  self->monitor(stage);
  caf::anon_send(caf::actor_cast<caf::actor>(stage), actors::crash_atom::value);
  std::string reason;
  self->receive([&](caf::down_msg& down) { reason = sys.render(down.reason); },
                caf::after(30s) >> [&] { FAIL("the crashed pipeline_stage did not go down"); });
  INFO(reason);
  CHECK(reason.find("pipeline_stage (stage 1)") != std::string::npos);

  // The run's next call fails at once, as the worker's thread sees it.
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(actors::pipeline_stage_of(sys, stage)(spec), actors::pipeline_stage_lost);
  CHECK(std::chrono::steady_clock::now() - started < 5s);
  // The ended actor took its name out of the registry (a dead detached actor left there
  // would hang the actor system's shutdown).
  const auto limit = std::chrono::steady_clock::now() + 10s;
  while (actors::names::lookup(sys, actors::names::pipeline_stage) &&
         std::chrono::steady_clock::now() < limit)
    std::this_thread::sleep_for(10ms);
  CHECK_FALSE(actors::names::lookup(sys, actors::names::pipeline_stage));
}

// What the actor costs a step: the same 2-stage pipeline, local and through two
// pipeline_stage actors, alternating 3 times; prints the median train_step call time of
// stage 0 over the steps after the first 5 (warm-up) of all rounds.
TEST_CASE("pipeline_stage step time against a local stage", "[.stage_timing]") {
  node_system_config cfg;
  caf::actor_system sys{cfg};
  std::vector<actors::pipeline_stage_actor> stages;
  std::vector<train::PipelineStageFactory> factories;
  for (int64_t s = 0; s < kStages; ++s) {
    stages.push_back(actors::spawn_pipeline_stage(sys));
    factories.push_back(actors::pipeline_stage_of(sys, stages.back()));
  }
  constexpr int64_t kTimedSteps = 60, kWarmup = 5;
  std::vector<double> local, acted;
  auto keep = [&](std::vector<double>& into, const std::vector<StageRun>& runs) {
    into.insert(into.end(), runs[0].step_ms.begin() + kWarmup, runs[0].step_ms.end());
  };
  for (int round = 0; round < 3; ++round) {
    keep(local, train_pipeline({{}, {}}, kTimedSteps));
    keep(acted, train_pipeline(factories, kTimedSteps));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  WARN("train_step ms, stage 0 (median of 3 x " << kTimedSteps - kWarmup
       << " steps): local " << median(local) << ", pipeline_stage actor " << median(acted));
  CHECK(local.size() == acted.size());
  for (auto& stage : stages) caf::anon_send_exit(stage, caf::exit_reason::user_shutdown);
}
