// How replicas of a pipeline or of a tensor-parallel group (parallel.data > 1) split the
// global batch: equal consecutive slices in replica order (train::replica_slice), and a
// pipeline's micro-batches counted per replica (train::schedule_shape_of), with the
// refusals naming the keys when the batch does not split.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "runtime/config/load.hpp"
#include "runtime/train/pipeline/plan.hpp"
#include "runtime/train/layout/replica_group.hpp"

using namespace dseek;
using Catch::Matchers::Contains;

namespace {
// The 4-node job of two 2-stage pipeline replicas over a batch of 12, plus `setting`.
config::JobConfig pipeline_replicas(const std::string& setting) {
  return config::load_config_text("", "x.toml",
                                  {"cluster.nodes=4", "parallel.pipeline=2", "parallel.data=2",
                                   "train.batch_size=12", setting});
}

std::string refusal(const config::JobConfig& job) {
  try {
    train::schedule_shape_of(job);
  } catch (const config::ConfigError& error) {
    return error.what();
  }
  return "";
}
}  // namespace

TEST_CASE("replicas take equal consecutive slices of the global batch", "[replicas]") {
  const auto first = train::replica_slice(12, 2, 0), second = train::replica_slice(12, 2, 1);
  CHECK(first.first == 0);
  CHECK(first.size == 6);
  CHECK(second.first == 6);
  CHECK(second.size == 6);
  CHECK(train::replica_slice(12, 1, 0).size == 12);
  CHECK_THROWS_WITH(train::replica_slice(12, 5, 0),
                    Contains("train.batch_size (12) must be divisible by parallel.data (5)"));
  CHECK_THROWS_AS(train::replica_slice(12, 2, 2), std::invalid_argument);
}

TEST_CASE("a pipeline replica runs its slice in micro-batches", "[replicas][pipeline]") {
  const auto by_size = pipeline_replicas("train.micro_batch_size=2");
  CHECK(train::pipeline_micro_batch_size(by_size) == 2);
  CHECK(train::schedule_shape_of(by_size).micro_batches == 3);
  const auto by_count = pipeline_replicas("parallel.micro_batches=2");
  CHECK(train::pipeline_micro_batch_size(by_count) == 3);
  CHECK(train::schedule_shape_of(by_count).micro_batches == 2);
  const auto uneven = pipeline_replicas("parallel.micro_batches=4");
  CHECK_THAT(refusal(uneven),
             Contains("parallel.micro_batches (4) must divide each pipeline's slice of "
                      "train.batch_size (12 / parallel.data = 6)"));
  const auto too_big = pipeline_replicas("train.micro_batch_size=4");
  CHECK_THAT(refusal(too_big), Contains("train.micro_batch_size (4) must divide each pipeline's slice"));
}
