// The write stage (see dataset_builder.hpp): the first pass's bookkeeping per piece, then
// the split by tokens and the second pass from the token file into the shards, whose
// headers are written up front; the output is a pure function of the pieces in order.
#include "runtime/data/dataset_builder.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "runtime/data/mapped_file.hpp"
#include "runtime/data/split_writer.hpp"
#include "runtime/data/token_dataset.hpp"
#include "runtime/data/tokenizer.hpp"

namespace dseek::data {
namespace {

struct SplitPlan {
  uint64_t documents = 0, tokens = 0;
  void add(uint64_t count) {
    if (count == 0) return;
    tokens += count + (documents > 0 ? 1 : 0);  // a separator between documents
    ++documents;
  }
};

void add_counts(PrepareSummary& to, const PrepareSummary& from) {
  for (size_t i = 0; i < kDropReasons; ++i) to.dropped[i] += from.dropped[i];
  to.documents_in += from.documents_in;
  to.input_bytes += from.input_bytes;
  to.read_bytes += from.read_bytes;
  to.replaced_sequences += from.replaced_sequences;
  to.fim_documents += from.fim_documents;
}

}  // namespace

DatasetBuilder::DatasetBuilder(const PrepareOptions& options, const Tokenizer& tokenizer,
                               std::filesystem::path source_dir)
    : options_(options),
      tokenizer_(tokenizer),
      source_dir_(std::move(source_dir)),
      spill_(options.output / ".tokens.tmp") {}

void DatasetBuilder::add(const Piece& piece) {
  if (piece.number == 0) {
    file_ = {};
    file_tokens_ = spill_.size();
    file_documents_ = documents_.size();
  }
  ++summary_.pieces;
  summary_.malformed_lines += piece.counts.malformed_lines;
  summary_.missing_field_lines += piece.counts.missing_field_lines;
  file_.replaced_sequences += piece.replaced;
  for (const PieceDocument& document : piece.documents) {
    ++file_.documents_in;
    file_.read_bytes += document.text_bytes;
    ++file_.dropped[static_cast<size_t>(document.drop)];
    if (document.drop != DropReason::kept) continue;
    file_.input_bytes += document.text_bytes;
    file_.fim_documents += document.fim;
    documents_.push_back({spill_.size(), document.tokens.size(), document.key_hash});
    spill_.append(document.tokens.data(), document.tokens.size());
  }
  if (!piece.last && !piece.limit_reached) return;
  switch (piece.outcome) {
    case FileOutcome::damaged:
    case FileOutcome::unreadable:
    case FileOutcome::binary:  // none of the file's documents
      ++(piece.outcome == FileOutcome::damaged      ? summary_.damaged_files
         : piece.outcome == FileOutcome::unreadable ? summary_.unreadable_files
                                                    : summary_.binary_files);
      spill_.truncate(file_tokens_);
      documents_.resize(file_documents_);
      file_ = {};
      return;
    case FileOutcome::empty: ++summary_.empty_files; break;
    case FileOutcome::taken: break;
  }
  add_counts(summary_, file_);
  file_ = {};
}

void DatasetBuilder::rollback(const Mark& mark) {
  spill_.truncate(mark.tokens);
  documents_.resize(mark.documents);
  summary_ = mark.summary;
  file_ = mark.file;
}

PrepareSummary DatasetBuilder::finish() {
  spill_.finish();
  PrepareSummary summary = summary_;
  summary.empty_documents = summary.dropped[static_cast<size_t>(DropReason::empty)];
  summary.skipped_files = summary.unreadable_files + summary.empty_files + summary.binary_files +
                          summary.damaged_files;
  if (documents_.empty()) {
    std::string reasons;
    for (size_t i = 1; i < kDropReasons; ++i) {
      if (summary.dropped[i] == 0) continue;
      reasons += reasons.empty() ? ": " : ", ";
      reasons += std::to_string(summary.dropped[i]);
      reasons += ' ';
      reasons += drop_reason_name(static_cast<DropReason>(i));
    }
    throw DataError("no documents under " + source_dir_.string() + " (" +
                    std::to_string(summary.skipped_files) + " files skipped, " +
                    std::to_string(summary.documents_in) + " documents read, all dropped" +
                    reasons + ")");
  }
  // The split rule: documents in the order of their key's hash give validation their
  // tokens until it holds round(val_fraction x all tokens); the document that reaches
  // the share is cut there (its start in validation, its rest in train). The share is
  // exact, and a document moves only when documents before it in hash order change.
  const uint64_t total = spill_.size();
  uint64_t target =
      static_cast<uint64_t>(std::llround(options_.val_fraction * static_cast<double>(total)));
  if (total > 0) target = std::min(target, total - 1);  // training always gets data
  std::vector<size_t> order(documents_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return documents_[a].key_hash != documents_[b].key_hash
               ? documents_[a].key_hash < documents_[b].key_hash
               : a < b;
  });
  uint64_t taken = 0;
  for (size_t i : order) {
    if (taken == target) break;
    documents_[i].val_tokens = std::min(documents_[i].tokens, target - taken);
    taken += documents_[i].val_tokens;
  }
  summary.content_tokens = total;
  summary.val_content_tokens = taken;

  SplitPlan train_plan, val_plan;
  for (const Document& document : documents_) {
    val_plan.add(document.val_tokens);
    train_plan.add(document.tokens - document.val_tokens);
  }
  const uint32_t vocab = dataset_vocab(tokenizer_, options_.fim);
  const TokenDtype dtype = dtype_for_vocab(vocab);
  SplitWriter train(options_.output, "train", train_plan.tokens, options_.shard_tokens, dtype,
                    tokenizer_.separator());
  SplitWriter validation(options_.output, "val", val_plan.tokens, options_.shard_tokens, dtype,
                         tokenizer_.separator());
  {
    const MappedFile tokens = MappedFile::open(spill_.path());
    const auto* all = reinterpret_cast<const uint32_t*>(tokens.bytes().data());
    for (const Document& document : documents_) {
      if (document.val_tokens > 0) validation.append_document(all + document.first, document.val_tokens);
      if (document.tokens > document.val_tokens) {
        train.append_document(all + document.first + document.val_tokens,
                              document.tokens - document.val_tokens);
      }
    }
  }

  DatasetIndex index;
  index.tokenizer = tokenizer_.name();
  index.tokenizer_sha256 = tokenizer_.files_sha256();
  index.vocab_size = vocab;
  index.token_dtype = dtype;
  index.separator_token = tokenizer_.separator();
  index.source_dir = source_dir_.string();
  index.input_bytes = summary.input_bytes;
  index.skipped_files = summary.skipped_files;
  index.skipped_records = summary.malformed_lines + summary.missing_field_lines;
  index.val_fraction = options_.val_fraction;
  index.train = train.finish();
  index.validation = validation.finish();
  write_dataset_index(options_.output, index);

  summary.documents = documents_.size();
  summary.train_documents = index.train.documents;
  summary.val_documents = index.validation.documents;
  summary.train_tokens = index.train.tokens;
  summary.val_tokens = index.validation.tokens;
  summary.shards = index.train.shards.size() + index.validation.shards.size();
  summary.vocab_size = vocab;
  summary.tokenizer = tokenizer_.name();
  return summary;
}

}  // namespace dseek::data
