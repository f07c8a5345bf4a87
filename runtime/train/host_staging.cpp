// Implementation of host_staging.hpp.
#include "runtime/train/host_staging.hpp"

#include <stdexcept>
#include <string>

namespace dseek::train {

namespace {
void check_inside(model::ParamRange range, size_t count) {
  if (range.end() > count)
    throw std::out_of_range("HostStaging: range [" + std::to_string(range.offset) + ", " +
                            std::to_string(range.end()) + ") is outside the buffer of " +
                            std::to_string(count) + " floats");
}
}  // namespace

HostStaging::HostStaging(backend::Backend& backend, float* buffer, size_t count)
    : backend_(backend), buffer_(buffer), count_(count) {
  if (!backend.memory_is_host()) copy_ = backend::HostBuffer<float>(backend.host_memory(), count);
  host_ = backend.memory_is_host() ? buffer : copy_.data();
}

void HostStaging::to_host(model::ParamRange range) {
  check_inside(range, count_);
  if (!copies() || range.count == 0) return;
  backend_.copy_to_host(host_ + range.offset, buffer_ + range.offset, range.count * sizeof(float));
}

void HostStaging::to_backend(model::ParamRange range) {
  check_inside(range, count_);
  if (!copies() || range.count == 0) return;
  backend_.copy_from_host(buffer_ + range.offset, host_ + range.offset, range.count * sizeof(float));
}

void HostStaging::to_backend_async(model::ParamRange range) {
  check_inside(range, count_);
  if (!copies() || range.count == 0) return;
  backend_.copy_from_host_async(buffer_ + range.offset, host_ + range.offset,
                                range.count * sizeof(float));
}

void HostStaging::to_host(const std::vector<model::ParamRange>& ranges) {
  for (const auto& range : ranges) to_host(range);
}

void HostStaging::to_backend(const std::vector<model::ParamRange>& ranges) {
  for (const auto& range : ranges) to_backend(range);
}

}  // namespace dseek::train
