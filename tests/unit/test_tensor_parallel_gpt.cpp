// Tensor parallelism in one process: T ranks as threads joined by an in-memory
// TensorGroup. The shards of TensorParallelLayout put together are the whole model, a
// shard initialises to the whole model's values, and T = 2 or 4 ranks train like one
// whole GptModel (losses, gradients and parameters after AdamW steps); its layer ranges
// (pipeline chunks) chained stage to stage compute the whole shard's math, and on the
// scrambled test device the CPU's bits, while a step moves only its all-reduces and ids
// between the host and the device, never the logits. The same model over the data plane
// between processes is tested in tests/tensor (label tp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/backend/scrambled_backend.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/model/initial_value.hpp"
#include "support/small_gpt.hpp"

using dseek::model::GptModel;
using dseek::model::GptShape;
using dseek::model::LayerRange;
using dseek::model::TensorParallelLayout;

namespace {

const GptShape kShape{.dim = 16, .layers = 2, .heads = 4, .context = 8, .vocab = 32};

// Threads of one process as a tensor-parallel group. Every rank sums the ranks' buffers
// in rank order, so all get the bitwise same result, as the data plane's all-reduce does.
class ThreadGroup {
 public:
  explicit ThreadGroup(int ranks) : ranks_(ranks), inputs_(static_cast<size_t>(ranks)), sync_(ranks) {}

  class Member : public dseek::model::TensorGroup {
   public:
    Member(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return group_.ranks_; }
    void all_reduce_sum(float* data, size_t count) override {
      group_.inputs_[static_cast<size_t>(rank_)] = data;
      group_.sync_.arrive_and_wait();
      scratch_.assign(count, 0.0f);
      for (const float* input : group_.inputs_)
        for (size_t i = 0; i < count; ++i) scratch_[i] += input[i];
      group_.sync_.arrive_and_wait();  // everyone has read every input
      std::copy(scratch_.begin(), scratch_.end(), data);
    }

   private:
    ThreadGroup& group_;
    int rank_;
    std::vector<float> scratch_;
  };

  // Runs body(rank, member) on one thread per rank.
  void run(const std::function<void(int, Member&)>& body) {
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks_; ++r)
      threads.emplace_back([&, r] {
        Member member(*this, r);
        body(r, member);
      });
    for (auto& t : threads) t.join();
  }

 private:
  int ranks_;
  std::vector<const float*> inputs_;
  std::barrier<> sync_;
};

// What one rank computed over two accumulated micro-batches.
struct ShardRun {
  std::vector<double> losses;
  std::vector<float> grads;
  size_t activation_bytes = 0;
};

// Loads the whole model `start` into `shard` through `backend` (the shard's), runs two
// micro-batches of `B` sequences (batch seeds `seed` and `seed` + 1) with their gradients
// accumulated, as the trainer runs them, and reads back the losses and gradients through
// the backend.
ShardRun two_micro_batches(GptModel& shard, dseek::backend::Backend& backend,
                           const std::vector<float>& start, int64_t B, uint32_t seed) {
  std::vector<float> host(shard.num_params());
  shard.shard().scatter(start.data(), host.data());
  backend.copy_from_host(shard.params(), host.data(), host.size() * sizeof(float));
  ShardRun result;
  shard.zero_grads();
  for (uint32_t micro = 0; micro < 2; ++micro) {
    auto batch = dseek::testing::random_batch(B, kShape.context, kShape.vocab, seed + micro);
    result.losses.push_back(
        shard.forward(batch.tokens.data(), batch.targets.data(), B, kShape.context));
    shard.backward(1.0f / static_cast<float>(B * kShape.context) / 2.0f);
  }
  result.grads.resize(shard.num_params());
  backend.copy_to_host(result.grads.data(), shard.grads(), result.grads.size() * sizeof(float));
  result.activation_bytes = shard.activation_bytes();
  return result;
}

}  // namespace

