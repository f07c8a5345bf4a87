// train::ReplicaGroup over the data plane: rank r of the communicator (a data-parallel
// group cut by parallel_communicators.hpp) is replica r. The double sums are added in
// rank order; the gradients go through CommGradientReducer (comm_gradient_reducer.hpp)
// on the same communicator, with the job's reducer settings (reducer_settings.hpp) --
// or, with settings.backend_memory, on the `device` communicator (the data group cut
// from the epoch's NCCL one), the gradients then never leaving the backend's memory.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "dist/reducer_settings.hpp"
#include "runtime/train/layout/replica_group.hpp"

namespace dseek::dist {

class CommReplicaGroup final : public train::ReplicaGroup {
 public:
  // `comm` (and `device`) must outlive the group and its reducers; `device` is used
  // only with settings.backend_memory.
  CommReplicaGroup(comm::Communicator& comm, ReducerSettings settings,
                   comm::Communicator* device = nullptr)
      : comm_(comm), device_(device), settings_(std::move(settings)) {}
  int replica() const override { return comm_.rank(); }
  int replicas() const override { return comm_.size(); }
  void sum(std::span<double> values) override;
  void sum(float* data, size_t count) override;
  std::unique_ptr<train::GradientReducer> make_gradient_reducer() override;

 private:
  comm::Communicator& comm_;
  comm::Communicator* device_;
  ReducerSettings settings_;
  std::vector<unsigned char> scratch_;
};

}  // namespace dseek::dist
