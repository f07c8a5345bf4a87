// Exact deduplication partitioned by hash across the nodes of `dseek data prepare`
// (prepare_nodes.hpp). Every unit of work's part gets a summary, OUT/.parts/<key>.hashes:
// how the unit ended (its FileOutcome) and, per document that passed clean, its ordinal
// in the unit and its XXH3-128. Node p of N then reads every summary, in corpus order,
// and keeps only the hashes whose low 64 bits are p modulo N: the first document of each
// such hash is the one kept, every later one is written to OUT/.parts/dups-<p>.list
// with the place of that first one. So each node holds 1/N of the hashes, a duplicate
// on two nodes is caught by the node of its hash, and node 0's merge reads the N lists
// in step with the corpus instead of holding any hash. A file that ends damaged,
// unreadable or binary counts none of its documents, as on one node.
#pragma once

#include <compare>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/input_documents.hpp"

namespace dseek::data {

struct DocPosition {
  uint64_t unit = 0, ordinal = 0;  // the unit of work, the document within it
  bool operator==(const DocPosition&) const = default;
  auto operator<=>(const DocPosition&) const = default;
};

// Writes <key>.hashes from the part <key>.piece (unless it is there); throws DataError.
void write_unit_summary(const std::filesystem::path& parts, const std::string& key);
// How the unit ended, from its summary.
FileOutcome read_unit_outcome(const std::filesystem::path& parts, const std::string& key);
// A file's outcome from its units' (every byte range of it): dropped if one is, taken
// if one is, else empty.
FileOutcome combined_outcome(const std::vector<FileOutcome>& outcomes);

inline uint32_t hash_partition(uint64_t hash_low, uint32_t partitions) {
  return static_cast<uint32_t>(hash_low % partitions);
}

// Decides partition `partition` of `partitions` over every unit (keys in corpus order,
// unit_file: each unit's file) and writes dups-<partition>.list; the number of hashes
// held.
uint64_t decide_partition(const std::filesystem::path& parts, const std::vector<std::string>& keys,
                          const std::vector<uint32_t>& unit_file, uint32_t partition,
                          uint32_t partitions);

// The N lists read in step with the corpus: positions must be asked in corpus order
// (one not asked is passed over: the band partition asks only for documents with a
// signature).
class DuplicateLists {
 public:
  DuplicateLists(const std::filesystem::path& parts, uint32_t partitions);
  // Whether the document at `at` is a later copy; then `first` is the first one's place.
  bool duplicate(const DocPosition& at, DocPosition& first);

 private:
  struct List {
    std::filesystem::path path;
    std::unique_ptr<std::ifstream> in;
    bool has = false;
    DocPosition at, first;
    void advance();
  };
  std::vector<List> lists_;
};

}  // namespace dseek::data
