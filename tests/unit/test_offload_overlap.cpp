// The overlapped CPU offload (train.offload_overlap, runtime/train/host_update.hpp) with an optimizer that
// updates in chunks on a thread of its own, as the gradient_shard actors do (their own
// test is tests/actors/test_offload_shards.cpp): the bookkeeping (which piece reports
// which chunk, UpdateProgress), and the trainer on the CPU backend and on the scrambled
// test device whose forward waits for each chunk: the same params_sha256 as the update
// finished in its own step (a LocalOptimizer), the waits in layout order and measured
// (offload_wait_ms) -- and an optimizer that reports its chunks before it writes them
// gives other bits, so the comparison does catch a forward that reads a chunk too soon.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/backend/scrambled_backend.hpp"
#include "runtime/config/load.hpp"
#include "support/one_stage_trainer.hpp"
#include "support/random_batches.hpp"
#include "runtime/train/update_progress.hpp"

using namespace dseek;
using dseek::testing::RandomBatches;
using namespace std::chrono_literals;
using model::ParamRange;

TEST_CASE("offload overlap: each piece reports the chunks it holds once past its last "
          "element there",
          "[offload][unit]") {
  const std::vector<ParamRange> chunks = {{0, 10}, {10, 20}, {30, 5}};
  // A piece over the middle of chunk 1 and into chunk 2.
  const std::vector<ParamRange> piece = {{15, 17}};
  const std::vector<train::ChunkReport> expected = {{1, 30}, {2, 32}};
  CHECK(train::chunk_reports(piece, chunks) == expected);
  // Two pieces that cut chunk 1 between them: both report it; chunk 0 only the first.
  const std::vector<std::vector<ParamRange>> pieces = {{{0, 18}}, {{18, 17}}};
  CHECK(train::reports_per_chunk(pieces, chunks) == std::vector<int>{1, 2, 1});
}

TEST_CASE("offload overlap: UpdateProgress waits for a chunk, fails waiters, and bounds "
          "the wait",
          "[offload][unit]") {
  train::UpdateProgress progress;
  progress.begin({1, 2, 0});
  CHECK(progress.updated(2));  // held by no piece: at once
  CHECK_FALSE(progress.updated(1));
  std::thread reporter([&] {
    std::this_thread::sleep_for(20ms);
    progress.report(1);
    progress.report(1);
  });
  progress.wait(1, 5000ms);
  CHECK(progress.updated(1));
  reporter.join();
  CHECK_THROWS_AS(progress.report(1), std::logic_error);  // more reports than pieces
  CHECK_THROWS_WITH(progress.wait(0, 10ms), Catch::Matchers::Contains("within 10 ms"));
  std::thread failer([&] { progress.fail("shard 3 went down"); });
  CHECK_THROWS_WITH(progress.wait(0, 5000ms), Catch::Matchers::Contains("shard 3 went down"));
  failer.join();
}

namespace {


// An AdamW on a thread of its own that updates in chunks, as slowly as `per_run` per
// contiguous run, so the next forward has to wait. `report_early`: it reports every
// chunk before it writes any (a broken optimizer, for the negative test).
class ThreadedChunkOptimizer final : public train::OptimizerShards {
 public:
  ThreadedChunkOptimizer(const train::OptimizerSpec& spec, std::chrono::milliseconds per_run,
                         bool report_early)
      : backend_(backend::make_cpu_backend(1, spec.host_memory)),
        adamw_(*backend_, spec.layout, spec.settings, spec.owned), owned_(spec.owned),
        per_run_(per_run), report_early_(report_early) {}
  ~ThreadedChunkOptimizer() override {
    if (worker_.joinable()) worker_.join();
  }
  optim::StepStats update(float* params, const float* grads, double lr,
                          double grad_norm) override {
    return adamw_.step_with_norm(params, grads, lr, grad_norm);
  }
  void moments_to_host(float* m, float* v) override { adamw_.moments_to_host(m, v); }
  void moments_from_host(const float* m, const float* v) override {
    adamw_.moments_from_host(m, v);
  }
  void set_second_moment(const float* v) override { adamw_.set_second_moment(v); }
  int64_t steps_taken() const override { return adamw_.steps_taken(); }
  void set_steps_taken(int64_t steps) override { adamw_.set_steps_taken(steps); }
  bool updates_on_host() const override { return true; }
  std::string describe() const override { return "threaded test optimizer"; }
  bool updates_in_chunks() const override { return true; }

