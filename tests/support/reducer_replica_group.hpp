// A data group as the one trainer sees it (runtime/train/layout/replica_group.hpp) over
// one GradientReducer a test made, for one_stage_trainer.hpp. Its sums go through the
// reducer's collectives; its one model chunk borrows the reducer itself.
#pragma once

#include <memory>
#include <span>

#include "runtime/train/layout/replica_group.hpp"

namespace dseek::testing {

class ReducerReplicaGroup final : public train::ReplicaGroup {
 public:
  explicit ReducerReplicaGroup(train::GradientReducer& reducer) : reducer_(reducer) {}
  int replica() const override { return reducer_.rank(); }
  int replicas() const override { return reducer_.world_size(); }
  void sum(std::span<double> values) override { reducer_.sum_over_ranks(values); }
  // Through doubles: exact for what it sums (state assembled from parts, x + 0).
  void sum(float* data, size_t count) override;
  // The reducer, lent to the one chunk (std::logic_error on a second call).
  std::unique_ptr<train::GradientReducer> make_gradient_reducer() override;

 private:
  train::GradientReducer& reducer_;
  bool lent_ = false;
};

}  // namespace dseek::testing
