// The KV-cache forward of generation; see decoder.hpp.
#include "runtime/infer/decoder.hpp"

#include <stdexcept>
#include <string>

namespace dseek::infer {

using backend::DeviceBuffer;

Decoder::Decoder(const model::GptShape& shape, backend::Backend& backend,
                 std::span<const float> params)
    : layout_(shape), backend_(backend) {
  if (shape.dim % shape.heads != 0)
    throw std::invalid_argument("Decoder: dim must be divisible by heads");
  if (params.size() != layout_.total())
    throw std::invalid_argument("Decoder: " + std::to_string(params.size()) +
                                " parameters given, the model has " +
                                std::to_string(layout_.total()));
  const size_t T = static_cast<size_t>(shape.context);
  const size_t C = static_cast<size_t>(shape.dim);
  params_ = DeviceBuffer<float>(backend, layout_.total());
  backend.copy_from_host(params_.data(), params.data(), params.size() * sizeof(float));
  for (int64_t l = 0; l < shape.layers; ++l) {
    k_cache_.emplace_back(backend, T * C);
    v_cache_.emplace_back(backend, T * C);
  }
  tokens_ = DeviceBuffer<int32_t>(backend, T);
  x_ = DeviceBuffer<float>(backend, T * C);
  residual2_ = DeviceBuffer<float>(backend, T * C);
  ln_ = DeviceBuffer<float>(backend, T * C);
  mean_ = DeviceBuffer<float>(backend, T);
  rstd_ = DeviceBuffer<float>(backend, T);
  qkv_ = DeviceBuffer<float>(backend, T * 3 * C);
  atty_ = DeviceBuffer<float>(backend, T * C);
  branch_ = DeviceBuffer<float>(backend, T * C);
  fch_ = DeviceBuffer<float>(backend, T * 4 * C);
  fch_gelu_ = DeviceBuffer<float>(backend, T * 4 * C);
  logits_ = DeviceBuffer<float>(backend, T * static_cast<size_t>(shape.vocab));
}

void Decoder::block_forward(int64_t layer, int n) {
  const model::BlockParams& p = layout_.block(layer);
  const float* w = params_.data();
  const int C = static_cast<int>(layout_.shape().dim);
  const int NH = static_cast<int>(layout_.shape().heads);
  const size_t NC = static_cast<size_t>(n) * C;
  auto& be = backend_;
  const size_t l = static_cast<size_t>(layer);
  be.layernorm_forward(ln_.data(), mean_.data(), rstd_.data(), x_.data(), w + p.ln1_w,
                       w + p.ln1_b, n, C);
  be.matmul_forward(qkv_.data(), ln_.data(), w + p.qkv_w, w + p.qkv_b, n, C, 3 * C);
  be.attention_forward_cached(atty_.data(), qkv_.data(), k_cache_[l].data(), v_cache_[l].data(),
                              static_cast<int>(position_), n, C, NH);
  be.matmul_forward(branch_.data(), atty_.data(), w + p.attn_proj_w, w + p.attn_proj_b, n, C, C);
  be.residual_forward(residual2_.data(), x_.data(), branch_.data(), NC);
  be.layernorm_forward(ln_.data(), mean_.data(), rstd_.data(), residual2_.data(), w + p.ln2_w,
                       w + p.ln2_b, n, C);
  be.matmul_forward(fch_.data(), ln_.data(), w + p.fc_w, w + p.fc_b, n, C, 4 * C);
  be.gelu_forward(fch_gelu_.data(), fch_.data(), NC * 4);
  be.matmul_forward(branch_.data(), fch_gelu_.data(), w + p.fc_proj_w, w + p.fc_proj_b, n,
                    4 * C, C);
  be.residual_forward(x_.data(), residual2_.data(), branch_.data(), NC);
}

const std::vector<float>& Decoder::append(std::span<const int32_t> tokens, bool all_logits) {
  const model::GptShape& s = layout_.shape();
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n < 1) throw std::invalid_argument("Decoder::append: no tokens");
  if (position_ + n > s.context)
    throw std::invalid_argument("Decoder::append: " + std::to_string(position_) + " + " +
                                std::to_string(n) + " tokens exceed the context of " +
                                std::to_string(s.context));
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= s.vocab)
      throw std::invalid_argument("Decoder::append: token id " + std::to_string(tokens[i]) +
                                  " is outside the vocabulary [0, " + std::to_string(s.vocab) +
                                  ")");
  const int C = static_cast<int>(s.dim);
  const int V = static_cast<int>(s.vocab);
  const size_t Cs = static_cast<size_t>(C);
  const float* w = params_.data();
  backend_.copy_from_host(tokens_.data(), tokens.data(), tokens.size() * sizeof(int32_t));
  // wpe from row `position_`: the new tokens' positions.
  backend_.encoder_forward(x_.data(), tokens_.data(), w + layout_.wte(),
                           w + layout_.wpe() + static_cast<size_t>(position_) * Cs, 1,
                           static_cast<int>(n), C);
  for (int64_t l = 0; l < s.layers; ++l) block_forward(l, static_cast<int>(n));
  position_ += n;
  // The head: the final LayerNorm and the tied projection, on the rows asked for.
  const int rows = all_logits ? static_cast<int>(n) : 1;
  const float* last = x_.data() + static_cast<size_t>(n - rows) * Cs;
  backend_.layernorm_forward(ln_.data(), mean_.data(), rstd_.data(), last, w + layout_.lnf_w(),
                             w + layout_.lnf_b(), rows, C);
  backend_.matmul_forward(logits_.data(), ln_.data(), w + layout_.wte(), nullptr, rows, C, V);
  host_logits_.resize(static_cast<size_t>(rows) * V);
  backend_.copy_to_host(host_logits_.data(), logits_.data(), host_logits_.size() * sizeof(float));
  return host_logits_;
}

}  // namespace dseek::infer