TEST_CASE("tensor-parallel shards put together are the whole model", "[model][tensor]") {
  auto backend = dseek::backend::make_cpu_backend(1);
  GptModel whole(kShape, LayerRange{0, kShape.layers}, *backend, 1);
  whole.init_weights(5, 0.02);
  for (int ranks : {1, 2, 4}) {
    // Non-replicated whole-model floats are held by exactly one rank, replicated ones by
    // all; a shard initialised alone holds the whole model's values bitwise.
    std::vector<int> holders(whole.num_params(), 0);
    std::vector<float> assembled(whole.num_params(), 0.0f);
    size_t held = 0;
    for (int r = 0; r < ranks; ++r) {
      const TensorParallelLayout layout(kShape, r, ranks);
      for (const auto& s : layout.segments())
        for (size_t i = 0; i < s.count; ++i) {
          holders[s.whole_offset + i] += layout.replicated(s.shard_offset) ? 0 : 1;
          held += layout.replicated(s.shard_offset) ? 0 : 1;
        }
      // Rank r's shard built alone (its init needs no communication).
      struct Fixed : dseek::model::TensorGroup {
        int r, n;
        int rank() const override { return r; }
        int size() const override { return n; }
        void all_reduce_sum(float*, size_t) override {}
      } fixed;
      fixed.r = r;
      fixed.n = ranks;
      GptModel shard(kShape, {0, kShape.layers}, *backend, 1, 1, {}, &fixed);
      shard.init_weights(5, 0.02);
      layout.gather(shard.params(), assembled.data());
    }
    size_t replicated_floats = 0;
    const TensorParallelLayout first(kShape, 0, ranks);
    for (const auto& s : first.segments())
      if (first.replicated(s.shard_offset)) {
        replicated_floats += s.count;
        for (size_t i = 0; i < s.count; ++i) holders[s.whole_offset + i] = 1;
      }
    INFO("T = " << ranks);
    CHECK(held + replicated_floats == whole.num_params());
    CHECK(std::all_of(holders.begin(), holders.end(), [](int h) { return h == 1; }));
    CHECK(std::equal(assembled.begin(), assembled.end(), whole.params()));
  }
}

