// `dseek data prepare` (see prepare.hpp). The first pass reads, decodes and tokenizes
// every document into a temporary token file; the split is then fixed by tokens, and
// the second pass copies each document's tokens into its split's shards, whose headers
// are written up front; the output is a pure function of the input. The index is
// written last: without it the directory is not a data set, so an interrupted run is
// never mistaken for a finished one.
#include "runtime/data/prepare.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <system_error>
#include <vector>

#include "runtime/data/dataset_index.hpp"
#include "runtime/data/mapped_file.hpp"
#include "runtime/data/split_writer.hpp"
#include "runtime/data/token_dataset.hpp"
#include "runtime/data/token_spill.hpp"
#include "runtime/data/tokenizer.hpp"

namespace dseek::data {
namespace {

struct Document {
  uint64_t first;       // in the token file
  uint64_t tokens;
  uint64_t key_hash;    // of "relative path\nline": decides the split
  uint64_t val_tokens = 0;  // its first val_tokens tokens go to validation
};

void check_options(const PrepareOptions& options) {
  if (!(options.val_fraction >= 0.0 && options.val_fraction < 1.0)) {
    throw DataError("validation fraction must be in [0, 1), not " +
                    std::to_string(options.val_fraction));
  }
  if (options.shard_tokens == 0) throw DataError("shard size must be at least one token");
  if (options.input_options.jsonl_field.empty()) throw DataError("the JSONL field name is empty");
}

// The output must not hold anything: refusing is what protects an existing data set
// (or any other directory) from being mixed with a new one.
void create_output(const std::filesystem::path& output) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (fs::exists(output, error)) {
    if (!fs::is_directory(output, error)) {
      throw DataError("output " + output.string() + " exists and is not a directory");
    }
    if (!fs::is_empty(output, error)) {
      throw DataError("output directory " + output.string() + " is not empty");
    }
  }
  fs::create_directories(output, error);
  if (error) {
    throw DataError("cannot create output directory " + output.string() + ": " +
                    error.message());
  }
}

// The split rule: documents in the order of their key's hash give validation their
// tokens until it holds round(val_fraction x all tokens); the document that reaches the
// share is cut there (its start in validation, its rest in train). The share is exact,
// and a document moves only when documents before it in hash order change.
uint64_t assign_splits(std::vector<Document>& documents, double val_fraction, uint64_t total) {
  uint64_t target = static_cast<uint64_t>(std::llround(val_fraction * static_cast<double>(total)));
  if (total > 0) target = std::min(target, total - 1);  // training always gets data
  std::vector<size_t> order(documents.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return documents[a].key_hash != documents[b].key_hash
               ? documents[a].key_hash < documents[b].key_hash
               : a < b;
  });
  uint64_t taken = 0;
  for (size_t i : order) {
    if (taken == target) break;
    documents[i].val_tokens = std::min(documents[i].tokens, target - taken);
    taken += documents[i].val_tokens;
  }
  return taken;
}

struct SplitPlan {
  uint64_t documents = 0, tokens = 0;
  void add(uint64_t count) {
    if (count == 0) return;
    tokens += count + (documents > 0 ? 1 : 0);  // a separator between documents
    ++documents;
  }
};

}  // namespace

namespace {

PrepareSummary prepare_into_output(const PrepareOptions& options,
                                   const std::filesystem::path& input, const Tokenizer& tokenizer,
                                   const SourceListing& listing, std::ostream& log);

// Removes what a failed preparation wrote into the output (which was empty before).
void clear_output(const std::filesystem::path& output) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(output, error)) {
    std::filesystem::remove_all(entry.path(), error);
  }
}

}  // namespace

PrepareSummary prepare_text_dataset(const PrepareOptions& options, std::ostream& log) {
  check_options(options);
  std::filesystem::path input = std::filesystem::absolute(options.input).lexically_normal();
  // "dir/" and "dir" are the same input and must give the same index.
  if (!input.has_filename() && input.has_parent_path()) input = input.parent_path();
  const std::unique_ptr<Tokenizer> tokenizer = open_tokenizer(options.tokenizer);
  const SourceListing listing = list_source_files(input, options.filter);
  log << "data prepare: " << listing.files.size() << " files under " << input.string() << " ("
      << listing.hidden << " hidden or version-control files and " << listing.filtered
      << " left out by --include/--exclude), tokenizer " << tokenizer->name() << "\n";
  create_output(options.output);
  try {
    return prepare_into_output(options, input, *tokenizer, listing, log);
  } catch (...) {
    clear_output(options.output);
    throw;
  }
}

