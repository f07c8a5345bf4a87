// The content-addressed cache of `dseek data prepare --cache DIR`: per input file, the
// pieces as the writer took them (tokens after FIM, every document's drop reason) and
// what the dedup stage remembered of them (hashes, signatures). Dedup depends on every
// document before, so a file's entry is named by a chain key: the hash of the previous
// file's key, the settings that shape the output, and the file's own bytes. A rerun
// over unchanged inputs finds every key and goes from the cache to the writer; a
// changed file misses from there on; a run killed half way (kill -9) left the entries
// of the files it had finished, and the rerun reuses them: the same output.
// Entries are written as <key>.tmp and renamed when the file is complete.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/piece.hpp"
#include "runtime/data/prepare.hpp"
#include "runtime/data/source_files.hpp"

namespace dseek::data {

class Tokenizer;

// The chain keys of the files (hex), reading every file once (an unreadable file is
// hashed as its name alone: its outcome is cached as any other).
std::vector<std::string> cache_keys(const PrepareOptions& options, const Tokenizer& tokenizer,
                                    const SourceListing& listing);

// The keys of a node's parts (prepare_nodes.hpp): per file, not chained (a part is the
// file's pieces before dedup, which depends on nothing before it), and the fingerprint
// every node of a run must share (the settings, the node count, the file list). The
// listing is the units of work (work_units.hpp): a byte range's key has its range.
std::vector<std::string> part_keys(const PrepareOptions& options, const Tokenizer& tokenizer,
                                   const SourceListing& listing);
std::string part_fingerprint(const PrepareOptions& options, const Tokenizer& tokenizer,
                             const SourceListing& listing);

// Appends a file's pieces to its entry; commit() makes it visible.
class CacheEntryWriter {
 public:
  CacheEntryWriter(const std::filesystem::path& dir, const std::string& key);
  ~CacheEntryWriter();  // without commit(): the .tmp is removed
  void append(const Piece& piece);
  void commit();

 private:
  std::filesystem::path tmp_, final_;
  std::ofstream out_;
  bool committed_ = false;
};

// Reads an entry's pieces in order; throws DataError when it is damaged.
class CacheEntryReader {
 public:
  CacheEntryReader(const std::filesystem::path& dir, const std::string& key);
  Piece next();  // marked cached; its `last` ends the entry
 private:
  std::filesystem::path path_;
  std::ifstream in_;
};

bool cache_has(const std::filesystem::path& dir, const std::string& key);

}  // namespace dseek::data
