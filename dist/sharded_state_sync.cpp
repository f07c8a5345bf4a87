// Implementation of sharded_state_sync.hpp.
#include "dist/sharded_state_sync.hpp"

#include <algorithm>
#include <cstring>
#include <functional>

#include "dist/peer_shard_replica.hpp"

namespace dseek::dist {

namespace {

constexpr size_t kHeldFields = 6;

std::vector<HeldState> gather_held(comm::Communicator& comm, const train::TrainingState& state) {
  const size_t ranks = static_cast<size_t>(comm.size());
  // int64 fields as raw bytes: exact, whatever the step count.
  std::vector<int64_t> all(ranks * kHeldFields, 0);
  int64_t* mine = all.data() + static_cast<size_t>(comm.rank()) * kHeldFields;
  const int64_t fields[kHeldFields] = {state.steps_done,   state.optimizer_steps,
                                       state.sharded_world, state.own_shard,
                                       state.replica_shard, state.replica_steps_done};
  std::memcpy(mine, fields, sizeof(fields));
  comm.all_gather(mine, all.data(), all.size() * sizeof(int64_t), comm::DataType::u8).wait();
  std::vector<HeldState> held(ranks);
  for (size_t r = 0; r < ranks; ++r) {
    const int64_t* f = all.data() + r * kHeldFields;
    held[r] = HeldState{f[0], f[1], f[2], f[3], f[4], f[5]};
  }
  return held;
}

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

ShardedStateAgreement rebuild_sharded_state(comm::Communicator& comm, train::TrainingState& state,
                                            size_t param_count) {
  ShardedStateAgreement agreement;
  const auto held = gather_held(comm, state);
  const RebuildPlan plan = plan_rebuild(held);
  agreement.unrecoverable = plan.unrecoverable;
  if (plan.steps_done < 0) return agreement;

  const bool had_step = state.steps_done == plan.steps_done;
  state.params.resize(param_count);
  state.adam_m.resize(param_count);
  state.adam_v.resize(param_count);
  comm.broadcast(state.params.data(), param_count, comm::DataType::f32, plan.params_rank).wait();
  if (plan.whole_state) {
    comm.broadcast(state.adam_m.data(), param_count, comm::DataType::f32, plan.params_rank).wait();
    comm.broadcast(state.adam_v.data(), param_count, comm::DataType::f32, plan.params_rank).wait();
  } else {
    std::vector<float> packed;
    for (size_t shard = 0; shard < plan.shard_rank.size(); ++shard) {
      const int giver = plan.shard_rank[shard];
      const bool gives = giver == comm.rank();
      const auto ranges = broadcast_ranges(
          comm, gives ? (plan.from_replica[shard] ? state.replica_ranges : state.own_ranges)
                      : std::vector<model::ParamRange>{},
          giver);
      size_t count = 0;
      for (const auto& range : ranges) count += range.count;
      if (gives) pack_moments(ranges, state.adam_m.data(), state.adam_v.data(), packed);
      else packed.resize(2 * count);
      comm.broadcast(packed.data(), packed.size(), comm::DataType::f32, giver).wait();
      if (!gives) unpack_moments(ranges, packed.data(), state.adam_m.data(), state.adam_v.data());
    }
  }
  state.steps_done = plan.steps_done;
  state.optimizer_steps = held[static_cast<size_t>(plan.params_rank)].optimizer_steps;
  state.sharded_world = 0;
  state.own_shard = state.replica_shard = -1;
  state.replica_steps_done = -1;
  state.own_ranges.clear();
  state.replica_ranges.clear();
  agreement.steps_done = plan.steps_done;
  agreement.from_peer =
      !had_step || std::find(plan.from_replica.begin(), plan.from_replica.end(), true) !=
                       plan.from_replica.end();
  return agreement;
}

}  // namespace dseek::dist
