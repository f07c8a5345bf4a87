// The stages' work on pieces (see piece_stages.hpp).
#include "runtime/data/piece_stages.hpp"

#include <xxhash.h>

#include <string>

#include "runtime/data/quality_filter.hpp"
#include "runtime/data/text_decode.hpp"
#include "runtime/data/token_dataset.hpp"
#include "runtime/data/tokenizer.hpp"

namespace dseek::data {

FileDecoder::FileDecoder(const SourceFile& source, uint32_t file, const InputOptions& input,
                         bool repair, bool nfc, uint64_t piece_bytes)
    : source_(source),
      file_(file),
      input_(input),
      repair_(repair),
      nfc_(nfc),
      piece_bytes_(piece_bytes) {}

FileDecoder::~FileDecoder() = default;

// The next document, decoded; false at the end of the file.
bool FileDecoder::read_one(PieceDocument& document) {
  std::string_view text;
  uint64_t line = 0;
  if (!reader_->next(text, line)) return false;
  replaced_ += decode_text(text, repair_, nfc_, document.text);
  document.line = line;
  document.text_bytes = document.text.size();
  std::string key = source_.relative;
  key += '\n';
  key += std::to_string(line);
  document.key_hash = XXH64(key.data(), key.size(), 0);
  return true;
}

Piece FileDecoder::next() {
  Piece piece;
  piece.file = file_;
  piece.number = number_++;
  try {
    if (!reader_) reader_ = std::make_unique<DocumentReader>(source_, input_);
    uint64_t bytes = 0;
    while (bytes < piece_bytes_) {
      PieceDocument document;
      if (ahead_) {
        document = std::move(*ahead_);
        ahead_.reset();
      } else if (!read_one(document)) {
        break;
      }
      bytes += document.text.size();
      piece.documents.push_back(std::move(document));
    }
    // One document ahead: a piece that ends with the file is its last.
    if (!ahead_) {
      PieceDocument document;
      if (read_one(document)) ahead_ = std::move(document);
    }
    if (!ahead_) {
      piece.last = true;
      piece.outcome = reader_->outcome();
    }
    piece.replaced = replaced_;
    replaced_ = 0;
    piece.counts = reader_->counts;
    reader_->counts = {};
    piece.problems = std::move(reader_->problems);
    reader_->problems.clear();
  } catch (const DataError& error) {
    piece.documents.clear();
    if (input_.strict) {
      piece.fatal = error.what();
    } else {
      piece.problems.push_back(std::string("skipping unreadable ") + error.what());
    }
    piece.last = true;
    piece.outcome = FileOutcome::unreadable;
  }
  if (piece.last) {
    done_ = true;
    reader_.reset();
  }
  return piece;
}

void clean_piece(Piece& piece, const CleanSettings& settings, const MinHasher& hasher) {
  for (PieceDocument& document : piece.documents) {
    document.drop = quality_verdict(document.text, settings);
    if (document.drop != DropReason::kept) continue;
    const XXH128_hash_t hash = XXH3_128bits(document.text.data(), document.text.size());
    document.hash_low = hash.low64;
    document.hash_high = hash.high64;
    if (settings.near_dedup) document.signature = hasher.signature(document.text);
  }
}

DedupStage::DedupStage(const CleanSettings& settings, uint64_t max_bytes, bool keep_signatures)
    : index_(settings), max_bytes_(max_bytes), keep_signatures_(keep_signatures) {}

void DedupStage::apply(Piece& piece) {
  if (piece.number == 0) file_mark_ = mark();
  for (PieceDocument& document : piece.documents) {
    if (piece.cached) {  // decided by the run that cached it: remember what it kept
      if (document.drop != DropReason::kept) continue;
      index_.remember(document);
      taken_ += document.text_bytes;
      continue;
    }
    if (document.drop != DropReason::kept) continue;
    if (limit_reached()) {
      document.drop = DropReason::beyond_max_bytes;
      continue;
    }
    document.drop = index_.check_and_insert(document);
    if (document.drop != DropReason::kept) continue;
    if (max_bytes_ != 0 && taken_ + document.text.size() > max_bytes_) {
      document.text.resize(max_bytes_ - taken_);  // cut at the limit
      document.text_bytes = document.text.size();
    }
    taken_ += document.text.size();
    if (!keep_signatures_) document.signature = {};  // no longer needed
  }
  if (limit_reached()) piece.limit_reached = true;
  if (piece.last && file_dropped(piece.outcome)) rollback(file_mark_);  // none of its documents
}

void DedupStage::rollback(const Mark& mark) {
  index_.rollback(mark.index);
  taken_ = mark.taken;
}

void tokenize_piece(Piece& piece, const Tokenizer& tokenizer) {
  for (PieceDocument& document : piece.documents) {
    if (document.drop == DropReason::kept) {
      document.tokens.clear();
      tokenizer.encode(document.text, document.tokens);
      if (document.tokens.empty()) document.drop = DropReason::empty;
    }
    document.text = {};
  }
}

void augment_piece(Piece& piece, const FimSettings& settings, const FimTokens& sentinels) {
  for (PieceDocument& document : piece.documents) {
    if (document.drop != DropReason::kept) continue;
    document.fim = apply_fim(document.tokens, document.key_hash, settings, sentinels);
  }
}

}  // namespace dseek::data
