// The data_prefetcher and gradient_shard actors in one actor system, through the
// runtime interfaces the training thread uses (BatchSource, OptimizerShards): the
// prefetcher returns exactly its source's batches, has the next steps ready ahead after
// one step (hits), says its queue depth at each step's first batch, and is replaced by
// filling directly while it is gone; the
// gradient_shards give the same bits as one local AdamW over the same ranges (the whole
// buffer and a ZeRO shard), also when they serve several clients at once (a pipeline
// stage's chunks, a tensor-parallel shard's decay ranges), and a request to a crashed
// shard fails at once.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "actors/faults/crash_request.hpp"
#include "actors/message_types.hpp"
#include "actors/node/data_prefetcher.hpp"
#include "actors/worker_group/gradient_shard.hpp"
#include "actors/node/node_registry.hpp"
#include "runtime/model/init_rng.hpp"
#include "runtime/train/batch_source.hpp"
#include "runtime/train/prefetch_queue.hpp"

using namespace dseek;
using namespace std::chrono_literals;

namespace {

struct node_system_config : caf::actor_system_config {
  node_system_config() { actors::register_message_types(*this); }
};

struct Batch {
  std::vector<int32_t> inputs, targets;
  bool operator==(const Batch&) const = default;
};

constexpr int64_t kBatch = 12, kContext = 16;

Batch take(train::BatchSource& source, uint64_t step, int64_t first, int64_t count) {
  Batch b;
  b.inputs.resize(static_cast<size_t>(count * kContext));
  b.targets.resize(b.inputs.size());
  source.fill(step, kBatch, first, count, kContext, b.inputs.data(), b.targets.data());
  return b;
}

actors::prefetch_stats stats_of(caf::actor_system& sys) {
  caf::scoped_actor self{sys};
  actors::prefetch_stats stats;
  self->request(actors::data_prefetcher_of(sys), 5s, caf::get_atom::value)
      .receive([&](actors::prefetch_stats& s) { stats = s; },
               [&](caf::error& error) { FAIL("no prefetch stats: " << sys.render(error)); });
  return stats;
}

// Polls until the prefetcher has a slice of `step` ready (bounded).
bool ready_through(caf::actor_system& sys, int64_t step) {
  const auto limit = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < limit) {
    if (stats_of(sys).ready_through >= step) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

}  // namespace

TEST_CASE("the data_prefetcher serves its source's batches, built ahead after one step",
          "[actors][prefetch]") {
  node_system_config cfg;
  caf::actor_system sys{cfg};
  auto prefetcher = actors::spawn_data_prefetcher(sys, 3);
  auto source = std::make_shared<train::RandomBatches>(7, 256);
  train::RandomBatches reference(7, 256);
  auto batches = actors::prefetcher_for(sys)(source);
  REQUIRE(batches);

  // Step 0: nothing is known yet, every slice is built on request (misses).
  for (int64_t first : {4, 6}) CHECK(take(*batches, 0, first, 2) == take(reference, 0, first, 2));
  CHECK(stats_of(sys).misses == 2);
  CHECK(train::prefetch_queue_depth() == 0);  // the queue depth at step 0: nothing ready
  // Step 1's first request shows step 0's slices as the pattern: steps 2..4 get built.
  CHECK(take(*batches, 1, 4, 2) == take(reference, 1, 4, 2));
  CHECK(take(*batches, 1, 6, 2) == take(reference, 1, 6, 2));
  REQUIRE(ready_through(sys, 4));
  const auto before = stats_of(sys);
  CHECK(before.built_ahead >= 6);  // 3 steps x 2 slices
  for (uint64_t step = 2; step <= 4; ++step) {
    for (int64_t first : {4, 6})
      CHECK(take(*batches, step, first, 2) == take(reference, step, first, 2));
    // Step 2 found steps 2, 3 and 4 ready: data.prefetch steps.
    if (step == 2) CHECK(train::prefetch_queue_depth() == 3);
  }
  const auto after = stats_of(sys);
  CHECK(after.hits - before.hits == 6);
  CHECK(after.misses == before.misses);

  // Gone (crashed): the source fills the slices itself, the same ones.
  caf::anon_send(prefetcher, actors::crash_atom::value);
  caf::scoped_actor self{sys};
  self->monitor(prefetcher);
  self->receive([](caf::down_msg&) {}, caf::after(5s) >> [] { FAIL("the prefetcher did not crash"); });
  CHECK(take(*batches, 5, 4, 2) == take(reference, 5, 4, 2));
  CHECK(train::prefetch_queue_depth() == 0);  // no answer: nothing was ready for the step
  // A new instance takes over: it learns again, and serves the same batches.
  actors::spawn_data_prefetcher(sys, 3);
  for (uint64_t step = 6; step <= 9; ++step)
    CHECK(take(*batches, step, 4, 2) == take(reference, step, 4, 2));
  CHECK(stats_of(sys).hits >= 2);
  batches.reset();
  caf::anon_send_exit(actors::names::lookup(sys, actors::names::data_prefetcher),
                      caf::exit_reason::user_shutdown);
  sys.registry().erase(actors::names::data_prefetcher);
}

namespace {

// A small GPT layout's buffers, filled deterministically.
struct Buffers {
  explicit Buffers(size_t n) : params(n), grads(n) {
    for (size_t i = 0; i < n; ++i) {
      params[i] = static_cast<float>(model::splitmix64(i) % 2001) / 1000.0f - 1.0f;
      grads[i] = static_cast<float>(model::splitmix64(i + n) % 2001) / 100000.0f - 0.01f;
    }
  }
  std::vector<float> params, grads;
};

}  // namespace

TEST_CASE("gradient_shard actors update bit for bit as one local AdamW", "[actors][zero]") {
  node_system_config cfg;
  caf::actor_system sys{cfg};
  constexpr int kShards = 3;
  std::vector<caf::actor> shards;
  for (int i = 0; i < kShards; ++i) shards.push_back(actors::spawn_gradient_shard(sys, i));
  REQUIRE(actors::running_gradient_shards(sys, kShards).size() == shards.size());
  const model::ParamLayout layout(model::GptShape{32, 2, 2, 16, 64});
  const size_t n = layout.total();
  auto backend = backend::make_cpu_backend(1);
  const optim::AdamWSettings settings{0.9, 0.95, 1e-8, 0.1, 1.0};

  for (const auto& owned : {std::vector<model::ParamRange>{{0, n}},
                            std::vector<model::ParamRange>{{n / 5, n / 4}, {n / 2, n / 4}}}) {
    const train::OptimizerSpec spec{*backend, layout, settings, owned};
    auto sharded = actors::gradient_shards_for(sys, kShards)(spec);
    REQUIRE(sharded);
    train::LocalOptimizer local(spec);
    Buffers a(n), b(n);
    for (int step = 0; step < 4; ++step) {
      const auto sa = sharded->update(a.params.data(), a.grads.data(), 1e-3, 2.5);
      const auto sb = local.update(b.params.data(), b.grads.data(), 1e-3, 2.5);
      CHECK(sa.clip_scale == sb.clip_scale);
    }
    CHECK(a.params == b.params);
    CHECK(sharded->steps_taken() == 4);
    std::vector<float> ma(n, 0.f), va(n, 0.f), mb(n, 0.f), vb(n, 0.f);
    sharded->moments_to_host(ma.data(), va.data());
    local.moments_to_host(mb.data(), vb.data());
    CHECK(ma == mb);
    CHECK(va == vb);
    // Restored moments continue the same way.
    train::LocalOptimizer restored(spec);
    restored.moments_from_host(ma.data(), va.data());
    restored.set_steps_taken(4);
    sharded->update(a.params.data(), a.grads.data(), 1e-3, 0.5);
    restored.update(b.params.data(), b.grads.data(), 1e-3, 0.5);
    CHECK(a.params == b.params);
  }

  // A crashed shard fails the next request at once.
  const train::OptimizerSpec spec{*backend, layout, settings, {{0, n}}};
  auto sharded = actors::gradient_shards_for(sys, kShards)(spec);
  caf::scoped_actor self{sys};
  self->monitor(shards[1]);
  caf::anon_send(shards[1], actors::crash_atom::value);
  self->receive([](caf::down_msg&) {}, caf::after(5s) >> [] { FAIL("the shard did not crash"); });
  Buffers a(n);
  CHECK_THROWS_AS(sharded->update(a.params.data(), a.grads.data(), 1e-3, 1.0),
                  actors::gradient_shard_lost);
  for (auto& shard : shards) caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  for (int i = 0; i < kShards; ++i) sys.registry().erase(actors::names::gradient_shard(i));
}

// The optimizers of a pipeline stage: one client per chunk (an interleaved schedule has
// several), all on the same actors at once, and a tensor-parallel shard's, whose ranges
// carry their decay flags (OptimizerSpec::decay_ranges). Each keeps its own moments; the
// updates, in turns, match local AdamWs bit for bit; a client that goes away frees its
// pieces and the others go on.
TEST_CASE("gradient_shard actors hold several clients' pieces, with given decay ranges",
          "[actors][zero]") {
  node_system_config cfg;
  caf::actor_system sys{cfg};
  constexpr int kShards = 2;
  std::vector<caf::actor> shards;
  for (int i = 0; i < kShards; ++i) shards.push_back(actors::spawn_gradient_shard(sys, i));
  const model::ParamLayout layout(model::GptShape{32, 2, 2, 16, 64});
  const size_t n = layout.total();
  auto backend = backend::make_cpu_backend(1);
  const optim::AdamWSettings settings{0.9, 0.95, 1e-8, 0.1, 1.0};
  // A shard-like buffer of 1000 floats: decay, none, decay (a boundary inside a piece).
  const size_t shard_floats = 1000;
  const std::vector<optim::DecayRange> decay = {{{0, 300}, true}, {{300, 150}, false},
                                                {{450, 550}, true}};
  train::OptimizerSpec tensor_spec{*backend, layout, settings, {}, nullptr, decay};
  for (const auto& range : decay) tensor_spec.owned.push_back(range.range);
  const train::OptimizerSpec chunk_spec{*backend, layout, settings, {{n / 3, n / 2}}};

  auto make = actors::gradient_shards_for(sys, kShards);
  auto chunk_actors = make(chunk_spec);
  auto tensor_actors = make(tensor_spec);
  REQUIRE(chunk_actors);
  REQUIRE(tensor_actors);
  CHECK(tensor_actors->describe() == "2 gradient_shard actors");
  train::LocalOptimizer chunk_local(chunk_spec), tensor_local(tensor_spec);
  Buffers chunk_a(n), chunk_b(n), tensor_a(shard_floats), tensor_b(shard_floats);
  for (int step = 0; step < 3; ++step) {
    chunk_actors->update(chunk_a.params.data(), chunk_a.grads.data(), 1e-3, 2.5);
    tensor_actors->update(tensor_a.params.data(), tensor_a.grads.data(), 1e-3, 0.5);
    chunk_local.update(chunk_b.params.data(), chunk_b.grads.data(), 1e-3, 2.5);
    tensor_local.update(tensor_b.params.data(), tensor_b.grads.data(), 1e-3, 0.5);
  }
  CHECK(chunk_a.params == chunk_b.params);
  CHECK(tensor_a.params == tensor_b.params);
  // The decay flags were applied: without decay on [0, 300) the parameters differ.
  train::OptimizerSpec no_decay_spec = tensor_spec;
  no_decay_spec.decay_ranges[0].decay = false;
  train::LocalOptimizer no_decay(no_decay_spec);
  Buffers tensor_c(shard_floats);
  for (int step = 0; step < 3; ++step)
    no_decay.update(tensor_c.params.data(), tensor_c.grads.data(), 1e-3, 0.5);
  CHECK(tensor_c.params != tensor_b.params);

  chunk_actors.reset();  // releases its pieces
  tensor_actors->update(tensor_a.params.data(), tensor_a.grads.data(), 1e-3, 0.5);
  tensor_local.update(tensor_b.params.data(), tensor_b.grads.data(), 1e-3, 0.5);
  CHECK(tensor_a.params == tensor_b.params);
  std::vector<float> ma(shard_floats, 0.f), va(shard_floats, 0.f), mb(shard_floats, 0.f),
      vb(shard_floats, 0.f);
  tensor_actors->moments_to_host(ma.data(), va.data());
  tensor_local.moments_to_host(mb.data(), vb.data());
  CHECK(ma == mb);
  CHECK(va == vb);
  tensor_actors.reset();
  for (auto& shard : shards) caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  for (int i = 0; i < kShards; ++i) sys.registry().erase(actors::names::gradient_shard(i));
}

// Not run by default ([.]): what the actors cost per update against the trainer's own
// AdamW on the same threads, for the default model (config/single.toml's shape).
//   build/bin/dseek_actors_tests "[.shard_timing]"
TEST_CASE("gradient_shard update time against a local AdamW", "[.shard_timing]") {
  node_system_config cfg;
  caf::actor_system sys{cfg};
  const model::ParamLayout layout(model::GptShape{192, 4, 4, 128, 256});
  const size_t n = layout.total();
  const optim::AdamWSettings settings{0.9, 0.95, 1e-8, 0.1, 1.0};
  auto median_ms = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (int threads : {1, 2}) {
    std::vector<caf::actor> shards;
    for (int i = 0; i < threads; ++i) shards.push_back(actors::spawn_gradient_shard(sys, i));
    auto backend = backend::make_cpu_backend(threads);
    const train::OptimizerSpec spec{*backend, layout, settings, {{0, n}}};
    auto sharded = actors::gradient_shards_for(sys, threads)(spec);
    train::LocalOptimizer local(spec);
    Buffers a(n), b(n);
    std::vector<double> actor_ms, local_ms;
    for (int step = 0; step < 60; ++step) {
      auto t0 = std::chrono::steady_clock::now();
      sharded->update(a.params.data(), a.grads.data(), 1e-3, 2.5);
      auto t1 = std::chrono::steady_clock::now();
      local.update(b.params.data(), b.grads.data(), 1e-3, 2.5);
      auto t2 = std::chrono::steady_clock::now();
      actor_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      local_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
    CHECK(a.params == b.params);
    WARN(n << " params, " << threads << " thread(s): gradient_shards " << median_ms(actor_ms)
           << " ms, local AdamW " << median_ms(local_ms) << " ms per update (medians of 60)");
    sharded.reset();
    for (auto& shard : shards) caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
    for (int i = 0; i < threads; ++i) sys.registry().erase(actors::names::gradient_shard(i));
  }
}
