// Implementation of message_buffer.hpp.
#include "runtime/train/pipeline/message_buffer.hpp"

namespace dseek::train {

MessageBuffer::MessageBuffer(backend::Backend& backend, PipelineLinks& links, size_t floats)
    : backend_(backend), links_(links), floats_(floats), on_backend_(links.moves_backend_memory()) {
  if (on_backend_) device_ = backend::DeviceBuffer<float>(backend, floats);
  else host_ = backend::HostBuffer<float>(backend.host_memory(), floats);
}

PipelineLinks::Handle MessageBuffer::send(const float* src, int64_t peer) {
  if (!on_backend_) {
    backend_.copy_to_host(host_.data(), src, bytes());
    return links_.post_send(host_.data(), floats_, peer);
  }
  backend_.copy(device_.data(), src, bytes());
  backend_.finish_compute();  // the data plane reads the buffer on its own queue
  return links_.post_backend_send(device_.data(), floats_, peer);
}

PipelineLinks::Handle MessageBuffer::post_recv(int64_t peer) {
  if (!on_backend_) return links_.post_recv(host_.data(), floats_, peer);
  backend_.finish_compute();  // a queued copy_into has read what the receive overwrites
  return links_.post_backend_recv(device_.data(), floats_, peer);
}

void MessageBuffer::copy_into(float* dst) {
  if (on_backend_) backend_.copy(dst, device_.data(), bytes());
  else backend_.copy_from_host(dst, host_.data(), bytes());
}

}  // namespace dseek::train
