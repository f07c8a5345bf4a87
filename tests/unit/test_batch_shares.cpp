// How a step's global batch is shared out over the data-parallel replicas in whole
// micro-batches (train/layout/batch_shares.hpp, data.balance): even shares, shares by
// measured speed (at least one each, summing to the batch, a pure function of the
// speeds), and the config's checks of data.balance = "throughput" naming the keys.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/config/load.hpp"
#include "runtime/train/layout/batch_shares.hpp"

using namespace dseek;
using Catch::Matchers::Contains;

namespace {
std::string load_error(const std::vector<std::string>& overrides) {
  try {
    const auto job = config::load_config_text("", "x.toml", overrides);
    config::check_supported(job);
  } catch (const config::ConfigError& error) {
    return error.what();
  }
  return "";
}
}  // namespace

TEST_CASE("even shares: consecutive runs, the first replicas one more", "[balance]") {
  const train::BatchShares shares = train::even_shares(7, 3);
  CHECK(shares.micro_batches == std::vector<int64_t>{3, 2, 2});
  CHECK(shares.total() == 7);
  CHECK(shares.first(0) == 0);
  CHECK(shares.first(1) == 3);
  CHECK(shares.first(2) == 5);
  CHECK(train::even_shares(8, 2).micro_batches == std::vector<int64_t>{4, 4});
  CHECK_THROWS_AS(train::even_shares(2, 3), std::invalid_argument);
}

TEST_CASE("throughput shares follow the speeds, at least one each, summing to the batch",
          "[balance]") {
  // Equal speeds: even shares.
  CHECK(train::throughput_shares(8, std::vector<double>{5, 5}).micro_batches ==
        std::vector<int64_t>{4, 4});
  // 3x faster: 6 of 8 (exactly 6 and 2).
  CHECK(train::throughput_shares(8, std::vector<double>{30, 10}).micro_batches ==
        std::vector<int64_t>{6, 2});
  // A replica that earns less than one micro-batch still gets one; the others give it up.
  CHECK(train::throughput_shares(10, std::vector<double>{1, 1, 100}).micro_batches ==
        std::vector<int64_t>{1, 1, 8});
  // Rounding: 7 over speeds 1:1:1 -> the remainder to the lowest replica on ties.
  CHECK(train::throughput_shares(7, std::vector<double>{2, 2, 2}).micro_batches ==
        std::vector<int64_t>{3, 2, 2});
  // Every total and a spread of speeds: sums, minimum, order by speed.
  for (int64_t total = 3; total <= 40; ++total) {
    const std::vector<double> speeds{1.0, 2.5, 7.0};
    const auto shares = train::throughput_shares(total, speeds);
    INFO("total " << total);
    CHECK(shares.total() == total);
    for (int64_t m : shares.micro_batches) CHECK(m >= 1);
    CHECK(shares.micro_batches[0] <= shares.micro_batches[1]);
    CHECK(shares.micro_batches[1] <= shares.micro_batches[2]);
  }
  CHECK_THROWS_AS(train::throughput_shares(1, std::vector<double>{1, 1}), std::invalid_argument);
  CHECK_THROWS_AS(train::throughput_shares(4, std::vector<double>{1, 0}), std::invalid_argument);
}

TEST_CASE("data.balance = throughput: any batch of one micro-batch per replica, named refusals",
          "[balance][config]") {
  // 2 nodes, a batch of 15 (5 micro-batches of 3): refused with equal slices, taken by
  // throughput.
  const std::vector<std::string> job = {"cluster.nodes=2", "train.batch_size=15",
                                        "train.micro_batch_size=3"};
  CHECK_THAT(load_error(job), Contains("must be divisible by cluster.nodes (2)"));
  std::vector<std::string> by_speed = job;
  by_speed.push_back("data.balance=\"throughput\"");
  CHECK(load_error(by_speed).empty());
  CHECK_THAT(load_error({"cluster.nodes=2", "train.batch_size=14", "data.balance=\"throughput\""}),
             Contains("set train.micro_batch_size"));
  CHECK_THAT(load_error({"cluster.nodes=4", "train.batch_size=6", "train.micro_batch_size=2",
                         "data.balance=\"throughput\""}),
             Contains("(3 micro-batches) must be at least the 4 replicas"));
  // Pipelines: 1F1B and interleaved (in groups of P micro-batches); GPipe refused.
  const std::vector<std::string> pipelines = {"cluster.nodes=4", "parallel.pipeline=2",
                                              "parallel.data=2", "train.batch_size=14",
                                              "train.micro_batch_size=2",
                                              "data.balance=\"throughput\""};
  CHECK(load_error(pipelines).empty());
  std::vector<std::string> gpipe = pipelines, interleaved = pipelines;
  gpipe.push_back("parallel.schedule=\"gpipe\"");
  CHECK_THAT(load_error(gpipe), Contains("data.balance") && Contains("GPipe"));
  interleaved.push_back("parallel.schedule=\"interleaved\"");
  interleaved.push_back("parallel.virtual_stages=2");
  CHECK_THAT(load_error(interleaved), Contains("(7) must be a multiple of parallel.pipeline (2)"));
  interleaved.push_back("train.batch_size=16");
  CHECK(load_error(interleaved).empty());
  CHECK_THAT(load_error({"data.rebalance_every=0"}), Contains("data.rebalance_every"));
}
