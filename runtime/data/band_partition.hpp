// Near dedup (MinHash + LSH) partitioned by LSH band across the nodes of `dseek data
// prepare` (prepare_nodes.hpp). Every unit's part gets its signatures,
// OUT/.parts/<key>.minhash: one fixed-size record per document of the unit, so a
// signature is read back by its place. Node p of N then reads every unit's signatures in
// corpus order (skipping the exact duplicates, from the dups lists, and the files that
// are dropped whole) and holds the buckets of its bands only, the bands b with b modulo
// N == p: per document it writes to OUT/.parts/near-<p>.list the earlier documents that
// share one of its buckets (kept or not: it cannot know; places only). Node 0 reads the
// N lists in step with the corpus, keeps one bit per document (kept or not) and reads
// back the signatures of the kept candidates to compare: the same decisions as one node
// (which compares with every kept document sharing a bucket), in the same order, while
// no node holds every signature.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/clean_settings.hpp"
#include "runtime/data/hash_partition.hpp"

namespace dseek::data {

// Writes <key>.minhash from the part <key>.piece (unless it is there); throws DataError.
// A document has a signature there when it passed clean and has words.
void write_unit_signatures(const std::filesystem::path& parts, const std::string& key,
                           uint32_t permutations);

// A place packed into 64 bits (unit, ordinal: each below 2^32, else DataError).
uint64_t packed_position(const DocPosition& at);
DocPosition unpacked_position(uint64_t packed);

// The bands that node `node` of `nodes` owns of `bands` (b modulo nodes == node).
std::vector<uint32_t> owned_bands(uint32_t bands, uint32_t node, uint32_t nodes);

// Node `node`'s share: the candidate lists of its bands over every unit (keys in corpus
// order, unit_file: each unit's file), written to near-<node>.list; the number of
// bucket entries it held (a document once per band it owns).
uint64_t decide_bands(const std::filesystem::path& parts, const std::vector<std::string>& keys,
                      const std::vector<uint32_t>& unit_file, const CleanSettings& settings,
                      uint32_t node, uint32_t nodes);

// The N candidate lists read in step with the corpus: the documents with a signature
// that are not exact duplicates must be asked in corpus order, each once.
class NearCandidateLists {
 public:
  NearCandidateLists(const std::filesystem::path& parts, uint32_t partitions);
  // The earlier documents sharing a bucket with the one at `at` (packed, ascending, each
  // once), into `candidates` (cleared first).
  void candidates(const DocPosition& at, std::vector<uint64_t>& candidates);

 private:
  struct List {
    std::filesystem::path path;
    std::unique_ptr<std::ifstream> in;
    bool has = false;
    uint64_t at = 0;
    uint32_t count = 0;
    void advance();
  };
  std::vector<List> lists_;
};

// Signatures read back from the units' .minhash files by place (a few files open).
class PartSignatures {
 public:
  PartSignatures(const std::filesystem::path& parts, const std::vector<std::string>& keys,
                 uint32_t permutations);
  // The signature of the document at `at`; DataError when it has none there.
  void read(const DocPosition& at, std::vector<uint32_t>& signature);
  uint64_t reads() const { return reads_; }

 private:
  std::filesystem::path parts_;
  const std::vector<std::string>& keys_;
  uint32_t permutations_;
  std::map<uint64_t, std::ifstream> open_;
  uint64_t reads_ = 0;
};

}  // namespace dseek::data
