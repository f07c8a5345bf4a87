// Where the ranks of a job's layout sit, for people: which node (and
// which of its worker groups, cluster.gpus_per_node a node) holds which world rank of
// an epoch's layout, and that rank's replica, stage and tensor rank
// (runtime/train/layout/parallel_groups.hpp). The world rank of the coordinator's plan puts a
// node's G ranks next to each other, and the layout puts a tensor group's T ranks next
// to each other: when T divides G every tensor group lies inside one node (its
// all-reduces over shared memory); the text says so when one does not. The training of
// the epoch's rank 0 prints it (control/epoch_loop.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actors/cluster/cluster_messages.hpp"
#include "runtime/train/layout/survivor_layout.hpp"

namespace dseek::actors {

// "data 1 x pipeline 2 x tensor 2 on 4 ranks of 2 node(s)\n
//    node 0: rank 0 (replica 0, stage 0, tensor rank 0), rank 1 (...)\n  node 1: ..."
// Ranks past the layout's (they stand by) are marked "standby". A data-parallel layout
// of every rank in the plan's order: "4 ranks on 2 node(s): node 0: ranks 0-1, node 1: ranks 2-3".
// `order`: the plan rank at each layout rank when the layout was placed by memory
// (empty: the plan's order).
std::string layout_placement(const epoch_started& epoch, const train::SurvivorLayout& layout,
                             const std::vector<std::int32_t>& order = {});

}  // namespace dseek::actors
