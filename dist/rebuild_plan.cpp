// Implementation of rebuild_plan.hpp.
#include "dist/rebuild_plan.hpp"

#include <algorithm>
#include <functional>


namespace dseek::dist {

namespace {

// The lowest rank satisfying `holds`, or -1.
int first_rank(const std::vector<HeldState>& held, const std::function<bool(const HeldState&)>& holds) {
  for (size_t r = 0; r < held.size(); ++r)
    if (holds(held[r])) return static_cast<int>(r);
  return -1;
}

}  // namespace

RebuildPlan plan_for_step(const std::vector<HeldState>& held, int64_t step) {
  RebuildPlan plan;
  const int whole = first_rank(held, [&](const HeldState& h) {
    return h.steps_done == step && h.sharded_world == 0;
  });
  if (whole >= 0) {
    plan.steps_done = step;
    plan.params_rank = whole;
    plan.whole_state = true;
    return plan;
  }
  const int params = first_rank(held, [&](const HeldState& h) { return h.steps_done == step; });
  if (params < 0) {
    plan.unrecoverable = "no rank holds the parameters of step " + std::to_string(step);
    return plan;
  }
  const int64_t world = held[static_cast<size_t>(params)].sharded_world;
  plan.shard_rank.assign(static_cast<size_t>(world), -1);
  plan.from_replica.assign(static_cast<size_t>(world), false);
  for (int64_t shard = 0; shard < world; ++shard) {
    int giver = first_rank(held, [&](const HeldState& h) {
      return h.sharded_world == world && h.steps_done == step && h.own_shard == shard;
    });
    if (giver < 0) {
      giver = first_rank(held, [&](const HeldState& h) {
        return h.sharded_world == world && h.replica_shard == shard && h.replica_steps_done == step;
      });
      plan.from_replica[static_cast<size_t>(shard)] = true;
    }
    if (giver < 0) {
      plan.unrecoverable =
          "the optimizer shard of rank " + std::to_string(shard) + " of the " +
          std::to_string(world) + "-rank world at step " + std::to_string(step) +
          " is on no node of this world: neither its own node nor the rank that keeps its "
          "replica holds it at that step (both lost)";
      return plan;
    }
    plan.shard_rank[static_cast<size_t>(shard)] = giver;
  }
  plan.steps_done = step;
  plan.params_rank = params;
  plan.world = world;
  return plan;
}

std::vector<model::ParamRange> broadcast_ranges(comm::Communicator& comm,
                                                std::vector<model::ParamRange> ranges, int root) {
  uint64_t count = ranges.size();
  comm.broadcast(&count, sizeof(count), comm::DataType::u8, root).wait();
  std::vector<uint64_t> flat(2 * count);
  if (comm.rank() == root)
    for (size_t i = 0; i < count; ++i) {
      flat[2 * i] = ranges[i].offset;
      flat[2 * i + 1] = ranges[i].count;
    }
  comm.broadcast(flat.data(), flat.size() * sizeof(uint64_t), comm::DataType::u8, root).wait();
  ranges.resize(count);
  for (size_t i = 0; i < count; ++i) ranges[i] = {flat[2 * i], flat[2 * i + 1]};
  return ranges;
}

RebuildPlan plan_rebuild(const std::vector<HeldState>& held) {
  std::vector<int64_t> steps;
  for (const auto& h : held)
    if (h.steps_done >= 0) steps.push_back(h.steps_done);
  std::sort(steps.begin(), steps.end(), std::greater<>());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  RebuildPlan none;
  // The freshest complete step; the reason reported is the freshest step's.
  for (int64_t step : steps) {
    RebuildPlan plan = plan_for_step(held, step);
    if (plan.unrecoverable.empty()) return plan;
    if (none.unrecoverable.empty()) none.unrecoverable = plan.unrecoverable;
  }
  return none;
}

}  // namespace dseek::dist
