// ZeRO (parallel.zero = 1 or 2) inside the data-parallel group of a pipeline stage or a
// tensor-parallel rank (issue 8: DP x PP x TP, the optimizer state sharded over the D
// replicas of the same stage / tensor rank). The plain data-parallel path shards the
// whole model through its GradientReducer (dist/comm_gradient_reducer.hpp);
// here the group is the ReplicaGroup the pipeline and tensor trainers already sum over,
// and the rule is the same: the gradients are reduce-scattered (each replica gets the
// sum of its piece only), each replica's AdamW holds the moments of its pieces and
// updates them, the parameters are all-gathered.
//
// The rank's parameters are given as contiguous runs of its flat buffer (the same runs,
// in the same order, on every replica of the group); each run is cut into one piece per
// replica (ReplicaGroup::piece_of), so a run of the tied wte cut the same way on the
// first and the last stage gives both copies the same pieces and the same bits.
//
// The global gradient norm: every replica squares the gradient inside its pieces only
// (within_pieces), and those sums are added over the group, so each element counts once.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/model/param_layout.hpp"
#include "runtime/train/layout/replica_group.hpp"

namespace dseek::train {

class DataGroupShards {
 public:
  // `runs`: disjoint contiguous ranges of one flat buffer; `group` must outlive this.
  DataGroupShards(ReplicaGroup& group, std::vector<model::ParamRange> runs);

  // This replica's piece of every run (empty pieces left out), in run order.
  const std::vector<model::ParamRange>& pieces() const { return pieces_; }
  size_t piece_floats() const { return piece_floats_; }
  size_t run_floats() const { return run_floats_; }

  // The gradients summed over the group on pieces() (elsewhere left as they were).
  void reduce_scatter(float* buffer);
  // The pieces of every replica into `buffer` (parameters after the update, moments for
  // a checkpoint), on every replica.
  void all_gather(float* buffer);
  // The parts of `ranges` (of the same buffer) inside pieces(), in the order of `ranges`.
  std::vector<model::ParamRange> within_pieces(const std::vector<model::ParamRange>& ranges) const;

 private:
  ReplicaGroup& group_;
  std::vector<model::ParamRange> runs_;
  std::vector<model::ParamRange> pieces_;
  size_t piece_floats_ = 0, run_floats_ = 0;
};

// `runs` cut at both ends of `cut` (a range lying inside them), so that `cut` is a run
// of its own: the tied wte is sharded alike on the first and the last stage.
std::vector<model::ParamRange> runs_cut_at(const std::vector<model::ParamRange>& runs,
                                           model::ParamRange cut);

}  // namespace dseek::train
