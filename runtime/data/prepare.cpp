// `dseek data prepare` (see prepare.hpp). Two passes over the input: the first
// classifies the files and fixes the split and every shard's size, the second writes
// the shards, so each shard's header is written up front and the output is a pure
// function of the input. The index is written last: without it the directory is not
// a data set, so an interrupted run is never mistaken for a finished one.
#include "runtime/data/prepare.hpp"

#include <xxhash.h>

#include <algorithm>
#include <string>
#include <system_error>
#include <vector>

#include "runtime/data/byte_tokenizer.hpp"
#include "runtime/data/dataset_index.hpp"
#include "runtime/data/file_io.hpp"
#include "runtime/data/source_files.hpp"
#include "runtime/data/split_writer.hpp"
#include "runtime/data/token_dataset.hpp"

namespace dseek::data {
namespace {

struct Document {
  const SourceFile* file;
  uint64_t file_bytes;    // whole file, to notice a change between the passes
  uint64_t taken_bytes;   // less when --max-bytes cuts it
  uint64_t content_hash;  // of the taken bytes, same reason
  uint64_t path_hash;     // decides the split
  bool validation = false;
};

void check_options(const PrepareOptions& options) {
  if (!(options.val_fraction >= 0.0 && options.val_fraction < 1.0)) {
    throw DataError("validation fraction must be in [0, 1), not " +
                    std::to_string(options.val_fraction));
  }
  if (options.shard_tokens == 0) throw DataError("shard size must be at least one token");
}

// The output must not hold anything: refusing is what protects an existing data set
// (or any other directory) from being mixed with a new one.
void check_output_usable(const std::filesystem::path& output) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::exists(output, error)) return;
  if (!fs::is_directory(output, error)) {
    throw DataError("output " + output.string() + " exists and is not a directory");
  }
  if (!fs::is_empty(output, error)) {
    throw DataError("output directory " + output.string() + " is not empty");
  }
}

void create_output(const std::filesystem::path& output) {
  check_output_usable(output);  // again: it may have changed during the first pass
  std::error_code error;
  std::filesystem::create_directories(output, error);
  if (error) {
    throw DataError("cannot create output directory " + output.string() + ": " +
                    error.message());
  }
}

// The split rule: a document is for validation when the hash of its relative path,
// as a fraction of 2^64, is below val_fraction. It depends on the path only, so
// adding files does not move the others between splits.
void assign_splits(std::vector<Document>& documents, double val_fraction) {
  for (Document& document : documents) {
    double unit = static_cast<double>(document.path_hash >> 11) * 0x1p-53;
    document.validation = unit < val_fraction;
  }
  // Training needs data, and with two documents or more so does validation: move the
  // document nearest to the threshold when a split came out empty.
  auto by_hash = [](const Document& a, const Document& b) { return a.path_hash < b.path_hash; };
  auto is_val = [](const Document& document) { return document.validation; };
  if (std::all_of(documents.begin(), documents.end(), is_val)) {
    std::max_element(documents.begin(), documents.end(), by_hash)->validation = false;
  }
  if (documents.size() >= 2 && std::none_of(documents.begin(), documents.end(), is_val)) {
    std::min_element(documents.begin(), documents.end(), by_hash)->validation = true;
  }
}

uint64_t split_tokens(const std::vector<Document>& documents, bool validation) {
  uint64_t tokens = 0, count = 0;
  for (const Document& document : documents) {
    if (document.validation != validation) continue;
    tokens += document.taken_bytes;
    ++count;
  }
  return count == 0 ? 0 : tokens + (count - 1);  // separators between documents
}

}  // namespace

PrepareSummary prepare_text_dataset(const PrepareOptions& options, std::ostream& log) {
  check_options(options);
  std::filesystem::path input = std::filesystem::absolute(options.input).lexically_normal();
  // "dir/" and "dir" are the same input and must give the same index.
  if (!input.has_filename() && input.has_parent_path()) input = input.parent_path();
  check_output_usable(options.output);  // before the long first pass
  const std::vector<SourceFile> files = list_source_files(input);
  log << "data prepare: " << files.size() << " files under " << input.string() << "\n";

  PrepareSummary summary;
  std::vector<Document> documents;
  std::vector<char> buffer;
  std::string why;
  for (const SourceFile& file : files) {
    if (options.max_bytes != 0 && summary.input_bytes >= options.max_bytes) break;
    if (!io::read_file(file.path, buffer, why)) {
      log << "data prepare: skipping unreadable " << why << "\n";
      ++summary.unreadable_files;
      continue;
    }
    if (buffer.empty()) {
      ++summary.empty_files;
      continue;
    }
    if (byte_tokenizer::looks_binary(buffer.data(), buffer.size())) {
      ++summary.binary_files;
      continue;
    }
    uint64_t taken = buffer.size();
    if (options.max_bytes != 0) taken = std::min(taken, options.max_bytes - summary.input_bytes);
    summary.input_bytes += taken;
    documents.push_back(Document{&file, buffer.size(), taken, XXH64(buffer.data(), taken, 0),
                                 XXH64(file.relative.data(), file.relative.size(), 0)});
  }
  summary.skipped_files = summary.unreadable_files + summary.empty_files + summary.binary_files;
  if (documents.empty()) {
    throw DataError("no text documents under " + input.string() + " (" +
                    std::to_string(summary.skipped_files) + " files skipped)");
  }
  assign_splits(documents, options.val_fraction);

  create_output(options.output);
  SplitWriter train(options.output, "train", split_tokens(documents, false),
                    options.shard_tokens);
  SplitWriter validation(options.output, "val", split_tokens(documents, true),
                         options.shard_tokens);
  for (const Document& document : documents) {
    if (!io::read_file(document.file->path, buffer, why) ||
        buffer.size() != document.file_bytes ||
        XXH64(buffer.data(), document.taken_bytes, 0) != document.content_hash) {
      throw DataError("input file " + document.file->path.string() +
                      " changed while the data set was being prepared");
    }
    (document.validation ? validation : train)
        .append_document(reinterpret_cast<const unsigned char*>(buffer.data()),
                         document.taken_bytes);
  }

  DatasetIndex index;
  index.tokenizer = byte_tokenizer::kName;
  index.vocab_size = byte_tokenizer::kVocabSize;
  index.separator_token = byte_tokenizer::kSeparator;
  index.source_dir = input.string();
  index.input_bytes = summary.input_bytes;
  index.skipped_files = summary.skipped_files;
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
      << " train, " << summary.val_documents << " validation), " << summary.skipped_files
      << " files skipped (" << summary.binary_files << " binary, " << summary.unreadable_files
      << " unreadable, " << summary.empty_files << " empty)\n"
      << "data prepare: " << summary.train_tokens << " train and " << summary.val_tokens
      << " validation tokens in " << summary.shards << " shards -> "
      << options.output.string() << "\n";
  return summary;
}

}  // namespace dseek::data
