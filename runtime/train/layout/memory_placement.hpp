// Which of an epoch's ranks take which position of a re-planned pipeline or
// tensor-parallel layout, given what each holds in memory (state/stage_memory.hpp): the
// ranks holding a position's newest state take that position, so that the layout can
// resume from memory (a survivor standing by would otherwise hold the state a trained
// rank lacks: node 1 of D = 2 x P = 2 lost for good leaves the consecutive ranks 0 and 1
// on nodes 0 and 2, and node 2 held stage 0). Every rank computes the same placement
// from the same holdings (every rank's, exchanged in the epoch's rendezvous).
//
// The rule: for the newest step at which a rank of every position (stage, tensor rank)
// holds its state, replica d of each position goes to the d-th lowest rank holding it;
// the slots left go to the lowest ranks left, in layout-rank order. Without such a step
// the placement is the plan's order (layout rank k = rank k). An unchanged world (and a
// restarted node, which holds nothing) keeps the plan's order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/train/layout/survivor_layout.hpp"

namespace dseek::train {

// One copy a rank holds: taken at `stage` / `tensor_rank` of a P x T layout after
// `steps_done` steps.
struct StageHolding {
  int64_t pipeline = 1, tensor = 1, stage = 0, tensor_rank = 0, steps_done = -1;
  bool operator==(const StageHolding&) const = default;
};

// Text form for the rendezvous ("P,T,stage,tensor_rank,steps;..."); decoding a malformed
// payload gives no holdings (the rank is placed as one that holds nothing).
std::string encode_holdings(const std::vector<StageHolding>& holdings);
std::vector<StageHolding> decode_holdings(const std::string& payload);

// order[k] = the epoch rank (index into `holdings`, the plan's order) at layout rank k,
// for k < layout.ranks() (world rank = (replica x P + stage) x T + tensor rank).
std::vector<int32_t> place_by_memory(const std::vector<std::vector<StageHolding>>& holdings,
                                     const SurvivorLayout& layout);

}  // namespace dseek::train