  void start_update(float* params, const float* grads, double lr, double grad_norm,
                    const std::vector<ParamRange>& chunks) override {
    const auto reports = train::chunk_reports(owned_, chunks);
    progress_.begin(train::reports_per_chunk({owned_}, chunks));
    ++updates_started_;
    worker_ = std::thread([=, this] {
      size_t next = 0;
      if (report_early_)
        for (; next < reports.size(); ++next) progress_.report(reports[next].chunk);
      adamw_.step_with_norm(params, grads, lr, grad_norm, 1.0f, [&](size_t end) {
        std::this_thread::sleep_for(per_run_);
        for (; next < reports.size() && reports[next].after <= end; ++next)
          progress_.report(reports[next].chunk);
      });
    });
  }
  bool chunk_updated(size_t chunk) const override { return progress_.updated(chunk); }
  void wait_for_chunk(size_t chunk) override {
    waited_.push_back(chunk);
    progress_.wait(chunk, 30000ms);
  }
  optim::StepStats finish_update() override {
    worker_.join();
    return {};
  }

  int updates_started() const { return updates_started_; }
  const std::vector<size_t>& waited() const { return waited_; }

 private:
  std::unique_ptr<backend::Backend> backend_;
  optim::AdamW adamw_;
  std::vector<ParamRange> owned_;
  std::chrono::milliseconds per_run_;
  bool report_early_;
  train::UpdateProgress progress_;
  std::thread worker_;
  int updates_started_ = 0;
  std::vector<size_t> waited_;  // the chunks the trainer waited for, in its order
};

config::JobConfig tiny_config(const std::string& device, bool overlap) {
  return config::load_config_text(
      "", "x.toml",
      {"model.dim=32", "model.layers=3", "model.heads=2", "model.context=16",
       "model.vocab=64", "train.batch_size=4", "train.micro_batch_size=2", "train.threads=1",
       "train.steps=4", "train.warmup_steps=1", "train.device=\"" + device + "\"",
       std::string("train.offload_overlap=") + (overlap ? "true" : "false")});
}

struct Outcome {
  std::string sha;
  std::vector<train::StepReport> steps;
  int updates_started = 0;
  std::vector<size_t> waited;
};

// Trains 4 steps; `per_run` < 0 ms: with the trainer's LocalOptimizer.
Outcome train_run(const std::string& device, bool overlap, std::chrono::milliseconds per_run,
              bool report_early = false) {
  const auto config = tiny_config(device, overlap);
  RandomBatches batches;
  ThreadedChunkOptimizer* optimizer = nullptr;
  train::OptimizerShardsFactory factory;
  if (per_run.count() >= 0)
    factory = [&](const train::OptimizerSpec& spec) {
      auto made = std::make_unique<ThreadedChunkOptimizer>(spec, per_run, report_early);
      optimizer = made.get();
      return made;
    };
  testing::OneStageTrainer trainer(config, batches, nullptr, factory);
  Outcome outcome;
  for (int64_t step = 0; step < 4; ++step) outcome.steps.push_back(trainer.train_step(step));
  outcome.sha = trainer.params_sha256();
  if (optimizer != nullptr) {
    outcome.updates_started = optimizer->updates_started();
    outcome.waited = optimizer->waited();
  }
  return outcome;
}

}  // namespace

