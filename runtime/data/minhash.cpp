// MinHash and the LSH band choice (see minhash.hpp).
#include "runtime/data/minhash.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "runtime/util/splitmix64.hpp"

namespace dseek::data {
namespace {

uint64_t splitmix64(uint64_t& state) { return util::splitmix64_next(state); }

bool is_word_byte(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

// The 64-bit hashes of the text's words, in order.
std::vector<uint64_t> word_hashes(std::string_view text) {
  std::vector<uint64_t> words;
  std::string word;
  for (size_t i = 0; i < text.size();) {
    while (i < text.size() && !is_word_byte(static_cast<unsigned char>(text[i]))) ++i;
    word.clear();
    while (i < text.size() && is_word_byte(static_cast<unsigned char>(text[i]))) {
      char c = text[i++];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      word.push_back(c);
    }
    if (!word.empty()) words.push_back(XXH3_64bits(word.data(), word.size()));
  }
  return words;
}

}  // namespace

MinHasher::MinHasher(uint32_t permutations, uint32_t shingle_words)
    : shingle_words_(std::max<uint32_t>(shingle_words, 1)) {
  uint64_t state = 0x6d696e68617368ull;  // fixed: signatures are the same in every run
  a_.resize(permutations);
  b_.resize(permutations);
  c_.resize(permutations);
  for (uint32_t i = 0; i < permutations; ++i) {
    a_[i] = static_cast<uint32_t>(splitmix64(state)) | 1;
    b_[i] = static_cast<uint32_t>(splitmix64(state)) | 1;
    c_[i] = splitmix64(state);
  }
}

std::vector<uint32_t> MinHasher::signature(std::string_view text) const {
  const std::vector<uint64_t> words = word_hashes(text);
  std::vector<uint32_t> signature;
  if (words.empty()) return signature;
  signature.assign(a_.size(), std::numeric_limits<uint32_t>::max());
  const size_t n = std::min<size_t>(shingle_words_, words.size());
  for (size_t start = 0; start + n <= words.size(); ++start) {
    uint64_t shingle = 0x736869ull;
    for (size_t k = 0; k < n; ++k) shingle = (shingle ^ words[start + k]) * 0x100000001B3ull;
    shingle ^= shingle >> 29;
    const uint64_t lo = static_cast<uint32_t>(shingle), hi = shingle >> 32;
    uint32_t* out = signature.data();
    const uint32_t* a = a_.data();
    const uint32_t* b = b_.data();
    const uint64_t* c = c_.data();
    for (size_t i = 0; i < a_.size(); ++i) {
      const auto h = static_cast<uint32_t>((a[i] * lo + b[i] * hi + c[i]) >> 32);
      out[i] = std::min(out[i], h);
    }
  }
  return signature;
}

double estimated_jaccard(const std::vector<uint32_t>& x, const std::vector<uint32_t>& y) {
  if (x.empty() || x.size() != y.size()) return 0.0;
  size_t equal = 0;
  for (size_t i = 0; i < x.size(); ++i) equal += x[i] == y[i];
  return static_cast<double>(equal) / static_cast<double>(x.size());
}

LshBands choose_lsh_bands(uint32_t permutations, double threshold) {
  // The probability that two texts of similarity s share a band: 1 - (1 - s^r)^b.
  auto integrate = [](double from, double to, auto f) {
    constexpr int kSteps = 200;
    const double step = (to - from) / kSteps;
    double sum = 0;
    for (int k = 0; k < kSteps; ++k) sum += f(from + (k + 0.5) * step) * step;
    return sum;
  };
  LshBands best{1, permutations};
  double best_error = std::numeric_limits<double>::infinity();
  for (uint32_t bands = 1; bands <= permutations; ++bands) {
    for (uint32_t rows = 1; bands * rows <= permutations; ++rows) {
      auto shared = [&](double s) {
        return 1.0 - std::pow(1.0 - std::pow(s, rows), bands);
      };
      const double false_positive = integrate(0.0, threshold, shared);
      const double false_negative =
          integrate(threshold, 1.0, [&](double s) { return 1.0 - shared(s); });
      if (false_positive + false_negative < best_error) {
        best_error = false_positive + false_negative;
        best = {bands, rows};
      }
    }
  }
  return best;
}

uint64_t lsh_band_key(const std::vector<uint32_t>& signature, LshBands bands, uint32_t band) {
  return XXH3_64bits_withSeed(signature.data() + band * bands.rows, bands.rows * sizeof(uint32_t),
                              band);
}

}  // namespace dseek::data
