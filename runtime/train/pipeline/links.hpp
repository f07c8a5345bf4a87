// What a pipeline stage needs from the data plane, without depending on it (runtime/
// knows nothing of comm/): point-to-point float tensors to the neighbouring stages and
// the three small collectives of a step. dist/comm_pipeline_links.hpp
// implements it over a comm::Communicator whose rank r is stage r.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>

namespace dseek::train {

class PipelineLinks {
 public:
  using Handle = int64_t;

  virtual ~PipelineLinks() = default;
  virtual int64_t stage() const = 0;
  virtual int64_t stages() const = 0;

  // Asynchronous transfers of `count` floats with stage `peer`: the k-th send to a peer
  // matches the peer's k-th receive from this stage. `data` must stay valid and
  // untouched until wait() returned for the handle.
  virtual Handle post_send(const float* data, size_t count, int64_t peer) = 0;
  virtual Handle post_recv(float* data, size_t count, int64_t peer) = 0;
  // Blocks until the transfer is done (bounded by the data plane's timeout); throws on
  // failure.
  virtual void wait(Handle handle) = 0;

  // True when the links also move the compute backend's memory (NCCL on the GPU: the
  // stage then hands its activations and their gradients over in backend buffers, never
  // through the host). The same contract as post_send / post_recv, waited with wait();
  // the transfers of backend memory between two stages are ordered among themselves,
  // apart from those of host memory.
  virtual bool moves_backend_memory() const { return false; }
  virtual Handle post_backend_send(const float* /*data*/, size_t /*count*/, int64_t /*peer*/) {
    throw std::logic_error("PipelineLinks: these links move host memory only");
  }
  virtual Handle post_backend_recv(float* /*data*/, size_t /*count*/, int64_t /*peer*/) {
    throw std::logic_error("PipelineLinks: these links move host memory only");
  }

  // Sums `data` between the first and the last stage (the tied embedding's gradient);
  // only those two stages call it.
  virtual void sum_first_and_last(float* data, size_t count) = 0;
  // The same on backend memory (moves_backend_memory() links only).
  virtual void sum_first_and_last_backend(float* /*data*/, size_t /*count*/) {
    throw std::logic_error("PipelineLinks: these links move host memory only");
  }
  // Element-wise sums over every stage (collective).
  virtual void sum_over_stages(std::span<double> values) = 0;
  virtual void sum_over_stages(std::span<float> values) = 0;
  // Stage 0's values to every stage (collective).
  virtual void broadcast_from_first(std::span<double> values) = 0;
};

}  // namespace dseek::train
