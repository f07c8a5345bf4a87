// What the trainer needs from data parallelism, without knowing how bytes move: the
// reduction of gradients across replicas (overlapped with backward), the ZeRO shard this
// replica owns, and a few small collectives (step statistics, putting sharded buffers
// back together). The implementation over the data plane is
// dist/comm_gradient_reducer.hpp; runtime/ never sees comm/ (DESIGN.md).
//
// One step, as the trainer drives it (every replica the same calls in the same order):
//
//   begin_step(step)
//   ... micro-batches; during the LAST one's backward, gradients_ready(range) for every
//       range of attach()'s list, in that order, as backward finishes it ...
//   finish()                      the summed gradient is in the buffer (at least on shard())
//   refreshed_second_moment()     with compression, every few steps: AdamW's v
//   sum_over_ranks({loss, sum of squares of the shard})
//   optimizer update (ZeRO >= 1: of shard() only)
//   gather_shards(params)         ZeRO >= 1: every replica gets the whole parameters
//   step_traffic()                the step's exposed communication time and bytes
//
// A reducer that carries_state_between_steps() (compression: error-feedback residuals
// and the local second-moment estimate) is given finite gradients in one scale only: a
// loss-scaled trainer (fp8) reports no range during backward, decides the step on a
// global overflow flag (sum_over_ranks), and then either calls skip_step() (nothing of
// the step enters the reducer) or unscales the gradients and reports every range
// (train/pipeline/stage_trainer.cpp).
//
// A trainer without a reducer (nullptr) is the single-node trainer, unchanged.
//
// Where the buffers are: a reducer whose data plane moves host memory (UCX) gets the
// host staging of the gradients (train/host_staging.hpp) and of the parameters. One
// whose data plane reads the compute backend's memory itself (NCCL on a GPU) says so
// with reduces_backend_memory(): the trainer then binds it to its backend and hands it
// the backend's own gradient and parameter buffers -- nothing is staged through the
// host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/model/param_layout.hpp"

namespace dseek::backend {
class Backend;
}

namespace dseek::train {

// One step's communication on this replica.
struct ReducerTraffic {
  double exposed_ms = 0.0;      // time the trainer waited on communication
  uint64_t bytes_sent = 0;      // by the data plane, every operation of the step
  uint64_t bytes_received = 0;
  uint64_t gradient_bytes = 0;  // fp32 bytes of the gradients reduced (4 per element)
  uint64_t encoded_bytes = 0;   // what compression made of them (= gradient_bytes without)
};

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // True: attach()'s and gather_shards()' buffers are the compute backend's memory, and
  // bind_backend() comes first. False (the default): they are host memory.
  virtual bool reduces_backend_memory() const { return false; }
  // Before attach(), when reduces_backend_memory(): the backend whose memory the buffers
  // are (the reducer keeps its scratch there and waits for its queued ops before it
  // reads gradients). `backend` outlives the attachment.
  virtual void bind_backend(backend::Backend& backend) { (void)backend; }

  // Once, before the first step: the flat gradient buffer (`total` floats) and the
  // ranges backward finalises, in its order: disjoint ranges of the buffer (all of it
  // for a data-parallel replica; a pipeline stage's chunk reduces the ranges it owns).
  virtual void attach(float* grads, size_t total,
                      const std::vector<model::ParamRange>& backward_order) = 0;
  // The buffer of attach() is going away (the trainer's destructor): reductions still
  // running on it (a step cut short by an exception) are stopped first, which ends the
  // data plane's epoch. attach() may be called again afterwards.
  virtual void detach() noexcept = 0;
  // This replica's part of attach()'s ranges (valid after attach): the shards of all
  // replicas partition them. After finish() the reduced gradient is there (everywhere for ZeRO 0).
  virtual const std::vector<model::ParamRange>& shard() const = 0;

  virtual void begin_step(int64_t step) = 0;
  // `range` (one of attach()'s) holds its final local gradient for this step; the
  // reduction of its bucket may start at once. The buffer there is not written again
  // before finish().
  virtual void gradients_ready(model::ParamRange range) = 0;
  // Waits for every reduction of the step: the gradient summed over replicas is in the
  // buffer on shard() (on the whole buffer for ZeRO 0).
  virtual void finish() = 0;
  // Instead of gradients_ready() and finish(): the step begun is skipped on every
  // replica (a loss scaler saw non-finite gradients on one of them). Valid before the
  // first gradients_ready() only (std::logic_error after): nothing of the step has
  // entered the reducer, and nothing does; the next call is begin_step().
  virtual void skip_step() = 0;
  // Whether what this reducer is given at one step changes what it sends at later ones
  // (compression's error feedback, the local second moment): it must then never see a
  // non-finite value, nor values in a scale that changes between steps (see the top).
  virtual bool carries_state_between_steps() const { return false; }

  // values[i] = the sum of values[i] over the replicas, added in rank order so every
  // replica gets the same bits. Blocking; collective.
  virtual void sum_over_ranks(std::span<double> values) = 0;
  // Every replica's `mine`, by rank (the replicas' checksums). Blocking; collective.
  virtual std::vector<uint64_t> gather_u64(uint64_t mine) = 0;
  // `buffer` (the flat layout, total floats) becomes whole on every replica: each one
  // contributes its shard(). Blocking; collective.
  virtual void gather_shards(float* buffer) = 0;

  // Communication since begin_step.
  virtual ReducerTraffic step_traffic() const = 0;
  // After finish(): a second moment for the optimizer to use from this step on (a whole
  // host buffer in layout order, the same on every replica, valid until the next
  // finish()), or nullptr when this step brings none. Compressing reducers estimate it
  // from the replicas' dense local gradients (see optim::AdamWSettings::
  // given_second_moment_after); the others never do.
  virtual const float* refreshed_second_moment() { return nullptr; }
};

}  // namespace dseek::train
