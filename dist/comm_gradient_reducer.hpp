// The data-parallel GradientReducer (runtime/train/gradient_reducer.hpp) over a
// comm::Communicator: one replica per rank of the communicator's group.
//
// The gradient buffer is cut into buckets (gradient_buckets.hpp). Per bucket, issued
// asynchronously as soon as backward has finished its last range (in bucket order, the
// same on every replica):
//   ZeRO 0            all_reduce (sum) in place
//   codec             CompressedAllReduce, one per bucket (it keeps that bucket's
//                     error-feedback residual): encode here, all-gather of messages;
//                     every replica decodes the whole bucket's sum, and under ZeRO 1/2
//                     uses its piece of it (the optimizer state stays sharded; the
//                     traffic is the codec's, not a reduce-scatter's)
//   ZeRO 2            reduce_scatter (sum) into this replica's piece
//   ZeRO 1            reduce_scatter too, all issued in finish() (no overlap)
// With a codec and settings.variance_refresh_steps > 0, each bucket's local gradient is
// also squared into this replica's optim::LocalSecondMoment before it is sent, and at the
// refresh steps finish() averages the replicas' estimates of the second moment of the
// MEAN gradient (an all-reduce in bf16: half the bytes of a float32 gradient, counted as
// the step's) into the second moment the optimizer then uses.
// finish() waits for them in bucket order; the time it and the other blocking calls
// spend is the step's exposed communication. Reduce-scatter results are copied back into
// the gradient buffer at their own offsets, so the optimizer and the norm read the same
// addresses whatever the stage (and ZeRO 0/1/2 agree bit for bit where the sums agree).
//
// With settings.backend_memory (comm.backend = "nccl") the communicator reduces the
// compute backend's memory in place: the trainer hands the backend's own gradient buffer
// (reduces_backend_memory()), a reduce-scatter writes each replica's piece straight into
// its place in that buffer (in place: the piece lies inside the bucket where the shard
// rule puts it), and the small collectives (sum_over_ranks, gather_u64) move their few
// bytes through a scratch buffer in backend memory. Before it issues buckets the reducer
// waits for the backend's queued ops (Backend::finish_compute): the data plane runs on
// its own queue and must read finished gradients; backward then goes on while the
// buckets are reduced. Compression is refused there (the codecs work on host memory).
//
// With a codec the reducer carries state between steps (carries_state_between_steps():
// each bucket's error-feedback residual, the local second moment), so a loss-scaled
// trainer hands it unscaled, finite gradients only, after the whole backward, and
// skip_step()s a step that overflowed on any replica (runtime/train/gradient_reducer.hpp,
// pipeline/stage_trainer.cpp). A skipped step leaves the residuals and the estimate
// as they were; a second-moment refresh due at a skipped step is done at the next step
// that is not skipped (every replica skips the same steps, so all refresh together).
//
// Not thread-safe: the trainer's thread makes every call. A CommError from the data
// plane (timeout, dead peer, abort) propagates: the epoch is over, the caller rebuilds.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dist/gradient_buckets.hpp"
#include "dist/reducer_settings.hpp"
#include "comm/communicator.hpp"
#include "comm/compressed_allreduce.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/optim/local_second_moment.hpp"
#include "runtime/train/gradient_reducer.hpp"

namespace dseek::dist {

class CommGradientReducer final : public train::GradientReducer {
 public:
  // `comm` must outlive the reducer. Throws std::invalid_argument on bad settings.
  CommGradientReducer(comm::Communicator& comm, ReducerSettings settings);
  ~CommGradientReducer() override;
  CommGradientReducer(const CommGradientReducer&) = delete;
  CommGradientReducer& operator=(const CommGradientReducer&) = delete;

  int rank() const override { return comm_.rank(); }
  int world_size() const override { return comm_.size(); }
  bool reduces_backend_memory() const override { return settings_.backend_memory; }
  void bind_backend(backend::Backend& backend) override { backend_ = &backend; }

  void attach(float* grads, size_t total, const std::vector<model::ParamRange>& backward_order) override;
  void detach() noexcept override;
  const std::vector<model::ParamRange>& shard() const override { return shard_; }

  void begin_step(int64_t step) override;
  void gradients_ready(model::ParamRange range) override;
  void finish() override;
  void skip_step() override;
  bool carries_state_between_steps() const override { return settings_.compression != config::Compression::none; }

  void sum_over_ranks(std::span<double> values) override;
  std::vector<uint64_t> gather_u64(uint64_t mine) override;
  void gather_shards(float* buffer) override;

  train::ReducerTraffic step_traffic() const override;
  const float* refreshed_second_moment() override;

  const ReducerSettings& settings() const { return settings_; }
  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  // The compressed all-reduces' traffic since construction (zero without a codec).
  comm::CompressedTraffic compressed_total() const;
  // Bucket `b`'s error-feedback residual (empty without a codec or before its first
  // compressed step): what the tests compare across a skipped step.
  std::span<const float> residual(size_t b) const;

 private:
  struct InFlight {
    comm::Work work;
    bool compressed = false;  // this step's bucket went through its codec
    bool issued = false;
  };
  void wait_for_backend_compute();
  void issue(size_t bucket);
  // The bytes of every rank's `slot` (this rank's from `mine`) in gathered_values_,
  // through backend memory when the communicator reads it.
  void gather_slots(const void* mine, size_t slot);
  void release_scratch() noexcept;
  void complete(size_t bucket);
  void require_attached(const char* call) const;
  bool refreshes_variance_at(int64_t step) const;
  void refresh_variance();

  comm::Communicator& comm_;
  ReducerSettings settings_;
  backend::Backend* backend_ = nullptr;  // settings_.backend_memory: bind_backend()'s
  void* scratch_ = nullptr;              // ... memory for the small collectives
  size_t scratch_bytes_ = 0;
  float* grads_ = nullptr;
  size_t total_ = 0;
  size_t reduced_floats_ = 0;  // in attach()'s ranges (total_ for a whole-model replica)
  std::vector<model::ParamRange> backward_order_;
  std::vector<GradientBucket> buckets_;
  std::vector<model::ParamRange> shard_;
  std::vector<float> staging_;  // reduce-scatter outputs: this replica's pieces, packed
  std::vector<std::unique_ptr<comm::CompressedAllReduce>> compressed_;  // per bucket
  std::vector<InFlight> in_flight_;                                     // per bucket
  std::vector<std::byte> gathered_values_;                              // sum_over_ranks
  // The second-moment estimate (variance_refresh_steps > 0 with a codec).
  std::unique_ptr<optim::LocalSecondMoment> local_variance_;
  std::vector<uint16_t> variance_wire_;                           // its bf16 copy, averaged
  std::vector<float> refreshed_variance_;                         // what the optimizer gets
  std::vector<float> estimate_staging_;                           // this replica's, in float
  bool variance_refreshed_ = false;                               // ... at this step
  bool refresh_owed_ = false;  // a refresh fell on a skipped step: the next step does it

  // The step in progress.
  bool in_step_ = false;
  int64_t step_ = 0;
  size_t next_range_ = 0;  // the next backward_order_ index gradients_ready() expects
  size_t next_issue_ = 0;  // the next bucket to issue
  double exposed_ms_ = 0.0;
  comm::CommCounters counters_at_begin_;
  uint64_t encoded_bytes_ = 0;
};

}  // namespace dseek::dist
