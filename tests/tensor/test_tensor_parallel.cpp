// Tensor parallelism between processes: T = 2 and 4 dseek_tp_rank processes on loopback (UCX,
// file bootstrap) against the single process training the whole model from the same
// seed on the same batches.
//
// Tolerance: the ranks compute the same math with partial sums split over heads, MLP
// columns and vocabulary rows and added by the all-reduce, where the single process
// adds them inside one sgemm: float32 rounding, ~1e-7 relative per sum. The first step's
// loss sees only the forward (1e-6 relative); AdamW then moves each parameter by at most
// lr = 2e-3 per step, so rounding in the gradient becomes ~1e-7 relative in the update.
// Bounds: losses 1e-5 relative; final parameters 2e-5 absolute (1% of one update), except
// the attention key biases, whose gradient is zero in exact arithmetic (the softmax
// ignores a constant added to every score): both runs hold rounding noise there, which
// AdamW's m / sqrt(v) scales up to steps of ~lr, so they are held to 4 lr (they stay at
// zero in exact arithmetic; a wrong slice puts another tensor's values there).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <thread>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "tensor/tp_job_shape.hpp"

namespace {

using dseek::testing::ScratchDir;

struct RankOutput {
  std::vector<double> losses;
  std::vector<float> params;
};

RankOutput read_output(const std::filesystem::path& dir, int rank) {
  RankOutput out;
  std::ifstream losses(dir / ("losses-" + std::to_string(rank) + ".txt"));
  for (double loss; losses >> loss;) out.losses.push_back(loss);
  std::ifstream params(dir / ("params-" + std::to_string(rank) + ".f32"), std::ios::binary);
  params.seekg(0, std::ios::end);
  out.params.resize(static_cast<size_t>(params.tellg()) / sizeof(float));
  params.seekg(0);
  params.read(reinterpret_cast<char*>(out.params.data()),
              static_cast<std::streamsize>(out.params.size() * sizeof(float)));
  return out;
}

// Runs `ranks` processes to the end (bounded wait; run_process kills on timeout).
// `extra`: more arguments for every rank (--recompute every:1).
std::string run_group(int ranks, const std::filesystem::path& dir, int steps,
                      const std::vector<std::string>& extra = {}) {
  std::filesystem::create_directories(dir / "rendezvous");
  std::vector<dseek::testing::ProcessResult> results(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      std::vector<std::string> argv{
          dseek::testing::bin("dseek_tp_rank"), "--rank", std::to_string(r), "--size",
          std::to_string(ranks), "--bootstrap", "file:" + (dir / "rendezvous").string(), "--out",
          dir.string(), "--steps", std::to_string(steps)};
      argv.insert(argv.end(), extra.begin(), extra.end());
      results[static_cast<size_t>(r)] = dseek::testing::run_process(argv, std::chrono::seconds(120));
    });
  for (auto& t : threads) t.join();
  std::string failures;
  for (int r = 0; r < ranks; ++r) {
    const auto& result = results[static_cast<size_t>(r)];
    if (result.exit_code != 0 || result.timed_out)
      failures += "rank " + std::to_string(r) + ": exit " + std::to_string(result.exit_code) +
                  (result.timed_out ? " (timed out)" : "") + "\n" + result.output;
  }
  return failures;
}

