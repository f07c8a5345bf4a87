// What a pipeline stage needs from the data plane, without depending on it (runtime/
// knows nothing of comm/): point-to-point float tensors to the neighbouring stages and
// the three small collectives of a step. dist/comm_pipeline_links.hpp
// implements it over a comm::Communicator whose rank r is stage r.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

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

  // Sums `data` between the first and the last stage (the tied embedding's gradient);
  // only those two stages call it.
  virtual void sum_first_and_last(float* data, size_t count) = 0;
  // Element-wise sums over every stage (collective).
  virtual void sum_over_stages(std::span<double> values) = 0;
  virtual void sum_over_stages(std::span<float> values) = 0;
  // Stage 0's values to every stage (collective).
  virtual void broadcast_from_first(std::span<double> values) = 0;
};

}  // namespace dseek::train