TEST_CASE("T tensor-parallel ranks train like the whole model", "[model][tensor]") {
  // Tolerance: the ranks sum partial matmuls (over heads, MLP columns, vocabulary rows)
  // in a different order than one sgemm does, and a row-parallel bias is added before
  // the partial products instead of with them: float32 rounding differences of ~1e-7
  // relative per sum, grown through 2 blocks and 3 AdamW steps. A wrong slice or a
  // missing all-reduce is off by O(1). Losses within 1e-5 relative; gradients and
  // parameters within 1e-4 * (max |g| of the tensor) + 1e-6.
  const int steps = 3;
  const int64_t B = 2;
  const float lr = 1e-2f;
  auto reference_backend = dseek::backend::make_cpu_backend(1);
  GptModel whole(kShape, LayerRange{0, kShape.layers}, *reference_backend, B);
  dseek::testing::init_nontrivial(whole, 9, 0.2);
  std::vector<float> start(whole.params(), whole.params() + whole.num_params());
  std::vector<float> m(whole.num_params(), 0.0f), v(whole.num_params(), 0.0f);
  std::vector<double> whole_losses;
  std::vector<float> first_grads;
  for (int step = 1; step <= steps; ++step) {
    auto batch = dseek::testing::random_batch(B, kShape.context, kShape.vocab, 40 + step);
    whole.zero_grads();
    whole_losses.push_back(whole.forward(batch.tokens.data(), batch.targets.data(), B, kShape.context));
    whole.backward(1.0f / static_cast<float>(B * kShape.context));
    if (step == 1) first_grads.assign(whole.grads(), whole.grads() + whole.num_params());
    reference_backend->adamw_update(whole.params(), whole.grads(), m.data(), v.data(),
                                    whole.num_params(), lr, 0.9f, 0.95f, 1e-8f, 0.0f, step, 1.0f);
  }

  for (int ranks : {2, 4}) {
    INFO("T = " << ranks);
    std::vector<std::vector<double>> losses(static_cast<size_t>(ranks));
    std::vector<float> gathered_grads(whole.num_params()), gathered_params(whole.num_params());
    std::vector<std::vector<float>> replicated_grads(static_cast<size_t>(ranks));
    std::mutex gather_mutex;  // the ranks' shards overlap on the replicated floats
    ThreadGroup group(ranks);
    group.run([&](int rank, ThreadGroup::Member& member) {
      auto backend = dseek::backend::make_cpu_backend(1);
      GptModel shard(kShape, {0, kShape.layers}, *backend, B, 1, {}, &member);
      const auto& layout = shard.shard();
      layout.scatter(start.data(), shard.params());
      std::vector<float> sm(shard.num_params(), 0.0f), sv(shard.num_params(), 0.0f);
      for (int step = 1; step <= steps; ++step) {
        auto batch = dseek::testing::random_batch(B, kShape.context, kShape.vocab, 40 + step);
        shard.zero_grads();
        losses[static_cast<size_t>(rank)].push_back(
            shard.forward(batch.tokens.data(), batch.targets.data(), B, kShape.context));
        shard.backward(1.0f / static_cast<float>(B * kShape.context));
        if (step == 1) {
          const std::lock_guard lock(gather_mutex);
          layout.gather(shard.grads(), gathered_grads.data());
          for (size_t k = 0; k < shard.num_params(); ++k)
            if (layout.replicated(k)) replicated_grads[static_cast<size_t>(rank)].push_back(shard.grads()[k]);
        }
        backend->adamw_update(shard.params(), shard.grads(), sm.data(), sv.data(),
                              shard.num_params(), lr, 0.9f, 0.95f, 1e-8f, 0.0f, step, 1.0f);
      }
      const std::lock_guard lock(gather_mutex);
      layout.gather(shard.params(), gathered_params.data());
    });
    // The replicated floats were gathered from whichever rank came last: every rank
    // holds them bitwise equal (their gradients are checked here, the parameters in
    // tests/tensor).
    for (int r = 1; r < ranks; ++r) CHECK(replicated_grads[static_cast<size_t>(r)] == replicated_grads[0]);
    for (int r = 0; r < ranks; ++r)
      for (int s = 0; s < steps; ++s)
        CHECK(std::abs(losses[static_cast<size_t>(r)][static_cast<size_t>(s)] - whole_losses[static_cast<size_t>(s)]) <=
              1e-5 * whole_losses[static_cast<size_t>(s)]);
    for (const auto& tensor : whole.layout().tensors()) {
      INFO(tensor.name);
      float grad_scale = 0.0f, param_scale = 0.0f;
      for (size_t i = 0; i < tensor.size(); ++i) {
        grad_scale = std::max(grad_scale, std::abs(first_grads[tensor.offset + i]));
        param_scale = std::max(param_scale, std::abs(whole.params()[tensor.offset + i]));
      }
      double worst_grad = 0.0, worst_param = 0.0;
      // The key bias's gradient is zero in exact arithmetic (softmax ignores a constant
      // q.b added to every key's score), so both runs hold rounding noise of ~1e-9 there
      // and AdamW's m / sqrt(v) turns any noise into steps of ~lr: its parameters are
      // compared only through the gradient, which is checked.
      const bool is_qkv_bias = tensor.name.ends_with("attn.qkv.bias");
      for (size_t i = 0; i < tensor.size(); ++i) {
        const size_t k = tensor.offset + i;
        const bool key_bias = is_qkv_bias && i >= static_cast<size_t>(kShape.dim) &&
                              i < static_cast<size_t>(2 * kShape.dim);
        worst_grad = std::max(worst_grad, static_cast<double>(std::abs(gathered_grads[k] - first_grads[k])));
        if (!key_bias)
          worst_param = std::max(worst_param, static_cast<double>(std::abs(gathered_params[k] - whole.params()[k])));
      }
      CHECK(worst_grad <= 1e-4 * grad_scale + 1e-6);
      CHECK(worst_param <= 1e-4 * param_scale + 1e-6);
    }
  }
}

