// Exact and near-duplicate detection (see dedup_index.hpp).
#include "runtime/data/dedup_index.hpp"

#include <xxhash.h>

#include <string>

#include "runtime/data/token_dataset.hpp"

namespace dseek::data {

void check_clean_settings(const CleanSettings& s) {
  auto fail = [](const std::string& what) { throw DataError("clean setting " + what); };
  if (!(s.near_threshold > 0.0 && s.near_threshold <= 1.0)) {
    fail("--near-threshold must be in (0, 1], not " + std::to_string(s.near_threshold));
  }
  if (s.minhash_permutations < 1 || s.minhash_permutations > 1024) {
    fail("--minhash-permutations must be in [1, 1024], not " +
         std::to_string(s.minhash_permutations));
  }
  if (s.shingle_words < 1) fail("--shingle-words must be at least 1");
  for (auto [name, value] : {std::pair{"--max-symbol-ratio", s.max_symbol_ratio},
                             std::pair{"--max-digit-ratio", s.max_digit_ratio},
                             std::pair{"--max-repeated-lines", s.max_repeated_lines}}) {
    if (!(value >= 0.0 && value <= 1.0)) {
      fail(std::string(name) + " must be in [0, 1], not " + std::to_string(value));
    }
  }
  if (s.max_chars != 0 && s.max_chars < s.min_chars) {
    fail("--max-chars (" + std::to_string(s.max_chars) + ") is below --min-chars (" +
         std::to_string(s.min_chars) + ")");
  }
}

DedupIndex::DedupIndex(const CleanSettings& settings)
    : settings_(settings),
      bands_(choose_lsh_bands(settings.minhash_permutations, settings.near_threshold)),
      buckets_(bands_.bands) {}

uint64_t DedupIndex::band_key(const std::vector<uint32_t>& signature, uint32_t band) const {
  return lsh_band_key(signature, bands_, band);
}

DropReason DedupIndex::check_and_insert(const PieceDocument& document) {
  const Hash128 hash{document.hash_low, document.hash_high};
  if (settings_.exact_dedup && exact_.contains(hash)) return DropReason::exact_duplicate;
  const bool near = settings_.near_dedup && !document.signature.empty();
  if (near) {
    // The candidates share a band; the first (lowest id) that is close enough decides.
    uint32_t found = UINT32_MAX;
    for (uint32_t band = 0; band < bands_.bands; ++band) {
      auto bucket = buckets_[band].find(band_key(document.signature, band));
      if (bucket == buckets_[band].end()) continue;
      for (uint32_t id : bucket->second) {
        if (id >= found) break;
        if (estimated_jaccard(document.signature, signatures_[id]) >= settings_.near_threshold) {
          found = id;
          break;
        }
      }
    }
    if (found != UINT32_MAX) return DropReason::near_duplicate;
  }
  remember(document);
  return DropReason::kept;
}

void DedupIndex::remember(const PieceDocument& document) {
  const Hash128 hash{document.hash_low, document.hash_high};
  if (settings_.exact_dedup) {
    exact_.insert(hash);
    exact_log_.push_back(hash);
  }
  if (settings_.near_dedup && !document.signature.empty()) {
    const auto id = static_cast<uint32_t>(signatures_.size());
    signatures_.push_back(document.signature);
    for (uint32_t band = 0; band < bands_.bands; ++band) {
      buckets_[band][band_key(document.signature, band)].push_back(id);
    }
  }
}

void DedupIndex::rollback(const Mark& mark) {
  while (exact_log_.size() > mark.exact) {
    exact_.erase(exact_log_.back());
    exact_log_.pop_back();
  }
  while (signatures_.size() > mark.near) {
    const std::vector<uint32_t>& signature = signatures_.back();
    for (uint32_t band = 0; band < bands_.bands; ++band) {
      auto bucket = buckets_[band].find(band_key(signature, band));
      bucket->second.pop_back();  // the last id of every bucket it is in
      if (bucket->second.empty()) buckets_[band].erase(bucket);
    }
    signatures_.pop_back();
  }
}

}  // namespace dseek::data
