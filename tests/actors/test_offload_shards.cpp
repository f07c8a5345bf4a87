// The gradient_shard actors as the CPU offload of the trainer (train.offload_overlap): the
// moments live in the host memory the trainer's backend hands out (pinned for CUDA:
// OptimizerSpec::host_memory), and the overlapped update -- each actor goes through its
// piece in layout order and reports chunks, the next forward waits per chunk -- ends
// with the bits of the update finished in its own step and of the trainer's own AdamW,
// on the CPU backend and on the scrambled test device; a shard that dies while the
// forward waits for its chunk fails the step at once.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/faults/crash_request.hpp"
#include "actors/message_types.hpp"
#include "actors/worker_group/gradient_shard.hpp"
#include "actors/node/node_registry.hpp"
#include "runtime/backend/scrambled_backend.hpp"
#include "runtime/config/load.hpp"
#include "support/one_stage_trainer.hpp"
#include "support/random_batches.hpp"

using namespace dseek;
using dseek::testing::RandomBatches;
using namespace std::chrono_literals;

namespace {

struct node_system_config : caf::actor_system_config {
  node_system_config() { actors::register_message_types(*this); }
};


// Aligned host memory that counts what it hands out.
class CountingHostMemory final : public backend::HostMemory {
 public:
  void* allocate(size_t bytes) override {
    bytes_ += bytes;
    return backend::aligned_host_memory()->allocate(bytes);
  }
  void release(void* pointer) override { backend::aligned_host_memory()->release(pointer); }
  bool pinned() const override { return false; }
  size_t bytes() const { return bytes_; }

 private:
  std::atomic<size_t> bytes_{0};
};

constexpr int kShards = 2;

struct Shards {
  explicit Shards(caf::actor_system& system) : sys(system) {
    for (int i = 0; i < kShards; ++i) actors.push_back(actors::spawn_gradient_shard(sys, i));
  }
  ~Shards() {
    for (auto& shard : actors) caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
    for (int i = 0; i < kShards; ++i) sys.registry().erase(actors::names::gradient_shard(i));
  }
  caf::actor_system& sys;
  std::vector<caf::actor> actors;
};

config::JobConfig tiny_config(const std::string& device, bool overlap) {
  return config::load_config_text(
      "", "x.toml",
      {"model.dim=32", "model.layers=3", "model.heads=2", "model.context=16",
       "model.vocab=64", "train.batch_size=4", "train.threads=2", "train.steps=5",
       "train.warmup_steps=1", "train.device=\"" + device + "\"",
       std::string("train.offload_overlap=") + (overlap ? "true" : "false")});
}

}  // namespace

TEST_CASE("gradient_shard actors keep their moments in the trainer backend's host memory",
          "[actors][offload]") {
  node_system_config cfg;
  caf::actor_system sys{cfg};
  Shards shards(sys);
  const model::ParamLayout layout(model::GptShape{32, 2, 2, 16, 64});
  auto backend = backend::make_cpu_backend(1);
  auto memory = std::make_shared<CountingHostMemory>();
  const train::OptimizerSpec spec{*backend, layout, {}, {{0, layout.total()}}, memory};
  auto optimizer = actors::gradient_shards_for(sys, kShards)(spec);
  REQUIRE(optimizer);
  // Both moments of every parameter, across the pieces.
  CHECK(memory->bytes() >= 2 * layout.total() * sizeof(float));
}

TEST_CASE("the overlapped offload update through gradient_shard actors has the bits of "
          "the trainer's own AdamW (cpu and the scrambled device)",
          "[actors][offload]") {
  node_system_config cfg;
  caf::actor_system sys{cfg};
  Shards shards(sys);
  for (const std::string device : {"cpu", backend::kScrambledDevice}) {
    INFO("device " << device);
    auto run = [&](bool overlap, bool with_shards) {
      RandomBatches batches;
      testing::OneStageTrainer trainer(tiny_config(device, overlap), batches, nullptr,
                             with_shards ? actors::gradient_shards_for(sys, kShards)
                                         : train::OptimizerShardsFactory{});
      for (int64_t step = 0; step < 5; ++step) {
        const auto report = trainer.train_step(step);
        CHECK(report.offload_overlap == (overlap && with_shards));
      }
      return trainer.params_sha256();
    };
    const std::string local = run(true, false);
    CHECK(run(true, true) == local);
    CHECK(run(false, true) == local);
  }
}

TEST_CASE("a gradient_shard that dies during an overlapped update fails the next step "
          "at once",
          "[actors][offload]") {
  node_system_config cfg;
  caf::actor_system sys{cfg};
  Shards shards(sys);
  RandomBatches batches;
  testing::OneStageTrainer trainer(tiny_config("cpu", true), batches, nullptr,
                         actors::gradient_shards_for(sys, kShards));
  trainer.train_step(0);
  caf::scoped_actor self{sys};
  self->monitor(shards.actors[1]);
  caf::anon_send(shards.actors[1], actors::crash_atom::value);
  self->receive([](caf::down_msg&) {}, caf::after(5s) >> [] { FAIL("the shard did not crash"); });
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(
      [&] {
        for (int64_t step = 1; step < 4; ++step) trainer.train_step(step);
      }(),
      actors::gradient_shard_lost);
  CHECK(std::chrono::steady_clock::now() - start < 10s);  // not the 30 s answer timeout
}
