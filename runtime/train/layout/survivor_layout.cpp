// Implementation of survivor_layout.hpp.
#include "runtime/train/layout/survivor_layout.hpp"

#include <algorithm>
#include <stdexcept>

#include "runtime/config/load.hpp"
#include "runtime/train/check_job.hpp"
#include "runtime/train/pipeline/plan.hpp"

namespace dseek::train {

std::string describe(const SurvivorLayout& layout) {
  std::string text = "data " + std::to_string(layout.data);
  text += " x pipeline " + std::to_string(layout.pipeline);
  text += " x tensor " + std::to_string(layout.tensor);
  return text;
}

std::vector<SurvivorLayout> survivor_layout_candidates(int world, int data, int pipeline,
                                                       int tensor) {
  std::vector<SurvivorLayout> candidates;
  auto add = [&](int d, int p, int t) {
    const SurvivorLayout layout{d, p, t};
    if (layout.ranks() > world) return;
    if (std::find(candidates.begin(), candidates.end(), layout) == candidates.end())
      candidates.push_back(layout);
  };
  // 1. Whole pipelines of whole tensor groups: fewer replicas.
  for (int d = std::min(data, world / (pipeline * tensor)); d >= 1; --d) add(d, pipeline, tensor);
  // 2. Not one whole pipeline: its layers over fewer stages.
  for (int p = std::min(pipeline - 1, world / tensor); p >= 2; --p) add(1, p, tensor);
  // 3. No pipeline: the tensor groups alone, as many replicas as fit.
  if (pipeline > 1 && tensor > 1)
    for (int d = world / tensor; d >= 1; --d) add(d, 1, tensor);
  // 4. Plain data parallelism, down to one node.
  for (int d = world; d >= 1; --d) add(d, 1, 1);
  return candidates;
}

SurvivorLayout plan_survivor_layout(
    int world, int data, int pipeline, int tensor,
    const std::function<std::string(const SurvivorLayout&)>& refusal) {
  if (world < 1) throw std::invalid_argument("no rank is left to train on");
  std::string refusals;
  for (const auto& candidate : survivor_layout_candidates(world, data, pipeline, tensor)) {
    const std::string why = refusal(candidate);
    if (why.empty()) return candidate;
    refusals += "\n  " + describe(candidate) + ": ";
    refusals += why;
  }
  throw std::runtime_error("no layout of " + std::to_string(world) +
                           " ranks runs this job:" + refusals);
}

config::JobConfig config_for_layout(const config::JobConfig& config, const SurvivorLayout& layout) {
  config::JobConfig session = config;
  session.parallel.data = layout.data;
  session.parallel.pipeline = layout.pipeline;
  session.parallel.tensor = layout.tensor;
  if (layout.pipeline == 1) {
    // These keys are refused without a pipeline (config::check_supported).
    const config::JobConfig defaults = config::default_config();
    session.parallel.schedule = defaults.parallel.schedule;
    session.parallel.virtual_stages = defaults.parallel.virtual_stages;
    session.parallel.micro_batches = defaults.parallel.micro_batches;
    session.parallel.partition = defaults.parallel.partition;
  }
  return session;
}

std::string layout_refusal(const config::JobConfig& config, const SurvivorLayout& layout) {
  // The job as if it had been launched on exactly the layout's ranks: the checks of the
  // world's own membership (node ids, fault targets, the elastic minimum) do not apply,
  // nor how its ranks sit on nodes (cluster.gpus_per_node of them a node).
  config::JobConfig probe = config_for_layout(config, layout);
  probe.cluster.nodes = layout.ranks();
  probe.cluster.gpus_per_node = 1;
  probe.cluster.node_id = 0;
  probe.cluster.coordinator_node = 0;
  probe.cluster.backup_coordinators.clear();  // node ids of the whole job
  probe.elastic.min_nodes = 1;
  probe.faults.clear();
  try {
    config::validate(probe);
    check_job(probe);
  } catch (const std::exception& error) {
    return error.what();
  }
  return "";
}

}  // namespace dseek::train
