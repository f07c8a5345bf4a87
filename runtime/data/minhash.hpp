// MinHash signatures of a text's word shingles and the LSH banding that finds the
// earlier texts whose Jaccard similarity may reach a threshold (Broder 1997; Leskovec,
// Rajaraman, Ullman, "Mining of Massive Datasets", ch. 3). Words are the runs of letters
// and digits, ASCII letters lowercased; a shingle is `shingle_words` consecutive words
// (a text with fewer words is one shingle); permutation i maps the shingle's 64-bit hash
// h = (hi, lo) to (a_i lo + b_i hi + c_i) >> 32 (multiply-add-shift with 32-bit factors,
// which AVX2 does four at a time), with fixed seeds. Pure functions, no state but seeds.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace dseek::data {

class MinHasher {
 public:
  MinHasher(uint32_t permutations, uint32_t shingle_words);
  // Empty when the text has no words.
  std::vector<uint32_t> signature(std::string_view text) const;
  uint32_t permutations() const { return static_cast<uint32_t>(a_.size()); }

 private:
  uint32_t shingle_words_;
  std::vector<uint32_t> a_, b_;
  std::vector<uint64_t> c_;
};

// The share of equal positions: the estimate of the two texts' Jaccard similarity.
double estimated_jaccard(const std::vector<uint32_t>& x, const std::vector<uint32_t>& y);

struct LshBands {
  uint32_t bands = 0, rows = 0;  // bands * rows <= permutations
};

// The bands and rows that minimize the sum of the false positive and false negative
// probability mass around `threshold` (datasketch's choice, equal weights).
LshBands choose_lsh_bands(uint32_t permutations, double threshold);

// The bucket of `signature` in band `band`: XXH3 of the band's rows, seeded by the band.
// Two signatures share the bucket when their keys are equal (one node and several
// nodes use this one function, so they find the same candidates).
uint64_t lsh_band_key(const std::vector<uint32_t>& signature, LshBands bands, uint32_t band);

}  // namespace dseek::data
