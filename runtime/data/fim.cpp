// Fill-in-the-middle (see fim.hpp).
#include "runtime/data/fim.hpp"

#include <algorithm>
#include <string>

#include "runtime/data/token_dataset.hpp"
#include "runtime/data/tokenizer.hpp"

#include "runtime/util/splitmix64.hpp"

namespace dseek::data {
namespace {

uint64_t splitmix64(uint64_t& state) { return util::splitmix64_next(state); }

double uniform(uint64_t& state) { return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53; }

}  // namespace

void check_fim_settings(const FimSettings& settings) {
  if (!(settings.rate >= 0.0 && settings.rate <= 1.0)) {
    throw DataError("--fim-rate must be in [0, 1], not " + std::to_string(settings.rate));
  }
  if (!(settings.spm_rate >= 0.0 && settings.spm_rate <= 1.0)) {
    throw DataError("--fim-spm-rate must be in [0, 1], not " + std::to_string(settings.spm_rate));
  }
}

FimTokens fim_tokens_for(const Tokenizer& tokenizer) {
  if (tokenizer.kind() == TokenizerKind::cl100k_base) return {100258, 100259, 100260};
  const uint32_t vocab = tokenizer.vocab_size();
  return {vocab, vocab + 1, vocab + 2};
}

uint32_t dataset_vocab(const Tokenizer& tokenizer, const FimSettings& settings) {
  if (settings.rate <= 0.0) return tokenizer.vocab_size();
  return std::max(tokenizer.vocab_size(), fim_tokens_for(tokenizer).suffix + 1);
}

bool apply_fim(std::vector<uint32_t>& tokens, uint64_t key_hash, const FimSettings& settings,
               const FimTokens& sentinels) {
  if (settings.rate <= 0.0 || tokens.empty()) return false;
  uint64_t state = settings.seed ^ (key_hash * 0xD6E8FEB86659FD93ull);
  if (uniform(state) >= settings.rate) return false;
  const bool spm = uniform(state) < settings.spm_rate;
  const uint64_t n = tokens.size();
  uint64_t a = splitmix64(state) % (n + 1), b = splitmix64(state) % (n + 1);
  if (a > b) std::swap(a, b);
  std::vector<uint32_t> out;
  out.reserve(n + 3);
  auto append = [&](uint64_t from, uint64_t to) {
    out.insert(out.end(), tokens.begin() + static_cast<std::ptrdiff_t>(from),
               tokens.begin() + static_cast<std::ptrdiff_t>(to));
  };
  out.push_back(sentinels.prefix);
  if (spm) {
    out.push_back(sentinels.suffix);
    append(b, n);
    out.push_back(sentinels.middle);
    append(0, b);  // prefix then middle
  } else {
    append(0, a);
    out.push_back(sentinels.suffix);
    append(b, n);
    out.push_back(sentinels.middle);
    append(a, b);
  }
  tokens.swap(out);
  return true;
}

}  // namespace dseek::data
