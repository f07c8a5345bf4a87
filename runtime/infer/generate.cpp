// The generation loop; see generate.hpp.
#include "runtime/infer/generate.hpp"

#include <chrono>
#include <string>

namespace dseek::infer {

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::max_tokens: return "max-tokens";
    case StopReason::end_of_text: return "end-of-text";
    case StopReason::context: return "context";
  }
  return "?";
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

GenerateResult generate(Decoder& decoder, std::span<const int32_t> prompt,
                        const GenerateSettings& settings,
                        const std::function<void(int32_t token)>& on_token) {
  const int64_t context = decoder.shape().context;
  const int64_t P = static_cast<int64_t>(prompt.size());
  if (P < 1) throw std::invalid_argument("generate: the prompt has no tokens");
  if (P >= context)
    throw PromptTooLong("the prompt is " + std::to_string(P) +
                        " tokens and the model's context is " + std::to_string(context) +
                        ": a prompt may have at most " + std::to_string(context - 1) +
                        " tokens, to leave room for the text (shorten it, e.g. keep its end)");
  if (settings.max_tokens < 1) throw std::invalid_argument("--max-tokens must be >= 1");
  Sampler sampler(settings.sampling);
  GenerateResult result;
  decoder.reset();
  auto start = std::chrono::steady_clock::now();
  const std::vector<float>* logits = &decoder.append(prompt);
  result.prefill_seconds = seconds_since(start);
  start = std::chrono::steady_clock::now();
  for (;;) {
    std::span<const float> row(*logits);
    if (settings.sample_below > 0 && static_cast<size_t>(settings.sample_below) < row.size())
      row = row.first(static_cast<size_t>(settings.sample_below));
    const int32_t token = sampler.next(row);
    if (token == settings.end_of_text) {
      result.stop = StopReason::end_of_text;
      break;
    }
    result.tokens.push_back(token);
    if (on_token) on_token(token);
    const int64_t produced = static_cast<int64_t>(result.tokens.size());
    if (produced == settings.max_tokens) {
      result.stop = StopReason::max_tokens;
      break;
    }
    if (P + produced == context) {
      result.stop = StopReason::context;
      break;
    }
    const int32_t fed[1] = {token};
    logits = &decoder.append(fed);
    ++result.decode_steps;
  }
  result.decode_seconds = seconds_since(start);
  return result;
}

}  // namespace dseek::infer
