// Which data x pipeline x tensor layout a pipeline or tensor-parallel job trains in after
// its world changed (a node lost, or one that rejoined): every node of the new world
// computes it from the same inputs (the world's size and the configured parallel.data,
// .pipeline and .tensor), so they agree without a message. The preference, from what
// keeps the most of the job to what keeps it running at all:
//
//   1. the configured pipeline and tensor sizes, with as many data-parallel replicas as
//      fit (never more than parallel.data): losing a node drops a replica first;
//   2. not one whole pipeline fits: the layers re-partitioned over fewer stages
//      (P' = world / T, down to 2), one replica, the tensor size kept;
//   3. no pipeline at all: tensor parallelism alone (T kept, world / T replicas);
//   4. plain data parallelism over the whole world, down to a single node.
//
// A candidate is taken only if the job's config runs on it (config_for_layout +
// layout_refusal: the global batch must split over the replicas and micro-batches, the
// schedule must fit the stages, ...). The world ranks past the layout's (world -
// ranks()) stand by: they train again when the layout grows at a later epoch.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/config/job_config.hpp"

namespace dseek::train {

struct SurvivorLayout {
  int data = 1, pipeline = 1, tensor = 1;
  int ranks() const { return data * pipeline * tensor; }
  bool operator==(const SurvivorLayout&) const = default;
};

// "data 1 x pipeline 2 x tensor 1"
std::string describe(const SurvivorLayout& layout);

// Every layout rules 1-4 allow for a world of `world` ranks, best first (each fits in
// `world`; the configured sizes are `data`, `pipeline`, `tensor`).
std::vector<SurvivorLayout> survivor_layout_candidates(int world, int data, int pipeline,
                                                       int tensor);

// The first candidate `refusal` has nothing against ("" = it runs). Throws
// std::runtime_error naming every refusal when no candidate runs.
SurvivorLayout plan_survivor_layout(int world, int data, int pipeline, int tensor,
                                    const std::function<std::string(const SurvivorLayout&)>& refusal);

// `config` as the ranks of `layout` run it: parallel.data, .pipeline and .tensor set to
// the layout's; without a pipeline, the pipeline-only keys (schedule, virtual stages,
// micro-batches, partition) back at their defaults.
config::JobConfig config_for_layout(const config::JobConfig& config, const SurvivorLayout& layout);

// Why `config` cannot run on `layout` (the ConfigError the checks of a job of that shape
// would raise), or "" when it can.
std::string layout_refusal(const config::JobConfig& config, const SurvivorLayout& layout);

}  // namespace dseek::train
