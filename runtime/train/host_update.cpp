// Implementation of host_update.hpp.
#include "runtime/train/host_update.hpp"

#include <algorithm>
#include <chrono>
#include <exception>

namespace dseek::train {

HostUpdate::HostUpdate(OptimizerShards& optimizer, HostStaging& params, HostStaging& grads,
                       std::vector<model::ParamRange> chunks)
    : optimizer_(optimizer), params_(params), grads_(grads), chunks_(std::move(chunks)),
      chunk_on_backend_(chunks_.size(), 1) {}

// An update left running writes into the model's buffers until it ends.
HostUpdate::~HostUpdate() {
  try {
    finish();
  } catch (const std::exception&) {
    // The failure was (or will be) reported by the step that hit it.
  }
}

optim::StepStats HostUpdate::update(float* params, float* grads,
                                    const std::vector<model::ParamRange>& owned,
                                    bool grads_on_host, double lr, double grad_norm) {
  if (overlapped()) {
    // The host copy is rewritten below: no async copy of the last update may still read it.
    params_.finish_copies();
    if (!host_params_current_) params_.to_host(owned);
    host_params_current_ = true;
    if (!grads_on_host) grads_.to_host(owned);
    optimizer_.start_update(params_.host(), grads_.host(), lr, grad_norm, chunks_);
    pending_ = true;
    std::fill(chunk_on_backend_.begin(), chunk_on_backend_.end(), 0);
    // The step reports the norm only; the clip scale stays the optimizer's business.
    return optim::StepStats{grad_norm, 1.0};
  }
  if (!optimizer_.updates_on_host() || !params_.copies())
    return optimizer_.update(params, grads, lr, grad_norm);
  params_.to_host(owned);
  if (!grads_on_host) grads_.to_host(owned);
  const auto stats = optimizer_.update(params_.host(), grads_.host(), lr, grad_norm);
  params_.to_backend(owned);
  return stats;
}

void HostUpdate::send(size_t chunk) {
  params_.to_backend_async(chunks_[chunk]);
  chunk_on_backend_[chunk] = 1;
}

void HostUpdate::wait_for(size_t chunk) {
  const auto start = std::chrono::steady_clock::now();
  optimizer_.wait_for_chunk(chunk);
  wait_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  send(chunk);
}

void HostUpdate::await(model::ParamRange range) {
  if (!pending_) return;
  for (size_t c = 0; c < chunks_.size(); ++c)
    if (!chunk_on_backend_[c] && optimizer_.chunk_updated(c)) send(c);
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const bool overlaps = chunks_[c].offset < range.end() && range.offset < chunks_[c].end();
    if (overlaps && !chunk_on_backend_[c]) wait_for(c);
  }
}

void HostUpdate::finish() {
  if (!pending_) return;
  for (size_t c = 0; c < chunks_.size(); ++c)
    if (!chunk_on_backend_[c]) wait_for(c);
  pending_ = false;
  optimizer_.finish_update();
}

double HostUpdate::take_wait_ms() {
  const double ms = wait_ms_;
  wait_ms_ = 0.0;
  return ms;
}

}  // namespace dseek::train
