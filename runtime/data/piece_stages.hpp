// The work of each stage of `dseek data prepare` on one piece (piece.hpp), as pure
// functions and small state machines; the actors of actors/data/ call them.
//   decode:   FileDecoder reads a file's documents piece by piece (repair, NFC)
//   clean:    clean_piece drops by the quality filters, hashes and signs the rest
//   dedup:    DedupStage drops exact and near duplicates in corpus order, --max-bytes
//   tokenize: tokenize_piece
//   augment:  augment_piece (fill-in-the-middle)
//   write:    dataset_builder.hpp
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "runtime/data/dedup_index.hpp"
#include "runtime/data/minhash.hpp"
#include "runtime/data/prepare.hpp"

namespace dseek::data {

class Tokenizer;

// Reads file `file` (its index in the listing) piece by piece: pieces end after
// `piece_bytes` of decoded text. The same file gives the same pieces every time.
class FileDecoder {
 public:
  FileDecoder(const SourceFile& source, uint32_t file, const InputOptions& input, bool repair,
              bool nfc, uint64_t piece_bytes);
  ~FileDecoder();
  // The next piece; its `last` is set on the file's last one. A file that cannot be
  // opened or read gives one last piece with FileOutcome::unreadable (under strict,
  // `fatal` says why instead).
  Piece next();
  uint32_t pieces() const { return number_; }
  bool done() const { return done_; }

 private:
  const SourceFile& source_;
  uint32_t file_;
  const InputOptions& input_;
  bool repair_, nfc_;
  uint64_t piece_bytes_;
  bool read_one(PieceDocument& document);

  std::unique_ptr<DocumentReader> reader_;
  std::optional<PieceDocument> ahead_;  // read to know whether the piece is the last
  uint32_t number_ = 0;
  uint64_t replaced_ = 0;  // by the documents read since the last piece
  bool done_ = false;
};

// The quality verdict of every document; hashes and MinHash signatures of those kept.
void clean_piece(Piece& piece, const CleanSettings& settings, const MinHasher& hasher);

// The in-order part of clean: exact and near duplicates against every document before
// (the earliest of a group is kept), and the --max-bytes limit (the document that
// reaches it is cut there, every later one dropped). The pieces of a damaged file are
// forgotten once its last piece tells.
class DedupStage {
 public:
  // `keep_signatures`: the writer caches them (--cache).
  DedupStage(const CleanSettings& settings, uint64_t max_bytes, bool keep_signatures = false);
  void apply(Piece& piece);
  // Undo the piece being applied when its actor crashed half way.
  struct Mark {
    DedupIndex::Mark index;
    uint64_t taken = 0;
  };
  Mark mark() const { return {index_.mark(), taken_}; }
  void rollback(const Mark& mark);
  bool limit_reached() const { return max_bytes_ != 0 && taken_ >= max_bytes_; }
  const DedupIndex& index() const { return index_; }

 private:
  DedupIndex index_;
  uint64_t max_bytes_;
  bool keep_signatures_;
  uint64_t taken_ = 0;  // text bytes kept
  Mark file_mark_;      // at the start of the current file
};

// Tokens of every kept document; the texts are released. A document without tokens is
// dropped as empty.
void tokenize_piece(Piece& piece, const Tokenizer& tokenizer);

// Fill-in-the-middle on the kept documents chosen by `settings`.
void augment_piece(Piece& piece, const FimSettings& settings, const FimTokens& sentinels);

}  // namespace dseek::data
