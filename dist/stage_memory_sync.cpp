// Implementation of stage_memory_sync.hpp.
#include "dist/stage_memory_sync.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <set>

namespace dseek::dist {

namespace {

// One rank's offer: its position's index in the layout, its replica in the data group,
// and the steps it holds there (+1; 0: none).
struct Offer {
  uint64_t position = 0, replica = 0, first = 0, second = 0;
};
static_assert(sizeof(Offer) == 4 * sizeof(uint64_t));

std::vector<Offer> gather_offers(comm::Communicator& world, const Offer& mine) {
  std::vector<Offer> all(static_cast<size_t>(world.size()));
  all[static_cast<size_t>(world.rank())] = mine;
  world.all_gather(&all[static_cast<size_t>(world.rank())], all.data(), all.size() * sizeof(Offer),
                   comm::DataType::u8)
      .wait();
  return all;
}

bool holds(const Offer& offer, int64_t step) {
  const auto plus_one = static_cast<uint64_t>(step + 1);
  return offer.first == plus_one || offer.second == plus_one;
}

}  // namespace

train::MemoryRecovery CommStageMemorySync::recover(train::StageMemory& memory,
                                                   const train::StagePosition& here,
                                                   train::PipelineStage& stage) {
  train::MemoryRecovery recovery;
  Offer mine;
  mine.position = static_cast<uint64_t>(here.stage * here.tensor + here.tensor_rank);
  mine.replica = static_cast<uint64_t>(data_group_ != nullptr ? data_group_->rank() : 0);
  const std::string not_here = train::why_no_memory_recovery(config_);
  if (not_here.empty()) {
    const auto& copies = memory.copies();
    if (copies[0].steps_done >= 0 && copies[0].position == here)
      mine.first = static_cast<uint64_t>(copies[0].steps_done + 1);
    if (copies[1].steps_done >= 0 && copies[1].position == here)
      mine.second = static_cast<uint64_t>(copies[1].steps_done + 1);
  }
  // Every rank takes part, also one that holds nothing: all compute the same choice.
  const std::vector<Offer> offers = gather_offers(world_, mine);
  const bool any_copy = std::any_of(memory.copies().begin(), memory.copies().end(),
                                    [](const train::StageStateCopy& c) { return c.steps_done >= 0; });
  std::set<int64_t, std::greater<>> steps;
  std::set<uint64_t> positions;
  for (const Offer& offer : offers) {
    positions.insert(offer.position);
    for (uint64_t held : {offer.first, offer.second})
      if (held > 0) steps.insert(static_cast<int64_t>(held) - 1);
  }
  for (const int64_t step : steps) {
    std::map<uint64_t, uint64_t> source;  // position -> lowest replica holding `step`
    for (const Offer& offer : offers)
      if (holds(offer, step) && (!source.count(offer.position) || offer.replica < source[offer.position]))
        source[offer.position] = offer.replica;
    if (source.size() != positions.size()) continue;  // some position has no copy of it
    recovery.steps_done = step;
    const int root = static_cast<int>(source[mine.position]);
    const train::StageStateCopy* own = memory.find(step, here);
    std::vector<float> state(own != nullptr ? own->state : std::vector<float>(stage.info().owned_state_floats));
    std::array<float, 1> optimizer_steps{own != nullptr ? static_cast<float>(own->optimizer_steps) : 0.0f};
    if (data_group_ != nullptr) {
      // Step counts travel as f32, exact below 2^24 (as dist/state_sync.cpp's).
      data_group_->broadcast(optimizer_steps.data(), 1, comm::DataType::f32, root).wait();
      data_group_->broadcast(state.data(), state.size(), comm::DataType::f32, root).wait();
    } else if (own == nullptr) {
      throw std::logic_error("stage memory: position held, but not by its only replica");
    }
    recovery.from_peer = own == nullptr;
    stage.restore_owned_state(state.data(), static_cast<int64_t>(optimizer_steps[0]));
    return recovery;
  }
  if (!not_here.empty()) recovery.why_not = not_here;
  else if (steps.empty()) recovery.why_not = any_copy ? "no rank holds a state of this layout's positions in memory"
                                                      : "no rank holds a state in memory";
  else recovery.why_not = "no step is held in memory by a replica of every stage and tensor rank";
  return recovery;
}

}  // namespace dseek::dist
