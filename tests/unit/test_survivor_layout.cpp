// The layout a pipeline or tensor-parallel job re-plans to after a node loss
// (train::plan_survivor_layout): replicas go first, then pipeline stages, then the
// pipeline, then tensor parallelism; a layout the job's config cannot run (the batch does
// not split) is passed over for the next one.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "runtime/config/load.hpp"
#include "runtime/train/layout/survivor_layout.hpp"

using dseek::train::SurvivorLayout;
namespace config = dseek::config;
namespace train = dseek::train;

namespace {

// config/single.toml's model shape (4 layers, 4 heads) with a batch of 12 in
// micro-batches of `micro`.
config::JobConfig small_job(int data, int pipeline, int tensor, int micro = 2) {
  config::JobConfig job = config::default_config();
  job.model.layers = 4;
  job.model.heads = 4;
  job.model.dim = 64;
  job.model.vocab = 256;
  job.train.batch_size = 12;
  job.train.micro_batch_size = micro;
  job.parallel.data = data;
  job.parallel.pipeline = pipeline;
  job.parallel.tensor = tensor;
  job.cluster.nodes = data * pipeline * tensor;
  return job;
}

SurvivorLayout plan(const config::JobConfig& job, int world) {
  return train::plan_survivor_layout(
      world, static_cast<int>(job.parallel.data), static_cast<int>(job.parallel.pipeline),
      static_cast<int>(job.parallel.tensor),
      [&job](const SurvivorLayout& layout) { return train::layout_refusal(job, layout); });
}

}  // namespace

TEST_CASE("a lost node costs a data-parallel replica first, then pipeline stages",
          "[survivor_layout]") {
  const auto job = small_job(2, 2, 1);
  CHECK(plan(job, 4) == SurvivorLayout{2, 2, 1});  // the whole world: as configured
  CHECK(plan(job, 3) == SurvivorLayout{1, 2, 1});  // one replica; the third node stands by
  CHECK(plan(job, 2) == SurvivorLayout{1, 2, 1});
  CHECK(plan(job, 1) == SurvivorLayout{1, 1, 1});  // one stage: the whole model on one node

  const auto three_stages = small_job(1, 3, 1);
  CHECK(plan(three_stages, 2) == SurvivorLayout{1, 2, 1});  // 4 layers over 2 stages
  CHECK(train::describe(plan(three_stages, 2)) == "data 1 x pipeline 2 x tensor 1");
}

TEST_CASE("a tensor-parallel group is kept whole while one fits", "[survivor_layout]") {
  const auto job = small_job(2, 1, 2);
  CHECK(plan(job, 3) == SurvivorLayout{1, 1, 2});
  CHECK(plan(job, 1) == SurvivorLayout{1, 1, 1});
  // Pipeline x tensor: no pipeline stage is kept before the tensor group is given up.
  CHECK(train::survivor_layout_candidates(3, 1, 2, 2) ==
        std::vector<SurvivorLayout>{{1, 1, 2}, {3, 1, 1}, {2, 1, 1}, {1, 1, 1}});
  CHECK(train::survivor_layout_candidates(6, 1, 3, 2).front() == SurvivorLayout{1, 3, 2});
  CHECK(train::survivor_layout_candidates(5, 1, 3, 2).front() == SurvivorLayout{1, 2, 2});
}

TEST_CASE("a layout the batch does not split over is passed over", "[survivor_layout]") {
  // 12 sequences in micro-batches of 4: 3 replicas take 4 each, 2 would take 6.
  const auto job = small_job(3, 2, 1, 4);
  CHECK(plan(job, 6) == SurvivorLayout{3, 2, 1});
  CHECK(plan(job, 5) == SurvivorLayout{1, 2, 1});
  CHECK_THAT(train::layout_refusal(job, SurvivorLayout{2, 2, 1}),
             Catch::Matchers::Contains("must divide"));
  // Plain data parallelism: 12 sequences do not split over 5 nodes.
  const auto data_parallel = small_job(1, 2, 1, 3);
  CHECK(plan(data_parallel, 1) == SurvivorLayout{1, 1, 1});
  CHECK(train::layout_refusal(data_parallel, SurvivorLayout{5, 1, 1}) != "");
}

TEST_CASE("a layout without a pipeline drops the pipeline-only keys", "[survivor_layout]") {
  auto job = small_job(1, 2, 1);
  job.parallel.schedule = config::Schedule::gpipe;
  const auto alone = train::config_for_layout(job, SurvivorLayout{1, 1, 1});
  CHECK(alone.parallel.pipeline == 1);
  CHECK(alone.parallel.schedule == config::Schedule::one_f_one_b);
  CHECK(train::layout_refusal(job, SurvivorLayout{1, 1, 1}) == "");
  CHECK(train::config_for_layout(job, SurvivorLayout{1, 2, 1}).parallel.schedule == config::Schedule::gpipe);
}

TEST_CASE("no layout that runs is an error naming every refusal", "[survivor_layout]") {
  try {
    train::plan_survivor_layout(2, 1, 2, 1, [](const SurvivorLayout&) { return "no"; });
    FAIL("expected an error");
  } catch (const std::runtime_error& error) {
    CHECK(std::string(error.what()) ==
          "no layout of 2 ranks runs this job:\n  data 1 x pipeline 2 x tensor 1: no\n"
          "  data 2 x pipeline 1 x tensor 1: no\n  data 1 x pipeline 1 x tensor 1: no");
  }
}
