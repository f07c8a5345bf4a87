// The PipelineLinks of a layout without a pipeline (parallel.pipeline = 1): one stage,
// which holds the whole model (its chunk has the embedding and the head), so nothing
// travels between stages and every collective over them is the identity. A tensor-parallel
// job (with or without replicas) runs the one stage trainer through these.
#pragma once

#include <stdexcept>

#include "runtime/train/pipeline/links.hpp"

namespace dseek::train {

class SingleStageLinks final : public PipelineLinks {
 public:
  int64_t stage() const override { return 0; }
  int64_t stages() const override { return 1; }
  Handle post_send(const float*, size_t, int64_t peer) override { return refuse(peer); }
  Handle post_recv(float*, size_t, int64_t peer) override { return refuse(peer); }
  void wait(Handle) override { refuse(0); }
  void sum_first_and_last(float*, size_t) override {}
  void sum_over_stages(std::span<double>) override {}
  void sum_over_stages(std::span<float>) override {}
  void broadcast_from_first(std::span<double>) override {}

 private:
  [[noreturn]] static Handle refuse(int64_t peer) {
    throw std::logic_error("SingleStageLinks: a transfer with stage " + std::to_string(peer) +
                           " in a layout of one stage");
  }
};

}  // namespace dseek::train
