// train::PipelineLinks over the data plane: rank r of the communicator is pipeline
// stage r. Activations and gradients are point-to-point sends; the tied embedding's
// gradient is summed in a two-rank sub-group {first, last}; the step's scalars are
// all-gathered and added in rank order, so every stage gets the same bits.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "runtime/train/pipeline/links.hpp"

namespace dseek::dist {

class CommPipelineLinks final : public train::PipelineLinks {
 public:
  // Collective: every rank of `comm` constructs its links (the sub-group is made here).
  explicit CommPipelineLinks(comm::Communicator& comm);

  int64_t stage() const override { return comm_.rank(); }
  int64_t stages() const override { return comm_.size(); }
  Handle post_send(const float* data, size_t count, int64_t peer) override;
  Handle post_recv(float* data, size_t count, int64_t peer) override;
  void wait(Handle handle) override;
  void sum_first_and_last(float* data, size_t count) override;
  void sum_over_stages(std::span<double> values) override;
  void sum_over_stages(std::span<float> values) override;
  void broadcast_from_first(std::span<double> values) override;

 private:
  Handle keep(comm::Work work);

  comm::Communicator& comm_;
  std::unique_ptr<comm::Communicator> ends_;  // {0, P-1}; null on the middle stages
  std::map<Handle, comm::Work> pending_;
  Handle next_handle_ = 0;
  std::vector<unsigned char> gathered_;
};

}  // namespace dseek::dist
