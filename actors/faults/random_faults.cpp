// Implementation of random_faults.hpp.
#include "actors/faults/random_faults.hpp"

#include <stdexcept>

#include "actors/faults/fault_actions.hpp"

namespace dseek::actors {

namespace {

using config::FaultKind;
using config::FaultSpec;

// splitmix64: a fixed, portable sequence for a seed.
class Draws {
 public:
  explicit Draws(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // A number in [low, high].
  int64_t between(int64_t low, int64_t high) {
    return low + static_cast<int64_t>(next() % static_cast<uint64_t>(high - low + 1));
  }

 private:
  uint64_t state_;
};

// The actors of this layout's node tree that crash_actor can name (not the node actor:
// the schedule's kill already takes a whole node down).
std::vector<std::string> actors_of(const RandomFaultsShape& shape) {
  std::vector<std::string> names;
  for (const auto& name : crashable_actors()) {
    if (name == "node" || (name == "pipeline_stage" && !shape.staged)) continue;
    if (name == "gradient_shard" && (shape.staged || !shape.gradient_shards)) continue;
    names.push_back(name);
  }
  return names;
}

// One fault of `kind` at a random node and step, its parameters drawn.
FaultSpec draw(Draws& draws, FaultKind kind, const RandomFaultsShape& shape,
               const std::vector<std::string>& actors) {
  FaultSpec fault;
  fault.kind = kind;
  fault.node = draws.between(0, shape.nodes - 1);
  fault.step = draws.between(2, shape.steps - 3);
  switch (kind) {
    case FaultKind::hang:
      // The coordinator's node hung would need coordinator failover: another node.
      if (fault.node == shape.coordinator_node)
        fault.node = (fault.node + 1 + draws.between(0, shape.nodes - 2)) % shape.nodes;
      fault.seconds = static_cast<double>(draws.between(20, 40)) / 10.0;
      [[fallthrough]];
    case FaultKind::kill:
      if (draws.between(0, 2) == 0) fault.during = config::FaultDuring::reduction;
      break;
    case FaultKind::crash_actor:
      fault.actor = actors[static_cast<size_t>(draws.between(0, static_cast<int64_t>(actors.size()) - 1))];
      break;
    case FaultKind::slow:
      fault.ms = draws.between(10, 50);
      break;
    case FaultKind::drop_messages:
      fault.fraction = static_cast<double>(draws.between(10, 50)) / 100.0;
      break;
    default:
      break;
  }
  return fault;
}

}  // namespace

std::vector<FaultSpec> random_faults(uint64_t seed, const RandomFaultsShape& shape) {
  if (shape.nodes < 3 || shape.steps < 8)
    throw std::invalid_argument("a random fault schedule needs at least 3 nodes and 8 steps (got " +
                                std::to_string(shape.nodes) + " nodes, " +
                                std::to_string(shape.steps) + " steps)");
  Draws draws(seed);
  const auto actors = actors_of(shape);
  std::vector<FaultSpec> faults;
  faults.push_back(draw(draws, FaultKind::kill, shape, actors));
  faults.push_back(draw(draws, FaultKind::hang, shape, actors));
  for (const auto& actor : actors) {
    faults.push_back(draw(draws, FaultKind::crash_actor, shape, actors));
    faults.back().actor = actor;
  }
  faults.push_back(draw(draws, FaultKind::slow, shape, actors));
  faults.push_back(draw(draws, FaultKind::drop_messages, shape, actors));
  constexpr FaultKind kMore[] = {FaultKind::hang, FaultKind::crash_actor, FaultKind::slow,
                                 FaultKind::drop_messages};
  for (int64_t more = draws.between(0, 3); more > 0; --more)
    faults.push_back(draw(draws, kMore[draws.between(0, 3)], shape, actors));
  // The killed node's later faults go to the next node (the restarted node fires none),
  // a hang never to the coordinator's.
  const FaultSpec kill = faults.front();
  for (size_t i = 1; i < faults.size(); ++i) {
    FaultSpec& fault = faults[i];
    while ((fault.node == kill.node && fault.step >= kill.step) ||
           (fault.kind == FaultKind::hang && fault.node == shape.coordinator_node))
      fault.node = (fault.node + 1) % shape.nodes;
  }
  return faults;
}

}  // namespace dseek::actors
