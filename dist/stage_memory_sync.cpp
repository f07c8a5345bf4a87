// Implementation of stage_memory_sync.hpp.
#include "dist/stage_memory_sync.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <set>
#include <stdexcept>

#include "dist/ring_exchange.hpp"
#include "dist/rebuild_plan.hpp"

namespace dseek::dist {

namespace {

// One rank's offer: its position's index in the layout, its replica in the data group,
// the steps of its two whole copies there (-1: none), and what its ZeRO copy holds
// there (rebuild_plan.hpp's HeldState; steps_done -1: none). Raw int64 fields.
struct Offer {
  int64_t position = 0, replica = 0, first = -1, second = -1;
  HeldState sharded;
};
constexpr size_t kOfferFields = 10;
static_assert(sizeof(Offer) == kOfferFields * sizeof(int64_t));

std::vector<Offer> gather_offers(comm::Communicator& world, const Offer& mine) {
  std::vector<Offer> all(static_cast<size_t>(world.size()));
  all[static_cast<size_t>(world.rank())] = mine;
  world.all_gather(&all[static_cast<size_t>(world.rank())], all.data(), all.size() * sizeof(Offer),
                   comm::DataType::u8)
      .wait();
  return all;
}

HeldState held_of(const train::ShardedStageCopy& kept) {
  return HeldState{kept.own.steps_done, kept.own.optimizer_steps, kept.sharded_world,
                   kept.own_shard,      kept.replica_shard,       kept.replica_steps_done};
}

// The layout's ranks of one position, by replica.
struct PositionOffers {
  int64_t lowest_whole_copy = -1;  // the lowest replica with a whole copy of the step
  std::vector<HeldState> sharded;  // by replica
};

// Every position's offers for `step`.
std::map<int64_t, PositionOffers> offers_by_position(const std::vector<Offer>& offers,
                                                     int64_t step) {
  std::map<int64_t, PositionOffers> positions;
  for (const Offer& offer : offers) {
    PositionOffers& at = positions[offer.position];
    if ((offer.first == step || offer.second == step) &&
        (at.lowest_whole_copy < 0 || offer.replica < at.lowest_whole_copy))
      at.lowest_whole_copy = offer.replica;
    if (at.sharded.size() <= static_cast<size_t>(offer.replica))
      at.sharded.resize(static_cast<size_t>(offer.replica) + 1);
    at.sharded[static_cast<size_t>(offer.replica)] = offer.sharded;
  }
  return positions;
}

}  // namespace

int CommStageMemorySync::ring_stride() const {
  // Replicas of one position are parallel.pipeline x parallel.tensor world ranks apart,
  // and a node holds cluster.gpus_per_node consecutive ones.
  const int64_t apart = config_.parallel.pipeline * config_.parallel.tensor;
  const int64_t per_node = std::max<int64_t>(1, config_.cluster.gpus_per_node);
  const int stride = static_cast<int>(std::max<int64_t>(1, per_node / apart));
  return stride < data_group_->size() ? stride : 1;  // a group left on one node: the next
}

void CommStageMemorySync::keep(train::StageMemory& memory, int64_t steps_done,
                               const train::StagePosition& at, train::PipelineStage& stage,
                               metrics::EventLog& events) {
  const train::PipelineStageInfo& info = stage.info();
  if (!info.shards_optimizer_state || data_group_ == nullptr) {
    memory.keep(steps_done, at, stage);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  train::ShardedStageCopy& kept = memory.sharded();
  const int world = data_group_->size();
  const int rank = data_group_->rank();
  const int stride = ring_stride();
  const int successor = (rank + stride) % world, predecessor = (rank + world - stride) % world;
  if (!ring_ready_) {
    // The successor's pieces, once an epoch: every replica's ranges to every replica.
    successor_ranges_ = all_ranges(info.owned_state_moments)[static_cast<size_t>(successor)];
    size_t floats = 0;
    for (const auto& range : successor_ranges_) floats += range.count;
    incoming_.resize(floats);
    // A replica kept in another world or position is no replica of this one.
    if (kept.sharded_world != world || kept.replica_shard != successor || kept.own.position != at)
      kept.replica_steps_done = -1;
    kept.own_ranges = info.owned_state_moments;
    kept.replica_ranges = successor_ranges_;
    successor_ = successor;
    ring_ready_ = true;
  }
  kept.own.state.resize(info.owned_state_floats);
  stage.copy_owned_state(kept.own.state.data());
  kept.own.steps_done = steps_done;
  kept.own.optimizer_steps = stage.optimizer_steps();
  kept.own.position = at;
  kept.sharded_world = world;
  kept.own_shard = rank;
  kept.replica_shard = successor;
  size_t own_floats = 0;
  for (const auto& range : kept.own_ranges) own_floats += range.count;
  outgoing_.resize(own_floats);
  pack_ranges(kept.own_ranges, kept.own.state.data(), outgoing_.data());
  exchange_with_neighbours(*data_group_, outgoing_, predecessor, incoming_, successor);
  // Only a whole replica is committed: until here `replica` holds the previous one.
  kept.replica.swap(incoming_);
  incoming_.resize(kept.replica.size());
  kept.replica_steps_done = steps_done;
  ++steps_kept_;
  last_exchange_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  total_exchange_ms_ += last_exchange_ms_;
  if (steps_kept_ == 1 || steps_done == config_.train.steps) report_ring(kept, steps_done, events);
}

void CommStageMemorySync::report_ring(const train::ShardedStageCopy& kept, int64_t steps_done,
                                      metrics::EventLog& events) const {
  const uint64_t kept_floats =
      kept.own.state.size() + kept.replica.size() + outgoing_.size() + incoming_.size();
  events.emit("peer_replica",
              util::JsonLine().add("epoch", world_.epoch()).add("step", steps_done)
                  .add("world_size", static_cast<int64_t>(data_group_->size()))
                  .add("holds_rank", static_cast<int64_t>(successor_))
                  .add("replica_bytes", static_cast<uint64_t>(kept.replica.size() * sizeof(float)))
                  .add("own_bytes", static_cast<uint64_t>(outgoing_.size() * sizeof(float)))
                  .add("state_bytes", kept_floats * sizeof(float))
                  .add("steps_kept", steps_kept_)
                  .add("exchange_ms", last_exchange_ms_)
                  .add("mean_exchange_ms", total_exchange_ms_ / static_cast<double>(steps_kept_)));
}

std::vector<std::vector<model::ParamRange>> CommStageMemorySync::all_ranges(
    const std::vector<model::ParamRange>& mine) {
  const auto ranks = static_cast<size_t>(data_group_->size());
  const auto me = static_cast<size_t>(data_group_->rank());
  std::vector<uint64_t> counts(ranks, 0);
  counts[me] = mine.size();
  data_group_->all_gather(&counts[me], counts.data(), ranks * sizeof(uint64_t), comm::DataType::u8)
      .wait();
  const size_t most = *std::max_element(counts.begin(), counts.end());
  std::vector<uint64_t> flat(ranks * 2 * most, 0);
  for (size_t i = 0; i < mine.size(); ++i) {
    flat[me * 2 * most + 2 * i] = mine[i].offset;
    flat[me * 2 * most + 2 * i + 1] = mine[i].count;
  }
  data_group_->all_gather(&flat[me * 2 * most], flat.data(), flat.size() * sizeof(uint64_t),
                          comm::DataType::u8)
      .wait();
  std::vector<std::vector<model::ParamRange>> all(ranks);
  for (size_t r = 0; r < ranks; ++r)
    for (size_t i = 0; i < counts[r]; ++i)
      all[r].push_back({flat[r * 2 * most + 2 * i], flat[r * 2 * most + 2 * i + 1]});
  return all;
}

train::MemoryRecovery CommStageMemorySync::recover(train::StageMemory& memory,
                                                   const train::StagePosition& here,
                                                   train::PipelineStage& stage) {
  train::MemoryRecovery recovery;
  Offer mine;
  mine.position = here.stage * here.tensor + here.tensor_rank;
  mine.replica = data_group_ != nullptr ? data_group_->rank() : 0;
  const std::string not_here = train::why_no_memory_recovery(config_);
  if (not_here.empty()) {
    const auto& copies = memory.copies();
    if (copies[0].steps_done >= 0 && copies[0].position == here) mine.first = copies[0].steps_done;
    if (copies[1].steps_done >= 0 && copies[1].position == here) mine.second = copies[1].steps_done;
    if (memory.sharded().own.steps_done >= 0 && memory.sharded().own.position == here)
      mine.sharded = held_of(memory.sharded());
  }
  // Every rank takes part, also one that holds nothing: all compute the same choice.
  const std::vector<Offer> offers = gather_offers(world_, mine);
  const auto& copies = memory.copies();
  const bool any_copy = copies[0].steps_done >= 0 || copies[1].steps_done >= 0 ||
                        memory.sharded().own.steps_done >= 0;
  std::set<int64_t, std::greater<>> steps;
  for (const Offer& offer : offers)
    for (int64_t held : {offer.first, offer.second, offer.sharded.steps_done})
      if (held >= 0) steps.insert(held);
  std::string sharded_why;  // the freshest step's reason, when only pieces were missing
  for (const int64_t step : steps) {
    const auto positions = offers_by_position(offers, step);
    bool everywhere = true;
    for (const auto& [position, at] : positions) {
      if (at.lowest_whole_copy >= 0) continue;
      const RebuildPlan plan = plan_for_step(at.sharded, step);
      if (plan.unrecoverable.empty()) continue;
      everywhere = false;
      if (sharded_why.empty()) sharded_why = plan.unrecoverable;
    }
    if (!everywhere) continue;
    recovery.steps_done = step;
    const PositionOffers& at = positions.at(mine.position);
    std::vector<float> state(stage.info().owned_state_floats);
    int64_t optimizer_steps = 0;
    if (at.lowest_whole_copy >= 0) {
      const train::StageStateCopy* own = memory.find(step, here);
      restore_whole_copy(own, static_cast<int>(at.lowest_whole_copy), state, optimizer_steps);
      recovery.from_peer = own == nullptr;
    } else {
      recovery.from_peer = rebuild_sharded(memory.sharded(), plan_for_step(at.sharded, step),
                                           at.sharded, state, optimizer_steps);
    }
    stage.restore_owned_state(state.data(), optimizer_steps);
    return recovery;
  }
  if (!not_here.empty()) recovery.why_not = not_here;
  else if (steps.empty()) recovery.why_not = any_copy ? "no rank holds a state of this layout's positions in memory"
                                                      : "no rank holds a state in memory";
  else if (!sharded_why.empty()) recovery.why_not = sharded_why;
  else recovery.why_not = "no step is held in memory by a replica of every stage and tensor rank";
  return recovery;
}

void CommStageMemorySync::restore_whole_copy(const train::StageStateCopy* own, int root,
                                             std::vector<float>& state, int64_t& optimizer_steps) {
  if (own != nullptr) state = own->state;
  std::array<float, 1> steps{own != nullptr ? static_cast<float>(own->optimizer_steps) : 0.0f};
  if (data_group_ != nullptr) {
    // Step counts travel as f32, exact below 2^24 (as dist/state_sync.cpp's).
    data_group_->broadcast(steps.data(), 1, comm::DataType::f32, root).wait();
    data_group_->broadcast(state.data(), state.size(), comm::DataType::f32, root).wait();
  } else if (own == nullptr) {
    throw std::logic_error("stage memory: position held, but not by its only replica");
  }
  optimizer_steps = static_cast<int64_t>(steps[0]);
}

bool CommStageMemorySync::rebuild_sharded(const train::ShardedStageCopy& kept,
                                          const RebuildPlan& plan,
                                          const std::vector<HeldState>& held,
                                          std::vector<float>& state, int64_t& optimizer_steps) {
  const int me = data_group_ != nullptr ? data_group_->rank() : 0;
  // The parameters (and the giver's own pieces) from one replica that finished the
  // step, then every shard of the world that trained it from its owner or its replica.
  if (plan.params_rank == me) state = kept.own.state;
  if (data_group_ != nullptr)
    data_group_->broadcast(state.data(), state.size(), comm::DataType::f32, plan.params_rank).wait();
  std::vector<float> packed;
  bool from_peer = kept.own.steps_done != plan.steps_done;
  for (size_t shard = 0; shard < plan.shard_rank.size(); ++shard) {
    const int giver = plan.shard_rank[shard];
    const bool replica = plan.from_replica[shard];
    const bool gives = giver == me;
    const std::vector<model::ParamRange>& given = replica ? kept.replica_ranges : kept.own_ranges;
    const auto ranges = data_group_ != nullptr
                            ? broadcast_ranges(*data_group_, gives ? given : std::vector<model::ParamRange>{}, giver)
                            : given;
    size_t floats = 0;
    for (const auto& range : ranges) floats += range.count;
    packed.resize(floats);
    if (gives) {
      if (replica) packed = kept.replica;
      else pack_ranges(ranges, kept.own.state.data(), packed.data());
    }
    if (data_group_ != nullptr)
      data_group_->broadcast(packed.data(), packed.size(), comm::DataType::f32, giver).wait();
    unpack_ranges(ranges, packed.data(), state.data());
    from_peer = from_peer || replica;
  }
  optimizer_steps = held[static_cast<size_t>(plan.params_rank)].optimizer_steps;
  return from_peer;
}

}  // namespace dseek::dist
