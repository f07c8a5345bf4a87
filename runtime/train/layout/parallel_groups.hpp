// The 3D layout of a job's ranks: data x pipeline x tensor parallelism over a world of
// D * P * T ranks. World rank r = (d * P + p) * T + t: the T ranks of a tensor-parallel
// group are consecutive (tensor parallelism all-reduces twice per block in forward and
// backward, so its group is packed on one host, where the data plane is shared memory),
// then the P stages of a replica, then the D replicas.
//
// This is the one rule for "which ranks form which group"; the communicators are cut
// from the world by it (Communicator::subgroup with the member lists), and describe()
// is what a job prints and logs at start.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dseek::train {

struct RankCoordinates {
  int data = 0, stage = 0, tensor = 0;
};

class ParallelGroups {
 public:
  // Throws std::invalid_argument unless every size is >= 1.
  ParallelGroups(int data, int pipeline, int tensor);

  int world() const { return data_ * pipeline_ * tensor_; }
  int data_size() const { return data_; }
  int pipeline_size() const { return pipeline_; }
  int tensor_size() const { return tensor_; }
  RankCoordinates coordinates(int rank) const;
  int rank_of(RankCoordinates c) const;

  // World ranks of the groups `rank` belongs to, in group-rank order.
  std::vector<int> tensor_group(int rank) const;    // same replica and stage
  std::vector<int> pipeline_group(int rank) const;  // same replica and tensor rank
  std::vector<int> data_group(int rank) const;      // same stage and tensor rank

  // Whether every tensor-parallel group lies on one host when hosts hold
  // `ranks_per_host` consecutive world ranks each.
  bool tensor_groups_packed(int ranks_per_host) const;

  // One line per rank: its coordinates and its three groups.
  std::string describe() const;

 private:
  int data_, pipeline_, tensor_;
};

}  // namespace dseek::train
