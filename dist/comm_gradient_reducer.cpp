// Implementation of comm_gradient_reducer.hpp.
#include "dist/comm_gradient_reducer.hpp"

#include "comm/bf16.hpp"

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>

namespace dseek::dist {

namespace {
using Clock = std::chrono::steady_clock;

// Adds the lifetime of the scope to a millisecond counter: the time the trainer's thread
// was blocked on the data plane.
class ExposedTimer {
 public:
  explicit ExposedTimer(double& total_ms) : total_ms_(total_ms), start_(Clock::now()) {}
  ~ExposedTimer() {
    total_ms_ += std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
  }
  ExposedTimer(const ExposedTimer&) = delete;
  ExposedTimer& operator=(const ExposedTimer&) = delete;

 private:
  double& total_ms_;
  Clock::time_point start_;
};

std::string show(const model::ParamRange& range) {
  return "[" + std::to_string(range.offset) + ", " + std::to_string(range.end()) + ")";
}
}  // namespace

CommGradientReducer::CommGradientReducer(comm::Communicator& comm, ReducerSettings settings)
    : comm_(comm), settings_(std::move(settings)) {
  check_reducer_settings(settings_);
}

CommGradientReducer::~CommGradientReducer() { detach(); }

// Reductions still in flight (an exception mid-step) must not outlive the buffers the
// data plane writes into: the epoch is over anyway (the replicas no longer agree on the
// step), so abort and drain.
void CommGradientReducer::detach() noexcept {
  bool pending = false;
  for (const auto& op : in_flight_) pending |= op.issued;
  if (pending) {
    comm_.abort("gradient reducer detached in the middle of a step");
    for (size_t b = 0; b < in_flight_.size(); ++b) {
      if (!in_flight_[b].issued) continue;
      try {
        if (in_flight_[b].compressed) compressed_[b]->finish(grads_ + buckets_[b].range.offset, comm::ReduceOp::sum);
        else in_flight_[b].work.wait();
      } catch (...) {  // expected: aborted
      }
    }
  }
  grads_ = nullptr;
  total_ = 0;
  reduced_floats_ = 0;
  backward_order_.clear();
  buckets_.clear();
  shard_.clear();
  staging_.clear();
  compressed_.clear();
  in_flight_.clear();
  local_variance_.reset();
  variance_wire_.clear();
  refreshed_variance_.clear();
  estimate_staging_.clear();
  variance_refreshed_ = false;
  refresh_owed_ = false;
  in_step_ = false;
  release_scratch();
  backend_ = nullptr;  // it goes with the trainer that bound it; a new one binds again
}

void CommGradientReducer::release_scratch() noexcept {
  if (scratch_ != nullptr && backend_ != nullptr) backend_->release(scratch_);
  scratch_ = nullptr;
  scratch_bytes_ = 0;
}

void CommGradientReducer::attach(float* grads, size_t total,
                                 const std::vector<model::ParamRange>& backward_order) {
  if (grads_ != nullptr) throw std::logic_error("CommGradientReducer::attach while attached (detach first)");
  if (settings_.backend_memory && backend_ == nullptr)
    throw std::logic_error("CommGradientReducer::attach: a reducer of backend memory needs bind_backend() first");
  buckets_ = plan_gradient_buckets(backward_order, total, settings_.bucket_bytes, comm_.rank(),
                                   comm_.size());
  grads_ = grads;
  total_ = total;
  reduced_floats_ = 0;
  for (const auto& range : backward_order) reduced_floats_ += range.count;
  backward_order_ = backward_order;
  shard_ = shard_of(buckets_);
  size_t shard_floats = 0;
  for (const auto& range : shard_) shard_floats += range.count;
  // In backend memory the reduce-scatter writes in place (see the header).
  if (settings_.zero_stage > 0 && !settings_.backend_memory) staging_.resize(shard_floats);
  in_flight_.resize(buckets_.size());
  compressed_.resize(buckets_.size());
  if (settings_.compression != config::Compression::none) {
    comm::CompressedAllReduceOptions options;
    options.codec = config::name_string(settings_.compression);
    options.topk_fraction = settings_.topk_fraction;
    for (auto& bucket : compressed_) bucket = std::make_unique<comm::CompressedAllReduce>(options);
    if (settings_.variance_refresh_steps > 0) {
      local_variance_ = std::make_unique<optim::LocalSecondMoment>(total, settings_.beta2);
      variance_wire_.resize(local_variance_->size_with_mass());
      refreshed_variance_.resize(total);
    }
  }
}

void CommGradientReducer::require_attached(const char* call) const {
  if (grads_ == nullptr)
    throw std::logic_error(std::string("CommGradientReducer::") + call + " before attach()");
}

void CommGradientReducer::begin_step(int64_t step) {
  require_attached("begin_step");
  in_step_ = true;
  step_ = step;
  next_range_ = 0;
  next_issue_ = 0;
  exposed_ms_ = 0.0;
  encoded_bytes_ = 0;
  variance_refreshed_ = false;
  counters_at_begin_ = comm_.counters();
}

void CommGradientReducer::gradients_ready(model::ParamRange range) {
  if (!in_step_) throw std::logic_error("CommGradientReducer::gradients_ready outside a step");
  if (next_range_ >= backward_order_.size() || !(range == backward_order_[next_range_]))
    throw std::logic_error("CommGradientReducer::gradients_ready: got " + show(range) + ", expected " +
                           (next_range_ < backward_order_.size() ? show(backward_order_[next_range_])
                                                                 : std::string("no more ranges")));
  ++next_range_;
  if (settings_.zero_stage == 1) return;  // stage 1 reduces after backward
  const size_t first = next_issue_;
  size_t last = first;
  while (last < buckets_.size() && buckets_[last].first_unit + buckets_[last].units <= next_range_) ++last;
  if (last == first) return;
  wait_for_backend_compute();
  while (next_issue_ < last) issue(next_issue_++);
}

// The data plane of backend memory reads on its own queue: backward's kernels that wrote
// these gradients must be done first.
void CommGradientReducer::wait_for_backend_compute() {
  if (settings_.backend_memory) backend_->finish_compute();
}

void CommGradientReducer::issue(size_t b) {
  const GradientBucket& bucket = buckets_[b];
  float* data = grads_ + bucket.range.offset;
  // Before the reduction overwrites it: the buffer holds this replica's share of the
  // global mean gradient, world size times which estimates the global gradient.
  if (local_variance_)
    local_variance_->add(bucket.range.offset, data, bucket.range.count, static_cast<float>(comm_.size()));
  // The first compression_warmup_steps steps go uncompressed (as 1-bit Adam warms up):
  // the optimizer's moments settle on whole gradients before sparse ones arrive.
  in_flight_[b].compressed = compressed_[b] != nullptr && step_ >= settings_.compression_warmup_steps;
  if (in_flight_[b].compressed) {
    compressed_[b]->begin(comm_, data, bucket.range.count);  // encodes now, on this thread
  } else if (settings_.zero_stage == 0) {
    in_flight_[b].work = comm_.all_reduce(data, bucket.range.count, comm::DataType::f32, comm::ReduceOp::sum);
  } else {
    float* piece = settings_.backend_memory ? grads_ + bucket.piece.offset : staging_.data() + bucket.piece_offset;
    in_flight_[b].work =
        comm_.reduce_scatter(data, piece, bucket.range.count, comm::DataType::f32, comm::ReduceOp::sum);
  }
  in_flight_[b].issued = true;
  if (b == 0 && settings_.after_first_bucket) settings_.after_first_bucket(step_);
}

void CommGradientReducer::complete(size_t b) {
  const GradientBucket& bucket = buckets_[b];
  InFlight& op = in_flight_[b];
  op.issued = false;
  if (op.compressed) {
    compressed_[b]->finish(grads_ + bucket.range.offset, comm::ReduceOp::sum);
    encoded_bytes_ += compressed_[b]->last().encoded_bytes;
    return;
  }
  op.work.wait();
  op.work = comm::Work();
  encoded_bytes_ += bucket.range.count * sizeof(float);
  if (settings_.zero_stage > 0 && !settings_.backend_memory && bucket.piece.count > 0) {
    std::memcpy(grads_ + bucket.piece.offset, staging_.data() + bucket.piece_offset,
                bucket.piece.count * sizeof(float));
  }
}

void CommGradientReducer::finish() {
  if (!in_step_) throw std::logic_error("CommGradientReducer::finish without begin_step");
  if (next_range_ != backward_order_.size())
    throw std::logic_error("CommGradientReducer::finish: the gradients of " +
                           show(backward_order_[next_range_]) +
                           " (and of every range after it in backward order) were never reported ready");
  if (next_issue_ < buckets_.size()) wait_for_backend_compute();
  ExposedTimer timer(exposed_ms_);
  while (next_issue_ < buckets_.size()) issue(next_issue_++);
  for (size_t b = 0; b < buckets_.size(); ++b) complete(b);
  if (local_variance_) {
    local_variance_->end_step();
    if (refresh_owed_ || refreshes_variance_at(step_)) refresh_variance();
    refresh_owed_ = false;
  }
}

// Nothing was issued, so no residual, no estimate and no counter has seen the step.
void CommGradientReducer::skip_step() {
  if (!in_step_) throw std::logic_error("CommGradientReducer::skip_step without begin_step");
  if (next_range_ != 0)
    throw std::logic_error("CommGradientReducer::skip_step after gradients_ready: the step's "
                           "reductions have started, it can no longer be skipped");
  // The optimizer may take its given second moment from the next step on: it must not
  // miss the refresh (the first one above all: it is the first v the optimizer gets).
  if (local_variance_ && refreshes_variance_at(step_)) refresh_owed_ = true;
  in_step_ = false;
}

// From the first compressed step on (the optimizer takes the given v from then), every
// variance_refresh_steps steps: a function of the step alone, so every replica, also one
// that restarted, refreshes at the same steps.
bool CommGradientReducer::refreshes_variance_at(int64_t step) const {
  const int64_t since = step - settings_.compression_warmup_steps;
  return since >= 0 && since % settings_.variance_refresh_steps == 0;
}

// The replicas' estimates of the second moment of the mean gradient (values and mass,
// LocalSecondMoment::mean_gradient_estimate) averaged: a mass-weighted average, so a
// replica that restarted weighs in with what it has. Each replica's running state stays
// its own (the estimate is a function of it, not a state to continue from). bf16 keeps
// float32's exponent range, which values spanning many decades need (an int8 block scale
// would flush the small ones to zero), at 2^-8 relative precision; the all-reduce leaves
// the same bits on every replica, so every replica computes the same v.
void CommGradientReducer::refresh_variance() {
  const size_t count = variance_wire_.size();
  estimate_staging_.resize(count);
  local_variance_->mean_gradient_estimate(estimate_staging_.data(), comm_.size());
  for (size_t i = 0; i < count; ++i) variance_wire_[i] = comm::float_to_bf16(estimate_staging_[i]);
  comm_.all_reduce(variance_wire_.data(), count, comm::DataType::bf16, comm::ReduceOp::avg).wait();
  const float mass = comm::bf16_to_float(variance_wire_[count - 1]);
  const float inverse_mass = mass > 0.0f ? 1.0f / mass : 0.0f;
  for (size_t i = 0; i + 1 < count; ++i)
    refreshed_variance_[i] = comm::bf16_to_float(variance_wire_[i]) * inverse_mass;
  variance_refreshed_ = true;
}

const float* CommGradientReducer::refreshed_second_moment() {
  return variance_refreshed_ ? refreshed_variance_.data() : nullptr;
}

// gathered_values_ = every rank's `slot` bytes, by rank. On host memory it is the buffer
// the communicator writes; on backend memory the bytes go through scratch_ there.
void CommGradientReducer::gather_slots(const void* mine, size_t slot) {
  const size_t ranks = static_cast<size_t>(comm_.size());
  const size_t offset = static_cast<size_t>(comm_.rank()) * slot;
  gathered_values_.resize(ranks * slot);
  if (!settings_.backend_memory) {
    std::memcpy(gathered_values_.data() + offset, mine, slot);
    comm_.all_gather(gathered_values_.data() + offset, gathered_values_.data(), ranks * slot, comm::DataType::u8)
        .wait();
    return;
  }
  if (backend_ == nullptr)
    throw std::logic_error("CommGradientReducer: a reducer of backend memory needs bind_backend() first");
  if (scratch_bytes_ < ranks * slot) {
    release_scratch();
    scratch_ = backend_->allocate(ranks * slot);
    scratch_bytes_ = ranks * slot;
  }
  auto* scratch = static_cast<std::byte*>(scratch_);
  backend_->copy_from_host(scratch + offset, mine, slot);  // returns once the copy is done
  comm_.all_gather(scratch + offset, scratch, ranks * slot, comm::DataType::u8).wait();
  backend_->copy_to_host(gathered_values_.data(), scratch, ranks * slot);
}

std::vector<uint64_t> CommGradientReducer::gather_u64(uint64_t mine) {
  ExposedTimer timer(exposed_ms_);
  gather_slots(&mine, sizeof mine);
  std::vector<uint64_t> all(static_cast<size_t>(comm_.size()));
  std::memcpy(all.data(), gathered_values_.data(), all.size() * sizeof(uint64_t));
  return all;
}

void CommGradientReducer::sum_over_ranks(std::span<double> values) {
  if (values.empty()) return;
  ExposedTimer timer(exposed_ms_);
  const size_t slot = values.size() * sizeof(double);
  const size_t ranks = static_cast<size_t>(comm_.size());
  gather_slots(values.data(), slot);
  for (size_t i = 0; i < values.size(); ++i) {
    double sum = 0.0;
    for (size_t r = 0; r < ranks; ++r) {
      double value;
      std::memcpy(&value, gathered_values_.data() + r * slot + i * sizeof(double), sizeof value);
      sum += value;
    }
    values[i] = sum;
  }
}

void CommGradientReducer::gather_shards(float* buffer) {
  require_attached("gather_shards");
  // The update that wrote the shard may still be queued on the backend.
  if (settings_.backend_memory) backend_->finish_compute();
  ExposedTimer timer(exposed_ms_);
  std::vector<comm::Work> works;
  works.reserve(buckets_.size());
  for (const auto& bucket : buckets_) {
    works.push_back(comm_.all_gather(buffer + bucket.piece.offset, buffer + bucket.range.offset,
                                     bucket.range.count, comm::DataType::f32));
  }
  for (auto& work : works) work.wait();
}

train::ReducerTraffic CommGradientReducer::step_traffic() const {
  const comm::CommCounters now = comm_.counters();
  train::ReducerTraffic traffic;
  traffic.exposed_ms = exposed_ms_;
  traffic.bytes_sent = now.bytes_sent - counters_at_begin_.bytes_sent;
  traffic.bytes_received = now.bytes_received - counters_at_begin_.bytes_received;
  traffic.gradient_bytes = reduced_floats_ * sizeof(float);
  traffic.encoded_bytes = encoded_bytes_;
  return traffic;
}

std::span<const float> CommGradientReducer::residual(size_t b) const {
  if (b >= compressed_.size() || !compressed_[b]) return {};
  return compressed_[b]->residual();
}

comm::CompressedTraffic CommGradientReducer::compressed_total() const {
  comm::CompressedTraffic total;
  for (const auto& bucket : compressed_)
    if (bucket) total += bucket->total();
  return total;
}

}  // namespace dseek::dist