TEST_CASE("a tensor-parallel size that does not divide the heads or vocabulary is refused",
          "[model][tensor]") {
  REQUIRE_THROWS_WITH(TensorParallelLayout(kShape, 0, 3),
                      Catch::Contains("parallel.tensor = 3") && Catch::Contains("model.heads"));
  const GptShape odd_vocab{.dim = 16, .layers = 1, .heads = 4, .context = 8, .vocab = 30};
  REQUIRE_THROWS_WITH(TensorParallelLayout(odd_vocab, 0, 4), Catch::Contains("vocabulary"));
}

TEST_CASE("tensor-parallel recompute gives every rank bitwise the gradients without",
          "[model][tensor][recompute]") {
  // The recompute runs the attention branch's all-reduce again; ThreadGroup sums in rank
  // order as the data plane does, so the recomputed activations are the first bits and
  // so are the gradients. Two micro-batches accumulated, as the trainer runs them.
  const int ranks = 2;
  const int64_t B = 2;
  auto whole_backend = dseek::backend::make_cpu_backend(1);
  GptModel whole(kShape, LayerRange{0, kShape.layers}, *whole_backend, B);
  dseek::testing::init_nontrivial(whole, 21, 0.2);
  const std::vector<float> start(whole.params(), whole.params() + whole.num_params());
  auto run = [&](const dseek::model::RecomputePolicy& recompute) {
    std::vector<ShardRun> results(static_cast<size_t>(ranks));
    ThreadGroup group(ranks);
    group.run([&](int rank, ThreadGroup::Member& member) {
      auto backend = dseek::backend::make_cpu_backend(1);
      GptModel shard(kShape, {0, kShape.layers}, *backend, B, 1, recompute, &member);
      results[static_cast<size_t>(rank)] = two_micro_batches(shard, *backend, start, B, 60);
    });
    return results;
  };
  const auto kept = run({});
  for (const dseek::model::RecomputePolicy recompute : {dseek::model::RecomputePolicy{1},
                                                        dseek::model::RecomputePolicy{2}}) {
    INFO("model.recompute = " << recompute.text());
    const auto recomputed = run(recompute);
    for (size_t r = 0; r < static_cast<size_t>(ranks); ++r) {
      INFO("rank " << r);
      CHECK(recomputed[r].losses == kept[r].losses);
      REQUIRE(recomputed[r].grads.size() == kept[r].grads.size());
      CHECK(std::memcmp(recomputed[r].grads.data(), kept[r].grads.data(),
                        kept[r].grads.size() * sizeof(float)) == 0);
      // Two blocks: every:1 keeps none (one scratch set instead of two kept); every:2
      // recomputes block 0 only, whose kept set becomes the scratch set: no saving.
      if (recompute.every == 1) CHECK(recomputed[r].activation_bytes < kept[r].activation_bytes);
      else CHECK(recomputed[r].activation_bytes == kept[r].activation_bytes);
    }
  }
}

