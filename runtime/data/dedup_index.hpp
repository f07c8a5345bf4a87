// The dedup stage's memory of the corpus: the XXH3-128 hashes of the texts kept so far
// (exact duplicates) and their MinHash signatures in LSH bands (near duplicates: an
// earlier text whose estimated Jaccard similarity reaches the threshold). Documents go
// through it in corpus order, so the first of a group is the one kept. A mark and a
// rollback undo the documents of a file that turned out damaged (or of a piece whose
// actor crashed half way).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/data/clean_settings.hpp"
#include "runtime/data/minhash.hpp"
#include "runtime/data/piece.hpp"

namespace dseek::data {

class DedupIndex {
 public:
  explicit DedupIndex(const CleanSettings& settings);

  // exact_duplicate, near_duplicate, or kept (and then remembered).
  DropReason check_and_insert(const PieceDocument& document);
  // Remembers a document kept before (from the prepare cache) without a check.
  void remember(const PieceDocument& document);

  struct Mark {
    size_t exact = 0, near = 0;
  };
  Mark mark() const { return {exact_log_.size(), signatures_.size()}; }
  // Forgets every document remembered after `mark`.
  void rollback(const Mark& mark);

  LshBands bands() const { return bands_; }
  // What it holds: the exact hashes and the near signatures remembered.
  uint64_t hashes_held() const { return exact_.size(); }
  uint64_t signatures_held() const { return signatures_.size(); }

 private:
  struct Hash128 {
    uint64_t low, high;
    bool operator==(const Hash128&) const = default;
  };
  struct Hash128Hasher {
    size_t operator()(const Hash128& h) const { return h.low ^ (h.high * 0x9E3779B97F4A7C15ull); }
  };
  uint64_t band_key(const std::vector<uint32_t>& signature, uint32_t band) const;

  CleanSettings settings_;
  LshBands bands_;
  std::unordered_set<Hash128, Hash128Hasher> exact_;
  std::vector<Hash128> exact_log_;
  std::vector<std::unordered_map<uint64_t, std::vector<uint32_t>>> buckets_;  // per band
  std::vector<std::vector<uint32_t>> signatures_;  // of the remembered documents
};

}  // namespace dseek::data