TEST_CASE("offload overlap: the forward waits for each chunk and the parameters are the "
          "bits of the update finished in its step (cpu and the scrambled device)",
          "[offload][unit]") {
  for (const std::string device : {"cpu", backend::kScrambledDevice}) {
    INFO("device " << device);
    const Outcome local = train_run(device, false, -1ms);
    // (10 ms per run: the forward starts long before the update ends, also on a loaded
    // machine; with 3 ms a descheduled trainer once found an update already done.)
    const Outcome overlapped = train_run(device, true, 10ms);
    const Outcome sequential = train_run(device, false, 0ms);
    CHECK(overlapped.updates_started == 4);
    CHECK(sequential.updates_started == 0);  // offload_overlap = false: update() only
    CHECK(overlapped.sha == local.sha);
    CHECK(sequential.sha == local.sha);
    for (const auto& step : overlapped.steps) CHECK(step.offload_overlap);
    for (const auto& step : local.steps) CHECK_FALSE(step.offload_overlap);
    // Steps 1..3 start while the last update runs 10 ms per run: their forward waited,
    // and for the chunks in layout order (wte+wpe, block 0, 1, 2, lnf = 0..4; the head's
    // wte is chunk 0 again, never waited twice). Step 0 had nothing to wait for.
    CHECK(overlapped.steps[0].offload_wait_ms == 0.0);
    for (size_t s = 1; s < 4; ++s) CHECK(overlapped.steps[s].offload_wait_ms > 0.0);
    REQUIRE_FALSE(overlapped.waited.empty());
    for (size_t i = 1; i < overlapped.waited.size(); ++i) {
      INFO("wait " << i);
      CHECK((overlapped.waited[i] > overlapped.waited[i - 1] || overlapped.waited[i] == 0));
    }
    // The check can fail: an optimizer that says a chunk is updated before it writes it
    // lets the forward read the old parameters, which gives other bits. (20 ms per run:
    // ~0.6 s per update, so even a heavily loaded machine runs the forward first.)
    const Outcome premature = train_run(device, true, 20ms, /*report_early=*/true);
    CHECK(premature.sha != local.sha);
  }
}

// Where AdamW runs decides what crosses between the host and the device each step
// (train.offload): on the device (a LocalOptimizer on the trainer's backend: "none",
// "auto" on a GPU) neither the parameters nor the gradients leave it; offloaded to the
// host (an optimizer that updates_on_host, as the gradient_shard actors: "optimizer")
// every step sends the gradients down and the updated parameters back up. The scrambled
// device counts its memory calls (the PCIe traffic a GPU would have); the bits agree.
TEST_CASE("AdamW on the device moves no parameters or gradients to the host, and offloaded "
          "each step moves the gradients down and the parameters up",
          "[offload][unit]") {
  const auto config = tiny_config(backend::kScrambledDevice, false);
  struct Traffic {
    size_t to_host = 0, from_host = 0, params_bytes = 0;
    std::string sha;
  };
  const auto measure = [&](const train::OptimizerShardsFactory& factory) {
    RandomBatches batches;
    testing::OneStageTrainer trainer(config, batches, nullptr, factory);
    trainer.train_step(0);  // the first step stages what the later ones reuse
    backend::take_host_traffic(trainer.backend());
    for (int64_t step = 1; step < 4; ++step) trainer.train_step(step);
    const backend::HostTraffic traffic = backend::take_host_traffic(trainer.backend());
    return Traffic{traffic.to_host.bytes / 3, traffic.from_host.bytes / 3,
                   trainer.model().num_params() * sizeof(float), trainer.params_sha256()};
  };
  const Traffic on_device = measure({});
  const Traffic offloaded = measure([](const train::OptimizerSpec& spec) {
    return std::make_unique<ThreadedChunkOptimizer>(spec, 0ms, false);
  });
  INFO("a step moved to / from the host: on the device " << on_device.to_host << " / "
       << on_device.from_host << " bytes, offloaded " << offloaded.to_host << " / "
       << offloaded.from_host << " bytes; the parameters are " << on_device.params_bytes << " bytes");
  CHECK(on_device.sha == offloaded.sha);
  // On the device: only the batch's tokens go up (512 bytes here, nothing comes down),
  // under a hundredth of the parameters.
  CHECK(on_device.to_host < on_device.params_bytes / 100);
  CHECK(on_device.from_host < on_device.params_bytes / 100);
  // Offloaded: at least the whole gradient down and the whole parameters up.
  CHECK(offloaded.to_host >= offloaded.params_bytes);
  CHECK(offloaded.from_host >= offloaded.params_bytes);
}