TEST_CASE("tensor-parallel layer ranges chained stage to stage are the whole shard's math",
          "[model][tensor][pipeline]") {
  // Two pipeline chunks of each rank's shard, blocks [0, 1) (embedding) and [1, 2) (head),
  // with two activation slots, run 1F1B-like: forward of both micro-batches through both
  // chunks, then their backwards, the replicated activation handed from one chunk's
  // stage_output() to the next's stage_input() on the same tensor rank and its gradient
  // back. The same kernels and all-reduces on the same inputs as the whole shard, so the
  // losses and every gradient are bitwise the whole shard's, except the tied wte's,
  // whose embedding and head parts sit in the two chunks (summed here afterwards, where
  // the whole shard adds them into one buffer as they come): within float rounding.
  const int ranks = 2;
  const int64_t B = 2;
  auto whole_backend = dseek::backend::make_cpu_backend(1);
  GptModel whole(kShape, LayerRange{0, kShape.layers}, *whole_backend, B);
  dseek::testing::init_nontrivial(whole, 33, 0.2);
  const std::vector<float> start(whole.params(), whole.params() + whole.num_params());
  const float dloss = 1.0f / static_cast<float>(B * kShape.context) / 2.0f;
  const size_t BTC = static_cast<size_t>(B * kShape.context * kShape.dim);
  // Catch's assertions are not thread-safe: each rank records, the checks run after.
  struct RankResult {
    bool ends_right = false;
    std::vector<double> whole_losses, chained_losses;
    std::string first_mismatch;  // empty: every non-wte gradient bitwise
    double worst_wte = 0.0, wte_scale = 0.0;
  };
  std::vector<RankResult> results(static_cast<size_t>(ranks));
  ThreadGroup group(ranks);
  group.run([&](int rank, ThreadGroup::Member& member) {
    RankResult& result = results[static_cast<size_t>(rank)];
    auto backend = dseek::backend::make_cpu_backend(1);
    GptModel shard(kShape, {0, kShape.layers}, *backend, B, 1, {}, &member);
    GptModel first(kShape, LayerRange{0, 1}, *backend, B, 2, {}, &member);
    GptModel last(kShape, LayerRange{1, 2}, *backend, B, 2, {}, &member);
    for (GptModel* model : {&shard, &first, &last}) {
      model->shard().scatter(start.data(), model->params());
      model->zero_grads();
    }
    result.ends_right = first.has_embedding() && !first.has_head() && last.has_head() &&
                        !last.has_embedding();
    std::vector<dseek::testing::SmallBatch> batches;
    for (uint32_t micro = 0; micro < 2; ++micro)
      batches.push_back(dseek::testing::random_batch(B, kShape.context, kShape.vocab, 80 + micro));
    auto& whole_losses = result.whole_losses;
    auto& chained_losses = result.chained_losses;
    for (const auto& batch : batches) {
      whole_losses.push_back(shard.forward(batch.tokens.data(), batch.targets.data(), B, kShape.context));
      shard.backward(dloss);
    }
    for (int64_t micro = 0; micro < 2; ++micro) {
      const auto& batch = batches[static_cast<size_t>(micro)];
      first.select_activation_slot(micro);
      last.select_activation_slot(micro);
      first.forward(batch.tokens.data(), batch.targets.data(), B, kShape.context);
      std::copy_n(first.stage_output(), BTC, last.stage_input());
      chained_losses.push_back(last.forward(batch.tokens.data(), batch.targets.data(), B, kShape.context));
    }
    for (int64_t micro = 0; micro < 2; ++micro) {
      first.select_activation_slot(micro);
      last.select_activation_slot(micro);
      last.backward(dloss);
      std::copy_n(last.stage_input_grad(), BTC, first.stage_output_grad());
      first.backward(dloss);
    }
    const auto& layout = shard.shard();
    const size_t wte_end = layout.wte() + static_cast<size_t>(layout.vocab_local() * kShape.dim);
    const size_t block1 = layout.block(1).ln1_w;
    double& worst_wte = result.worst_wte;
    double& wte_scale = result.wte_scale;
    for (size_t k = 0; k < layout.total(); ++k) {
      const float expected = shard.grads()[k];
      if (k >= layout.wte() && k < wte_end) {
        const float chained = first.grads()[k] + last.grads()[k];
        worst_wte = std::max(worst_wte, static_cast<double>(std::abs(chained - expected)));
        wte_scale = std::max(wte_scale, static_cast<double>(std::abs(expected)));
        continue;
      }
      // Every other float belongs to one chunk: the other never touches it.
      const bool in_first = k < block1;
      const float chained = in_first ? first.grads()[k] : last.grads()[k];
      const float untouched = in_first ? last.grads()[k] : first.grads()[k];
      if (chained != expected || untouched != 0.0f) {
        result.first_mismatch = "gradient float " + std::to_string(k) + ": chained " +
                                std::to_string(chained) + " (other chunk " +
                                std::to_string(untouched) + "), whole shard " +
                                std::to_string(expected);
        break;
      }
    }
  });
  for (int rank = 0; rank < ranks; ++rank) {
    INFO("rank " << rank);
    const RankResult& recorded = results[static_cast<size_t>(rank)];
    CHECK(recorded.ends_right);
    CHECK(recorded.chained_losses == recorded.whole_losses);
    INFO(recorded.first_mismatch);
    CHECK(recorded.first_mismatch.empty());
    CHECK(recorded.worst_wte <= 1e-6 * recorded.wte_scale + 1e-9);
  }
}

