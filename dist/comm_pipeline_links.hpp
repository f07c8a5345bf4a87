// train::PipelineLinks over the data plane: rank r of the communicator is pipeline
// stage r. Activations and gradients are point-to-point sends; the tied embedding's
// gradient is summed in a two-rank sub-group {first, last}; the step's scalars are
// all-gathered and added in rank order, so every stage gets the same bits.
//
// With a `device` communicator (the pipeline group cut from the epoch's NCCL one,
// comm.backend = "nccl") the activations, their gradients and the tied embedding's sum
// move the backend's memory on it: each ring neighbour pair gets two 2-rank groups, one
// per direction, so a receive posted ahead (the stage posts a step's receives at its
// start) holds up only its own direction's queue (a CUDA stream per NCCL group), never a
// send. The step's scalars stay on the host communicator.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "runtime/train/pipeline/links.hpp"

namespace dseek::dist {

class CommPipelineLinks final : public train::PipelineLinks {
 public:
  // Collective: every rank of `comm` constructs its links (the sub-groups are made here);
  // `device`, when given, holds the same ranks in the same order.
  explicit CommPipelineLinks(comm::Communicator& comm, comm::Communicator* device = nullptr);

  int64_t stage() const override { return comm_.rank(); }
  int64_t stages() const override { return comm_.size(); }
  Handle post_send(const float* data, size_t count, int64_t peer) override;
  Handle post_recv(float* data, size_t count, int64_t peer) override;
  void wait(Handle handle) override;
  bool moves_backend_memory() const override { return on_device_; }
  Handle post_backend_send(const float* data, size_t count, int64_t peer) override;
  Handle post_backend_recv(float* data, size_t count, int64_t peer) override;
  void sum_first_and_last(float* data, size_t count) override;
  void sum_first_and_last_backend(float* data, size_t count) override;
  void sum_over_stages(std::span<double> values) override;
  void sum_over_stages(std::span<float> values) override;
  void broadcast_from_first(std::span<double> values) override;

 private:
  Handle keep(comm::Work work);
  // The direction group towards (or from) `peer`; throws for a stage that is no ring
  // neighbour.
  static comm::Communicator& direction(std::map<int64_t, std::unique_ptr<comm::Communicator>>& groups,
                                       int64_t peer, const char* what);

  comm::Communicator& comm_;
  std::unique_ptr<comm::Communicator> ends_;  // {0, P-1}; null on the middle stages
  bool on_device_ = false;
  std::unique_ptr<comm::Communicator> ends_on_device_;  // null on the middle stages
  // Per ring neighbour: the 2-rank device group this stage sends to it on, and the one
  // it receives from it on (empty without a device communicator).
  std::map<int64_t, std::unique_ptr<comm::Communicator>> sends_to_, receives_from_;
  std::map<Handle, comm::Work> pending_;
  Handle next_handle_ = 0;
  std::vector<unsigned char> gathered_;
};

}  // namespace dseek::dist
