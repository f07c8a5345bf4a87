// Implementation of parallel_communicators.hpp.
#include "dist/parallel_communicators.hpp"

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace dseek::dist {

namespace {
// Every distinct group of one dimension, in order of its lowest world rank; returns
// this rank's communicator of them.
std::unique_ptr<comm::Communicator> cut(comm::Communicator& world, int group_size,
                                        std::vector<int> (train::ParallelGroups::*group_of)(int) const,
                                        const train::ParallelGroups& groups) {
  if (group_size == 1) return nullptr;
  std::set<std::vector<int>> seen;
  std::unique_ptr<comm::Communicator> mine;
  for (int rank = 0; rank < world.size(); ++rank) {
    std::vector<int> group = (groups.*group_of)(rank);
    if (!seen.insert(group).second) continue;
    auto communicator = world.subgroup(group);
    if (communicator) mine = std::move(communicator);
  }
  return mine;
}
}  // namespace

ParallelCommunicators cut_parallel_groups(comm::Communicator& world,
                                          const train::ParallelGroups& groups) {
  if (world.size() != groups.world())
    throw std::invalid_argument("a world of " + std::to_string(world.size()) +
                                " ranks for a layout of " + std::to_string(groups.world()) +
                                " (parallel.data x parallel.pipeline x parallel.tensor must "
                                "equal cluster.nodes)");
  ParallelCommunicators result;
  result.tensor = cut(world, groups.tensor_size(), &train::ParallelGroups::tensor_group, groups);
  result.pipeline =
      cut(world, groups.pipeline_size(), &train::ParallelGroups::pipeline_group, groups);
  result.data = cut(world, groups.data_size(), &train::ParallelGroups::data_group, groups);
  return result;
}

}  // namespace dseek::dist