TEST_CASE("tensor-parallel ranks on the scrambled test device compute the CPU's bits",
          "[model][tensor][scrambled]") {
  // The scrambled device (backend/scrambled_backend.hpp) keeps its memory masked: the
  // vocabulary-parallel embedding and cross-entropy must run as backend ops and the
  // group's all-reduces reach the values through the backend's copy calls
  // (backend/host_window.hpp), or they read garbage. It runs the CPU's ops on the same values, so equality is the bound:
  // losses, every gradient and the stage output, two micro-batches accumulated.
  const int ranks = 2;
  const int64_t B = 2;
  auto whole_backend = dseek::backend::make_cpu_backend(1);
  GptModel whole(kShape, LayerRange{0, kShape.layers}, *whole_backend, B);
  dseek::testing::init_nontrivial(whole, 33, 0.2);
  const std::vector<float> start(whole.params(), whole.params() + whole.num_params());
  auto run = [&](bool scrambled) {
    std::vector<ShardRun> results(static_cast<size_t>(ranks));
    ThreadGroup group(ranks);
    group.run([&](int rank, ThreadGroup::Member& member) {
      auto backend = scrambled ? dseek::backend::make_scrambled_backend(1)
                               : dseek::backend::make_cpu_backend(1);
      GptModel shard(kShape, {0, kShape.layers}, *backend, B, 1, {}, &member);
      results[static_cast<size_t>(rank)] = two_micro_batches(shard, *backend, start, B, 80);
    });
    return results;
  };
  const auto cpu = run(false);
  const auto scrambled = run(true);
  for (size_t r = 0; r < static_cast<size_t>(ranks); ++r) {
    INFO("rank " << r);
    REQUIRE(cpu[r].losses.size() == 2);
    CHECK(std::isfinite(cpu[r].losses[0]));
    CHECK(scrambled[r].losses == cpu[r].losses);
    REQUIRE(scrambled[r].grads.size() == cpu[r].grads.size());
    CHECK(std::memcmp(scrambled[r].grads.data(), cpu[r].grads.data(),
                      cpu[r].grads.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("a tensor-parallel step on a device moves only the all-reduces and the ids, never "
          "the logits", "[model][tensor][scrambled]") {
  // A vocabulary wide against the width (V / T = 64 rows of C = 16), so the logits
  // (N x 64 floats) and the wte rows (64 x 16) are each 4x a (B, T, C) activation. The
  // scrambled device counts what its memory calls move (take_host_traffic). A step's
  // traffic, exactly: the group's all-reduces, each down and back up -- (N, C) for the
  // embedding's lookup, two per block forward, two per block backward and the head's
  // input gradient; (N, ranks) maxima and 2N sums for the cross-entropy -- plus the tokens
  // and targets going up. Anything else (the logits or wte through a host loop) adds
  // to it and raises the largest copy above one activation.
  const GptShape wide{.dim = 16, .layers = 2, .heads = 4, .context = 8, .vocab = 128};
  const int ranks = 2;
  const int64_t B = 2;
  const size_t N = static_cast<size_t>(B * wide.context);
  const size_t activation_bytes = N * static_cast<size_t>(wide.dim) * sizeof(float);
  const size_t logits_bytes = N * static_cast<size_t>(wide.vocab / ranks) * sizeof(float);
  const size_t reduced_bytes =
      static_cast<size_t>(2 + 4 * wide.layers) * activation_bytes +
      (N * static_cast<size_t>(ranks) + 2 * N) * sizeof(float);
  const size_t ids_bytes = 2 * N * sizeof(int32_t);
  std::vector<dseek::backend::HostTraffic> traffic(static_cast<size_t>(ranks));
  std::vector<double> losses(static_cast<size_t>(ranks));
  ThreadGroup group(ranks);
  group.run([&](int rank, ThreadGroup::Member& member) {
    auto device = dseek::backend::make_scrambled_backend(1);
    GptModel shard(wide, {0, wide.layers}, *device, B, 1, {}, &member);
    shard.init_weights(3, 0.2);
    shard.zero_grads();
    const auto batch = dseek::testing::random_batch(B, wide.context, wide.vocab, 90);
    dseek::backend::take_host_traffic(*device);  // the set-up's copies are not the step's
    losses[static_cast<size_t>(rank)] =
        shard.forward(batch.tokens.data(), batch.targets.data(), B, wide.context);
    shard.backward(1.0f / static_cast<float>(N));
    traffic[static_cast<size_t>(rank)] = dseek::backend::take_host_traffic(*device);
  });
  REQUIRE(logits_bytes == 4 * activation_bytes);
  for (size_t r = 0; r < static_cast<size_t>(ranks); ++r) {
    INFO("rank " << r);
    CHECK(losses[r] > 4.0);  // about ln(128) = 4.85 at init: a real loss, not garbage
    CHECK(losses[r] == losses[0]);
    CHECK(traffic[r].to_host.bytes == reduced_bytes);
    CHECK(traffic[r].from_host.bytes == reduced_bytes + ids_bytes);
    CHECK(traffic[r].to_host.largest_copy_bytes == activation_bytes);
    CHECK(traffic[r].from_host.largest_copy_bytes == activation_bytes);
  }
  auto cpu = dseek::backend::make_cpu_backend(1);
  CHECK_THROWS_AS(dseek::backend::take_host_traffic(*cpu), std::invalid_argument);
}

// One model class (issue 19): the layout of a group of one is the whole model's, offset
// for offset, its initial values are the whole model's tensor by tensor, and the model
// over such a group computes the model without one bit for bit.
TEST_CASE("one model: a tensor group of one rank is the whole model, layout and bits",
          "[model][tensor]") {
  const dseek::model::ParamLayout whole_layout(kShape);
  const TensorParallelLayout one(kShape, 0, 1);
  CHECK(one.total() == whole_layout.total());
  CHECK(one.wte() == whole_layout.wte());
  CHECK(one.wpe() == whole_layout.wpe());
  CHECK(one.lnf_w() == whole_layout.lnf_w());
  CHECK(one.lnf_b() == whole_layout.lnf_b());
  CHECK(one.vocab_local() == kShape.vocab);
  CHECK(one.channels_local() == kShape.dim);
  CHECK(one.heads_local() == kShape.heads);
  CHECK(one.hidden_local() == 4 * kShape.dim);
  for (int64_t l = 0; l < kShape.layers; ++l) {
    const auto& a = one.block(l);
    const auto& b = whole_layout.block(l);
    INFO("block " << l);
    CHECK(std::vector<size_t>{a.ln1_w, a.ln1_b, a.qkv_w, a.qkv_b, a.attn_proj_w, a.attn_proj_b,
                              a.ln2_w, a.ln2_b, a.fc_w, a.fc_b, a.fc_proj_w, a.fc_proj_b} ==
          std::vector<size_t>{b.ln1_w, b.ln1_b, b.qkv_w, b.qkv_b, b.attn_proj_w, b.attn_proj_b,
                              b.ln2_w, b.ln2_b, b.fc_w, b.fc_b, b.fc_proj_w, b.fc_proj_b});
    CHECK(one.block_begin(l) == whole_layout.block_begin(l));
    CHECK(one.block_end(l) == whole_layout.block_end(l));
  }
  size_t segment_floats = 0;
  for (const auto& s : one.segments()) {
    CHECK(s.shard_offset == s.whole_offset);
    segment_floats += s.count;
  }
  CHECK(segment_floats == one.total());

  auto backend = dseek::backend::make_cpu_backend(1);
  const int64_t B = 2;
  GptModel reference(kShape, LayerRange{0, kShape.layers}, *backend, B);
  // init_weights walks the shard's segments: the values of a tensor-by-tensor walk.
  reference.init_weights(9, 0.05);
  std::vector<float> by_tensor(whole_layout.total(), -1.0f);
  for (const auto& tensor : whole_layout.tensors())
    for (size_t i = 0; i < tensor.size(); ++i)
      by_tensor[tensor.offset + i] = dseek::model::initial_value(tensor, tensor.offset + i, 9, 0.05,
                                                                 kShape.layers);
  CHECK(std::equal(by_tensor.begin(), by_tensor.end(), reference.params()));

  dseek::testing::init_nontrivial(reference, 9, 0.05);
  const std::vector<float> start(reference.params(), reference.params() + reference.num_params());
  const ShardRun without = two_micro_batches(reference, *backend, start, B, 31);
  ThreadGroup group(1);
  ShardRun with;
  int ranks_seen = 0;
  group.run([&](int, ThreadGroup::Member& member) {  // Catch's checks stay on this thread
    GptModel over_one(kShape, LayerRange{0, kShape.layers}, *backend, B, 1, {}, &member);
    ranks_seen = over_one.tensor_ranks();
    with = two_micro_batches(over_one, *backend, start, B, 31);
  });
  CHECK(ranks_seen == 1);
  CHECK(with.losses == without.losses);
  CHECK(with.grads == without.grads);
}

// The ranges a backward reports are final when it reports them, in the order of
// gradient_ranges_in_backward_order(), which partitions the buffer: the whole model's as
// each finishes (the ranges reported later still change after it: the data-parallel
// reduction overlaps the rest of the backward), a tensor rank's only after its last
// all-reduce (every gradient is final at the first report).
TEST_CASE("a backward reports each gradient range once it is final, whole or tensor rank",
          "[model][tensor]") {
  const int64_t B = 2;
  for (int ranks : {1, 2}) {
    struct Seen {
      std::vector<dseek::model::ParamRange> reported, expected;
      std::vector<std::vector<float>> at_report;  // the whole gradient buffer at each report
      std::vector<float> final_grads;
    };
    std::vector<Seen> seen(static_cast<size_t>(ranks));
    ThreadGroup group(ranks);
    group.run([&](int rank, ThreadGroup::Member& member) {  // records; checks after
      Seen& mine = seen[static_cast<size_t>(rank)];
      auto backend = dseek::backend::make_cpu_backend(1);
      GptModel model(kShape, LayerRange{0, kShape.layers}, *backend, B, 1, {}, &member);
      model.init_weights(3, 0.05);
      model.zero_grads();
      auto batch = dseek::testing::random_batch(B, kShape.context, kShape.vocab, 5);
      model.forward(batch.tokens.data(), batch.targets.data(), B, kShape.context);
      model.backward(1.0f / static_cast<float>(B * kShape.context),
                     [&](dseek::model::ParamRange range) {
                       mine.reported.push_back(range);
                       mine.at_report.emplace_back(model.grads(),
                                                   model.grads() + model.num_params());
                     });
      mine.expected = model.gradient_ranges_in_backward_order();
      mine.final_grads.assign(model.grads(), model.grads() + model.num_params());
    });
    for (const Seen& mine : seen) {
      INFO("T = " << ranks);
      REQUIRE(mine.reported == mine.expected);
      REQUIRE(mine.reported.size() >= 3);
      size_t covered = 0;
      for (size_t i = 0; i < mine.reported.size(); ++i) {
        const auto& r = mine.reported[i];
        covered += r.count;
        const auto& now = mine.at_report[i];
        INFO("range " << i);
        CHECK(std::equal(now.begin() + static_cast<std::ptrdiff_t>(r.offset),
                         now.begin() + static_cast<std::ptrdiff_t>(r.end()),
                         mine.final_grads.begin() + static_cast<std::ptrdiff_t>(r.offset)));
        // Whether the range reported next was still to be computed at this report.
        if (i + 1 < mine.reported.size()) {
          const auto& next = mine.reported[i + 1];
          const bool next_final = std::equal(
              now.begin() + static_cast<std::ptrdiff_t>(next.offset),
              now.begin() + static_cast<std::ptrdiff_t>(next.end()),
              mine.final_grads.begin() + static_cast<std::ptrdiff_t>(next.offset));
          CHECK(next_final == (ranks > 1));
        }
      }
      CHECK(covered == mine.final_grads.size());
    }
  }
}
