// Implementation of precision_policy.hpp.
#include "runtime/model/precision_policy.hpp"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace dseek::model {

using backend::MatmulFormat;

MatmulFormat matmul_format_of(config::Precision precision) {
  switch (precision) {
    case config::Precision::bf16: return MatmulFormat::bf16;
    case config::Precision::fp8: return MatmulFormat::fp8;
    case config::Precision::fp32: break;
  }
  return MatmulFormat::fp32;
}

const char* name_of(MatmulFormat format) {
  switch (format) {
    case MatmulFormat::bf16: return "bf16";
    case MatmulFormat::fp8: return "fp8";
    case MatmulFormat::fp32: break;
  }
  return "fp32";
}

PrecisionPolicy::PrecisionPolicy(backend::Backend& backend, MatmulFormat format, int64_t layers,
                                 numerics::DelayedScalingSettings fp8)
    : backend_(&backend), format_(format) {
  if (format != MatmulFormat::fp8) return;
  const size_t count = static_cast<size_t>(layers) * kBlockMatmuls * kOperands;
  for (size_t i = 0; i < count; ++i)
    scaling_.emplace_back(i % kOperands == 2 ? numerics::Fp8Format::e5m2
                                             : numerics::Fp8Format::e4m3,
                          fp8);
  scales_ = backend::DeviceBuffer<float>(backend, count);
  amaxes_ = backend::DeviceBuffer<float>(backend, count);
  host_.assign(count, 1.0f);
  backend.copy_from_host(scales_.data(), host_.data(), count * sizeof(float));
}

size_t PrecisionPolicy::index(int64_t layer, BlockMatmul matmul, int operand) const {
  return (static_cast<size_t>(layer) * kBlockMatmuls + matmul) * kOperands +
         static_cast<size_t>(operand);
}

backend::MatmulPrecision PrecisionPolicy::block(int64_t layer, BlockMatmul matmul) const {
  backend::MatmulPrecision p;
  p.format = format_;
  if (format_ != MatmulFormat::fp8) return p;
  // The buffers are the backend's; the matmul raises the amaxes through these pointers.
  float* scales = const_cast<float*>(scales_.data());
  float* amaxes = const_cast<float*>(amaxes_.data());
  backend::Fp8OperandScaling* operands[kOperands] = {&p.inp, &p.weight, &p.dout};
  for (int k = 0; k < kOperands; ++k) {
    const size_t i = index(layer, matmul, k);
    *operands[k] = {scales + i, amaxes + i};
  }
  return p;
}

backend::MatmulPrecision PrecisionPolicy::head() const {
  backend::MatmulPrecision p;
  p.format = format_ == MatmulFormat::fp32 ? MatmulFormat::fp32 : MatmulFormat::bf16;
  return p;
}

void PrecisionPolicy::end_step() {
  if (format_ != MatmulFormat::fp8) return;
  const size_t count = scaling_.size();
  backend_->copy_to_host(host_.data(), amaxes_.data(), count * sizeof(float));
  for (size_t i = 0; i < count; ++i) {
    scaling_[i].record(host_[i]);
    scaling_[i].end_step();
    host_[i] = scaling_[i].scale();
  }
  backend_->copy_from_host(scales_.data(), host_.data(), count * sizeof(float));
  backend_->zero(amaxes_.data(), count);
}

std::vector<float> PrecisionPolicy::scales_to_host() const {
  std::vector<float> scales(scaling_.size());
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = scaling_[i].scale();
  return scales;
}

numerics::DelayedScalingState PrecisionPolicy::fp8_state() const {
  numerics::DelayedScalingState state;
  if (scaling_.empty()) return state;
  state.history_length = static_cast<int64_t>(scaling_.front().history_oldest_first().size());
  for (const auto& operand : scaling_) {
    const auto history = operand.history_oldest_first();
    state.histories.insert(state.histories.end(), history.begin(), history.end());
    state.scales.push_back(operand.scale());
  }
  return state;
}

void PrecisionPolicy::restore_fp8_state(const numerics::DelayedScalingState& state) {
  const size_t count = scaling_.size();
  const size_t length = static_cast<size_t>(std::max<int64_t>(state.history_length, 0));
  if (state.scales.size() != count || state.histories.size() != count * length)
    throw std::invalid_argument("fp8 scaling state of " + std::to_string(state.scales.size()) +
                                " operands (" + std::to_string(state.histories.size()) +
                                " amaxes), this model has " + std::to_string(count) +
                                " fp8 operands");
  if (count == 0) return;
  for (size_t i = 0; i < count; ++i) {
    const auto first = state.histories.begin() + static_cast<std::ptrdiff_t>(i * length);
    scaling_[i].restore(std::vector<float>(first, first + static_cast<std::ptrdiff_t>(length)),
                        state.scales[i]);
    host_[i] = state.scales[i];
  }
  backend_->copy_from_host(scales_.data(), host_.data(), count * sizeof(float));
  backend_->zero(amaxes_.data(), count);
}

}  // namespace dseek::model
