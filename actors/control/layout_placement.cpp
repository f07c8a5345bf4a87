// Implementation of layout_placement.hpp.
#include "actors/control/layout_placement.hpp"

#include <algorithm>
#include <map>
#include <vector>

#include "actors/control/data_plane_link.hpp"
#include "runtime/train/layout/parallel_groups.hpp"

namespace dseek::actors {

std::string layout_placement(const epoch_started& epoch, const train::SurvivorLayout& layout,
                             const std::vector<std::int32_t>& order) {
  // A data-parallel layout of every rank: which node holds which ranks.
  if (layout.pipeline == 1 && layout.tensor == 1 && layout.ranks() == ranks_in_plan(epoch) &&
      order.empty())
    return std::to_string(layout.ranks()) + " ranks on " + std::to_string(epoch.world_size) +
           " node(s): " + rank_layout(epoch);
  const train::ParallelGroups groups(layout.data, layout.pipeline, layout.tensor);
  // The node of every rank, and every node's ranks, in the plan's order.
  std::map<std::int32_t, std::int64_t> node_of;
  std::vector<std::int64_t> nodes;
  std::map<std::int64_t, std::vector<std::int32_t>> ranks_of;
  for (const auto& assignment : epoch.plan) {
    if (assignment.role != "worker") continue;
    node_of[assignment.rank] = assignment.node_id;
    if (ranks_of.count(assignment.node_id) == 0) nodes.push_back(assignment.node_id);
    ranks_of[assignment.node_id].push_back(assignment.rank);
  }
  std::string text = train::describe(layout) + " on " + std::to_string(ranks_in_plan(epoch)) +
                     " ranks of " + std::to_string(nodes.size()) + " node(s)";
  bool split_tensor_group = false;
  for (const auto node : nodes) {
    text += "\n  node ";
    text += std::to_string(node);
    text += ":";
    bool first = true;
    for (const auto planned : ranks_of[node]) {
      std::int32_t rank = planned;
      if (!order.empty()) {
        const auto at = std::find(order.begin(), order.end(), planned);
        rank = at == order.end() ? groups.world() : static_cast<std::int32_t>(at - order.begin());
      }
      text += first ? " rank " : ", rank ";
      text += std::to_string(rank < groups.world() ? rank : planned);
      first = false;
      if (rank >= groups.world()) {
        text += " (standby)";
        continue;
      }
      const train::RankCoordinates c = groups.coordinates(rank);
      text += " (replica " + std::to_string(c.data);
      text += ", stage " + std::to_string(c.stage);
      text += ", tensor rank " + std::to_string(c.tensor);
      text += ")";
      for (const int peer : groups.tensor_group(rank))
        split_tensor_group =
            split_tensor_group || node_of[order.empty() ? peer : order[static_cast<size_t>(peer)]] != node;
    }
  }
  if (split_tensor_group)
    text += "\n  (a tensor group spans nodes: its all-reduces cross the network; with "
            "parallel.tensor dividing cluster.gpus_per_node each group stays inside a node)";
  return text;
}

}  // namespace dseek::actors
