// Autoregressive generation: the prompt in one forward (prefill), then one token per
// step through the decoder's KV cache, each one handed to the caller as it comes.
// Stops after `max_tokens` new tokens, at the end-of-text token (the data set's document
// separator; not handed on), or when the prompt and the new tokens fill the model's
// context (no sliding window: a longer text would need positions the model has no
// embedding for).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <vector>

#include "runtime/infer/decoder.hpp"
#include "runtime/infer/sampler.hpp"

namespace dseek::infer {

// A prompt that leaves no room in the context (what() says the sizes).
struct PromptTooLong : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

enum class StopReason { max_tokens, end_of_text, context };
const char* stop_reason_name(StopReason reason);  // "max-tokens", "end-of-text", "context"

struct GenerateSettings {
  int64_t max_tokens = 256;
  SamplingSettings sampling;
  int32_t end_of_text = -1;  // -1: none (or ignored: every step runs to the other stops)
  // Only ids below this are sampled (the tokenizer's vocabulary, when the model's is
  // padded beyond it, as GPT-2's 50257 to 50304); 0: every id of the model.
  int64_t sample_below = 0;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // the new tokens, without the prompt
  StopReason stop = StopReason::max_tokens;
  double prefill_seconds = 0;
  int64_t decode_steps = 0;     // one-token forwards after the prefill
  double decode_seconds = 0;    // their time, sampling included
};

// `prompt` must hold 1 .. context - 1 tokens (PromptTooLong otherwise); max_tokens >= 1.
GenerateResult generate(Decoder& decoder, std::span<const int32_t> prompt,
                        const GenerateSettings& settings,
                        const std::function<void(int32_t token)>& on_token = nullptr);

}  // namespace dseek::infer
