// The clean stage's settings (`dseek data prepare --min-chars ...`, docs/data.md): exact
// and near-duplicate removal and the heuristic quality filters, each with its default.
// A limit of 0 (lengths) or 1 (ratios) is off.
#pragma once

#include <cstdint>

namespace dseek::data {

struct CleanSettings {
  bool exact_dedup = true;          // drop a text seen before (XXH3-128 of the text)
  bool near_dedup = true;           // drop a text close to one seen before (MinHash + LSH)
  double near_threshold = 0.8;      // Jaccard similarity of word shingles, in (0, 1]
  uint32_t minhash_permutations = 128;
  uint32_t shingle_words = 5;       // words per shingle
  uint64_t min_chars = 0;           // code points; fewer is too_short (0: off)
  uint64_t max_chars = 0;           // more is too_long (0: off)
  double max_symbol_ratio = 0.5;    // of the non-space characters that are neither
                                    // letters nor digits (1: off)
  double max_digit_ratio = 0.5;     // of the non-space characters that are digits
  double max_repeated_lines = 0.5;  // of the lines of 8 or more non-space characters that
                                    // repeat an earlier line of the document
  uint32_t ratio_min_chars = 32;    // the ratios judge documents with this many non-space
                                    // characters or more (a short text is no evidence)
};

// Throws DataError naming the setting when one is out of range.
void check_clean_settings(const CleanSettings& settings);

}  // namespace dseek::data
