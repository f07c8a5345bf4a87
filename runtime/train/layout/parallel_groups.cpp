// Implementation of parallel_groups.hpp.
#include "runtime/train/layout/parallel_groups.hpp"

#include <stdexcept>

namespace dseek::train {

namespace {
std::string list(const std::vector<int>& ranks) {
  std::string text = "{";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += ",";
    text += std::to_string(ranks[i]);
  }
  text += "}";
  return text;
}
}  // namespace

ParallelGroups::ParallelGroups(int data, int pipeline, int tensor)
    : data_(data), pipeline_(pipeline), tensor_(tensor) {
  if (data < 1 || pipeline < 1 || tensor < 1)
    throw std::invalid_argument("parallel.data, parallel.pipeline and parallel.tensor must be >= 1");
}

RankCoordinates ParallelGroups::coordinates(int rank) const {
  if (rank < 0 || rank >= world())
    throw std::out_of_range("rank " + std::to_string(rank) + " outside a world of " +
                            std::to_string(world()));
  return {rank / (pipeline_ * tensor_), (rank / tensor_) % pipeline_, rank % tensor_};
}

int ParallelGroups::rank_of(RankCoordinates c) const {
  return (c.data * pipeline_ + c.stage) * tensor_ + c.tensor;
}

std::vector<int> ParallelGroups::tensor_group(int rank) const {
  RankCoordinates c = coordinates(rank);
  std::vector<int> group;
  for (c.tensor = 0; c.tensor < tensor_; ++c.tensor) group.push_back(rank_of(c));
  return group;
}

std::vector<int> ParallelGroups::pipeline_group(int rank) const {
  RankCoordinates c = coordinates(rank);
  std::vector<int> group;
  for (c.stage = 0; c.stage < pipeline_; ++c.stage) group.push_back(rank_of(c));
  return group;
}

std::vector<int> ParallelGroups::data_group(int rank) const {
  RankCoordinates c = coordinates(rank);
  std::vector<int> group;
  for (c.data = 0; c.data < data_; ++c.data) group.push_back(rank_of(c));
  return group;
}

bool ParallelGroups::tensor_groups_packed(int ranks_per_host) const {
  if (ranks_per_host < 1) return false;
  for (int rank = 0; rank < world(); rank += tensor_) {
    const auto group = tensor_group(rank);
    if (group.front() / ranks_per_host != group.back() / ranks_per_host) return false;
  }
  return true;
}

std::string ParallelGroups::describe() const {
  std::string text = "parallel layout: data " + std::to_string(data_) + " x pipeline " +
                     std::to_string(pipeline_) + " x tensor " + std::to_string(tensor_) +
                     " = " + std::to_string(world()) + " ranks\n";
  for (int rank = 0; rank < world(); ++rank) {
    const RankCoordinates c = coordinates(rank);
    text += "  rank " + std::to_string(rank) + ": replica " + std::to_string(c.data) +
            ", stage " + std::to_string(c.stage) + ", tensor rank " + std::to_string(c.tensor);
    text += "; tensor group " + list(tensor_group(rank));
    text += ", pipeline group " + list(pipeline_group(rank));
    text += ", data group " + list(data_group(rank)) + "\n";
  }
  return text;
}

}  // namespace dseek::train
