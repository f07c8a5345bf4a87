// Picks the next token from a row of logits: greedy (temperature 0), or a draw from
// softmax(logits / temperature) restricted to the k most likely tokens (top_k > 0) and
// then to the smallest set of most likely tokens whose probability reaches top_p
// (nucleus sampling), as Hugging Face's generate() and llama.cpp apply them. The draws
// come from a 64-bit Mersenne Twister seeded with `seed`: the same seed and logits
// give the same tokens on every machine.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace dseek::infer {

struct SamplingSettings {
  double temperature = 1.0;  // 0: greedy (argmax)
  int64_t top_k = 0;         // 0: every token
  double top_p = 1.0;        // 1: no nucleus cut
  uint64_t seed = 0;
};

// Throws std::invalid_argument naming the setting: temperature < 0, top_k < 0,
// top_p outside (0, 1].
void check_sampling(const SamplingSettings& settings);

class Sampler {
 public:
  explicit Sampler(const SamplingSettings& settings);
  int32_t next(std::span<const float> logits);

 private:
  SamplingSettings settings_;
  std::mt19937_64 rng_;
  std::vector<int32_t> order_;
  std::vector<double> weights_;
};

// The first index of the largest logit.
int32_t argmax(std::span<const float> logits);

}  // namespace dseek::infer