// T ranks against the single process; every check of the header comment.
void check_group_matches_single_process(int ranks) {
  using namespace dseek::testing::tp;
  const int steps = 4;
  ScratchDir single("tp-single"), group("tp-group");
  const std::string single_failures = run_group(1, single.path(), steps);
  INFO(single_failures);
  REQUIRE(single_failures.empty());
  const std::string group_failures = run_group(ranks, group.path(), steps);
  INFO(group_failures);
  REQUIRE(group_failures.empty());

  const RankOutput reference = read_output(single.path(), 0);
  const dseek::model::ParamLayout layout(kShape);
  REQUIRE(reference.losses.size() == static_cast<size_t>(steps));
  REQUIRE(reference.params.size() == layout.total());
  std::vector<float> assembled(layout.total(), std::nanf(""));
  for (int r = 0; r < ranks; ++r) {
    const RankOutput rank = read_output(group.path(), r);
    REQUIRE(rank.losses.size() == static_cast<size_t>(steps));
    for (int s = 0; s < steps; ++s)
      CHECK(std::abs(rank.losses[static_cast<size_t>(s)] - reference.losses[static_cast<size_t>(s)]) <=
            1e-5 * reference.losses[static_cast<size_t>(s)]);
    REQUIRE(rank.params.size() == layout.total());
    for (size_t k = 0; k < layout.total(); ++k) {
      if (std::isnan(rank.params[k])) continue;
      // A float both ranks hold is a replicated parameter: bitwise equal on both.
      if (!std::isnan(assembled[k])) CHECK(assembled[k] == rank.params[k]);
      assembled[k] = rank.params[k];
    }
  }
  for (const auto& tensor : layout.tensors()) {
    INFO(tensor.name);
    const bool is_qkv_bias = tensor.name.ends_with("attn.qkv.bias");
    double worst = 0.0, worst_key_bias = 0.0;
    size_t missing = 0;
    for (size_t i = 0; i < tensor.size(); ++i) {
      const size_t k = tensor.offset + i;
      if (std::isnan(assembled[k])) ++missing;
      const double diff = std::abs(static_cast<double>(assembled[k]) - reference.params[k]);
      const bool key_bias = is_qkv_bias && i >= static_cast<size_t>(kShape.dim) &&
                            i < static_cast<size_t>(2 * kShape.dim);
      (key_bias ? worst_key_bias : worst) = std::max(key_bias ? worst_key_bias : worst, diff);
    }
    CHECK(missing == 0);
    CHECK(worst <= 2e-5);
    CHECK(worst_key_bias <= 4 * kLearningRate);
  }
}

}  // namespace

TEST_CASE("T=2 tensor-parallel processes train like the single process", "[tp]") {
  check_group_matches_single_process(2);
}

// 4 processes share 2 cores here: slower, and the all-reduce adds 4 contributions, which
// must still give every rank the same bits.
TEST_CASE("T=4 tensor-parallel processes train like the single process", "[tp]") {
  check_group_matches_single_process(4);
}

// Recompute (model.recompute) inside the ranks: every rank redoes its blocks' forward,
// the attention branch's all-reduce over UCX included. The data plane's all-reduce sums
// in a fixed order, so the recomputed activations, and with them every step, are
// bitwise those of the group without recompute: losses (written with 17 digits) and
// every rank's final parameters, bit for bit.
TEST_CASE("T=2 tensor-parallel processes with model.recompute = every:1 give the same bits",
          "[tp][recompute]") {
  const int ranks = 2, steps = 3;
  ScratchDir kept("tp-kept"), recomputed("tp-recomputed");
  const std::string kept_failures = run_group(ranks, kept.path(), steps);
  INFO(kept_failures);
  REQUIRE(kept_failures.empty());
  const std::string recompute_failures =
      run_group(ranks, recomputed.path(), steps, {"--recompute", "every:1"});
  INFO(recompute_failures);
  REQUIRE(recompute_failures.empty());
  for (int r = 0; r < ranks; ++r) {
    INFO("rank " << r);
    const RankOutput a = read_output(kept.path(), r), b = read_output(recomputed.path(), r);
    REQUIRE(a.losses.size() == static_cast<size_t>(steps));
    CHECK(b.losses == a.losses);
    REQUIRE(b.params.size() == a.params.size());
    // NaN marks the floats the rank does not hold: compare bit patterns, not values.
    CHECK(std::memcmp(a.params.data(), b.params.data(), a.params.size() * sizeof(float)) == 0);
  }
}
