// A piece of `dseek data prepare`'s pipeline: a run of consecutive documents of one input
// file (at most PrepareOptions::piece_bytes of text, or one larger document), as it goes
// through decode, clean, dedup, tokenize, augment and write. Pieces are numbered per file,
// so (file, number) is their place in the corpus: the in-order stages (dedup, write) take
// them in that order, whatever the number of workers, and the output is the same.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/input_documents.hpp"

namespace dseek::data {

// Why a document is not in the data set (kept: it is). Each has its counter in the
// summary and the report.
enum class DropReason : uint8_t {
  kept,
  empty,            // no text, or no tokens
  too_short,        // clean.min_chars
  too_long,         // clean.max_chars
  symbol_ratio,     // clean.max_symbol_ratio
  digit_ratio,      // clean.max_digit_ratio
  repeated_lines,   // clean.max_repeated_lines
  exact_duplicate,  // the same text as an earlier document
  near_duplicate,   // MinHash Jaccard estimate >= clean.near_threshold with an earlier one
  beyond_max_bytes, // after --max-bytes was reached
};
inline constexpr size_t kDropReasons = 10;
// "kept", "empty", "too_short", ... (the report's keys).
const char* drop_reason_name(DropReason reason);

struct PieceDocument {
  std::string text;             // decoded: UTF-8 repaired, NFC; released once tokenized
  uint64_t line = 0;            // 0 for a whole file, else its 1-based line
  uint64_t text_bytes = 0;      // of the decoded text
  uint64_t key_hash = 0;        // XXH64 of "relative path\nline": decides the split
  DropReason drop = DropReason::kept;
  uint64_t hash_low = 0, hash_high = 0;  // XXH3-128 of the text (exact dedup)
  std::vector<uint32_t> signature;       // MinHash (near dedup); empty: no words
  std::vector<uint32_t> tokens;
  bool fim = false;             // rearranged by fill-in-the-middle
};

struct Piece {
  uint32_t file = 0;     // index in the listing
  uint32_t number = 0;   // within the file
  bool last = false;     // the file's last piece: `outcome` is the file's
  bool limit_reached = false;  // --max-bytes was reached in this piece: nothing after it
  bool cached = false;   // from the prepare cache: straight to dedup (replayed) and write
  FileOutcome outcome = FileOutcome::taken;
  std::vector<PieceDocument> documents;
  std::vector<std::string> problems;  // log lines: skipped lines, a damaged file
  InputCounts counts;                 // this piece's skipped lines (and damage)
  uint64_t replaced = 0;              // invalid UTF-8 sequences replaced by U+FFFD
  std::string fatal;                  // an error that ends the run (--strict)
  double work_seconds = 0;            // the last stage's time on it (the report)

  // What the piece holds in memory (text, tokens, signatures), for the bound.
  uint64_t bytes() const;
};

}  // namespace dseek::data