namespace {

PrepareSummary prepare_into_output(const PrepareOptions& options,
                                   const std::filesystem::path& input, const Tokenizer& tokenizer,
                                   const SourceListing& listing, std::ostream& log) {
  PrepareSummary summary;
  summary.hidden_files = listing.hidden;
  summary.filtered_files = listing.filtered;
  InputCounts counts;
  InputOptions input_options = options.input_options;
  input_options.reject_nul_in_lines = tokenizer.kind() == TokenizerKind::bytes;
  std::vector<Document> documents;
  TokenSpill spill(options.output / ".tokens.tmp");
  std::vector<uint32_t> ids;
  std::string key;
  for (const SourceFile& file : listing.files) {
    if (options.max_bytes != 0 && summary.input_bytes >= options.max_bytes) break;
    const uint64_t spill_mark = spill.size(), bytes_mark = summary.input_bytes;
    const size_t documents_mark = documents.size();
    const uint64_t empty_mark = summary.empty_documents;
    FileOutcome outcome = FileOutcome::taken;
    bool in_sink = false;  // an error while tokenizing or spilling is not the file's
    try {
      outcome = read_documents(
          file, input_options, counts, log, [&](std::string_view text, uint64_t line) {
            in_sink = true;
            if (options.max_bytes != 0) {
              if (summary.input_bytes >= options.max_bytes) {
                in_sink = false;
                return;
              }
              text = text.substr(0, options.max_bytes - summary.input_bytes);
            }
            ids.clear();
            tokenizer.encode(text, ids);
            if (ids.empty()) {
              ++summary.empty_documents;
              in_sink = false;
              return;
            }
            summary.input_bytes += text.size();
            key = file.relative;
            key += '\n';
            key += std::to_string(line);
            documents.push_back({spill.size(), ids.size(), XXH64(key.data(), key.size(), 0)});
            spill.append(ids.data(), ids.size());
            in_sink = false;
          });
    } catch (const DataError& error) {
      if (options.input_options.strict || in_sink) throw;
      log << "data prepare: skipping unreadable " << error.what() << "\n";
      outcome = FileOutcome::unreadable;
      ++summary.unreadable_files;
    }
    if (outcome == FileOutcome::damaged || outcome == FileOutcome::unreadable) {
      // none of the file's documents
      spill.truncate(spill_mark);
      documents.resize(documents_mark);
      summary.input_bytes = bytes_mark;
      summary.empty_documents = empty_mark;
    }
    if (outcome == FileOutcome::empty) ++summary.empty_files;
    if (outcome == FileOutcome::binary) ++summary.binary_files;
  }
  spill.finish();
  summary.damaged_files = counts.damaged_files;
  summary.malformed_lines = counts.malformed_lines;
  summary.missing_field_lines = counts.missing_field_lines;
  summary.skipped_files = summary.unreadable_files + summary.empty_files + summary.binary_files +
                          summary.damaged_files;
  if (documents.empty()) {
    throw DataError("no documents under " + input.string() + " (" +
                    std::to_string(summary.skipped_files) + " files skipped)");
  }
  summary.content_tokens = spill.size();
  summary.val_content_tokens = assign_splits(documents, options.val_fraction, spill.size());

  SplitPlan train_plan, val_plan;
  for (const Document& document : documents) {
    val_plan.add(document.val_tokens);
    train_plan.add(document.tokens - document.val_tokens);
  }
  const TokenDtype dtype = dtype_for_vocab(tokenizer.vocab_size());
  SplitWriter train(options.output, "train", train_plan.tokens, options.shard_tokens, dtype,
                    tokenizer.separator());
  SplitWriter validation(options.output, "val", val_plan.tokens, options.shard_tokens, dtype,
                         tokenizer.separator());
  {
    const MappedFile tokens = MappedFile::open(spill.path());
    const auto* all = reinterpret_cast<const uint32_t*>(tokens.bytes().data());
    for (const Document& document : documents) {
      if (document.val_tokens > 0) validation.append_document(all + document.first, document.val_tokens);
      if (document.tokens > document.val_tokens) {
        train.append_document(all + document.first + document.val_tokens,
                              document.tokens - document.val_tokens);
      }
    }
  }

  DatasetIndex index;
  index.tokenizer = tokenizer.name();
  index.tokenizer_sha256 = tokenizer.files_sha256();
  index.vocab_size = tokenizer.vocab_size();
  index.token_dtype = dtype;
  index.separator_token = tokenizer.separator();
  index.source_dir = input.string();
  index.input_bytes = summary.input_bytes;
  index.skipped_files = summary.skipped_files;
  index.skipped_records = summary.malformed_lines + summary.missing_field_lines;
  index.val_fraction = options.val_fraction;
  index.train = train.finish();
  index.validation = validation.finish();
  write_dataset_index(options.output, index);

  summary.documents = documents.size();
  summary.train_documents = index.train.documents;
  summary.val_documents = index.validation.documents;
  summary.train_tokens = index.train.tokens;
  summary.val_tokens = index.validation.tokens;
  summary.shards = index.train.shards.size() + index.validation.shards.size();
  log << "data prepare: " << summary.documents << " documents (" << summary.train_documents
      << " with train tokens, " << summary.val_documents << " with validation tokens), "
      << summary.skipped_files << " files skipped (" << summary.binary_files << " binary, "
      << summary.unreadable_files << " unreadable, " << summary.empty_files << " empty, "
      << summary.damaged_files << " damaged), " << summary.malformed_lines
      << " malformed JSON lines and " << summary.missing_field_lines << " without \""
      << options.input_options.jsonl_field << "\" skipped, " << summary.empty_documents
      << " empty documents\n"
      << "data prepare: " << summary.content_tokens << " tokens of " << tokenizer.name()
      << " (vocabulary " << tokenizer.vocab_size() << ", "
      << (dtype == TokenDtype::uint16_le ? "uint16" : "uint32") << "): "
      << summary.val_content_tokens << " for validation ("
      << (summary.content_tokens ? 100.0 * summary.val_content_tokens / summary.content_tokens : 0)
      << "%, asked " << 100.0 * options.val_fraction << "%); " << summary.train_tokens
      << " train and " << summary.val_tokens << " validation tokens with separators in "
      << summary.shards << " shards -> " << options.output.string() << "\n";
  return summary;
}

}  // namespace

}  // namespace dseek::data
