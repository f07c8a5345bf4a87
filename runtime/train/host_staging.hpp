// A host copy of one flat buffer in a backend's memory (the parameters, the gradients),
// for the parts of training that run on the host: the gradient reduction over the UCX
// host data plane, replica checksums, fault injection's gradient hook, the CPU-offloaded
// optimizer of the gradient_shard actors, ZeRO's gather. The copy is allocated once, when
// the trainer is built, in the backend's host memory (Backend::host_memory(): pinned for
// CUDA, so the copy engine reads it directly and to_backend_async runs beside the
// compute); ranges move between it and the backend only through the backend's copy
// calls, so a device backend (CUDA) works unchanged. The parameters' staging is the
// FP32 master copy the offloaded optimizer updates.
//
// On a backend whose memory is host memory (the CPU backend) there is nothing to copy:
// host() is the buffer itself and the moves are no-ops, so the CPU path costs nothing.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/backend/host_memory.hpp"
#include "runtime/model/param_layout.hpp"

namespace dseek::train {

class HostStaging {
 public:
  HostStaging(backend::Backend& backend, float* buffer, size_t count);
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // The host copy (layout order, as many floats as the buffer): valid where last moved
  // to the host.
  float* host() { return host_; }
  // Whether host() is a separate copy (the backend's memory is not host memory).
  bool copies() const { return host_ != buffer_; }

  void to_host(model::ParamRange range);
  void to_backend(model::ParamRange range);
  void to_host(const std::vector<model::ParamRange>& ranges);
  void to_backend(const std::vector<model::ParamRange>& ranges);
  // to_backend that may return before the copy is done (Backend::copy_from_host_async):
  // later ops of the backend wait for it; the host range must not change before
  // finish_copies().
  void to_backend_async(model::ParamRange range);
  void finish_copies() { if (copies()) backend_.finish_copies(); }

 private:
  backend::Backend& backend_;
  float* buffer_;  // in the backend's memory
  size_t count_;
  backend::HostBuffer<float> copy_;  // empty when the backend's memory is host memory
  float* host_;
};

}  // namespace dseek::train
