// The GPT forward for generation: one sequence, a KV cache per block, so that the prompt
// is run in one pass (prefill) and each new token then costs one token's forward
// against the cached keys and values of the positions before it.
//
// The same model as model::GptModel (runtime/model/gpt_model.hpp): the parameters are
// its flat buffer in ParamLayout's order, and each block is the backend's ops in the
// order GptModel's block forward runs them (LayerNorm, qkv, attention, projection,
// residual, LayerNorm, MLP with GELU, projection, residual), with the attention replaced
// by Backend::attention_forward_cached. There is no loss, no backward and nothing kept
// but the cache. tests/unit/test_generate.cpp checks it against GptModel's loss and the
// KV-cache decoding against full forward passes, token for token.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/backend/device_buffer.hpp"
#include "runtime/model/param_layout.hpp"

namespace dseek::infer {

class Decoder {
 public:
  // `params` (host, layout.total() floats) are copied into the backend's memory.
  Decoder(const model::GptShape& shape, backend::Backend& backend, std::span<const float> params);
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  const model::GptShape& shape() const { return layout_.shape(); }
  // Tokens in the cache so far: the position of the next token.
  int64_t position() const { return position_; }
  // Forgets the sequence (the cache is overwritten from position 0).
  void reset() { position_ = 0; }

  // Runs `tokens` at positions position() .. position() + n - 1, appends their keys and
  // values to the cache and returns the logits (V floats, host) of the last one; with
  // `all_logits`, of every one ((n, V), row-major). Throws std::invalid_argument when
  // the tokens would run past the context or an id is outside the vocabulary.
  const std::vector<float>& append(std::span<const int32_t> tokens, bool all_logits = false);

 private:
  void block_forward(int64_t layer, int n);

  model::ParamLayout layout_;
  backend::Backend& backend_;
  int64_t position_ = 0;
  backend::DeviceBuffer<float> params_;
  std::vector<backend::DeviceBuffer<float>> k_cache_, v_cache_;  // per block, (context, C)
  // Activations of up to `context` tokens: the residual stream x, the block's inner one,
  // and one buffer per width.
  backend::DeviceBuffer<int32_t> tokens_;
  backend::DeviceBuffer<float> x_, residual2_, ln_, mean_, rstd_, qkv_, atty_, branch_, fch_,
      fch_gelu_, logits_;
  std::vector<float> host_logits_;
};

}  // namespace dseek::infer
