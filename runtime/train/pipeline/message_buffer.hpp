// One activation (or its gradient) handed between two pipeline stages, in the memory the
// links move: pinned host memory when they move host memory (the backend's copies cross
// PCIe on each side), a backend buffer when they move the backend's own (NCCL: one copy
// on the device, nothing through the host). The stage keeps one per message of a step
// and direction (a posted receive fills its own), evaluation two.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/backend/device_buffer.hpp"
#include "runtime/backend/host_memory.hpp"
#include "runtime/train/pipeline/links.hpp"

namespace dseek::train {

class MessageBuffer {
 public:
  MessageBuffer(backend::Backend& backend, PipelineLinks& links, size_t floats);

  // Copies `src` (backend memory) in and posts its send to `peer`; the buffer stays
  // untouched until the handle's wait.
  PipelineLinks::Handle send(const float* src, int64_t peer);
  // Posts the receive into the buffer (after the previous copy_into has read it).
  PipelineLinks::Handle post_recv(int64_t peer);
  // After the receive's wait: the values into `dst` (backend memory).
  void copy_into(float* dst);

 private:
  size_t bytes() const { return floats_ * sizeof(float); }

  backend::Backend& backend_;
  PipelineLinks& links_;
  size_t floats_;
  bool on_backend_;
  backend::HostBuffer<float> host_;
  backend::DeviceBuffer<float> device_;
};

}  // namespace dseek::train
