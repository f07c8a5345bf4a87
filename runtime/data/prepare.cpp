// `dseek data prepare`'s settings checks, output folder, and final report (see
// prepare.hpp); the pipeline itself is actors/data/prepare_pipeline.hpp.
#include "runtime/data/prepare.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

#include "runtime/data/dataset_index.hpp"
#include "runtime/data/file_io.hpp"
#include "runtime/data/token_dataset.hpp"

namespace dseek::data {
namespace {

constexpr std::array<const char*, kPrepareStages> kStageNames = {
    "decode", "clean", "dedup", "tokenize", "augment", "write"};

}  // namespace

const char* prepare_stage_name(PrepareStage stage) {
  return kStageNames[static_cast<size_t>(stage)];
}

std::optional<PrepareStage> parse_prepare_stage(std::string_view name) {
  for (size_t i = 0; i < kPrepareStages; ++i) {
    if (name == kStageNames[i]) return static_cast<PrepareStage>(i);
  }
  return std::nullopt;
}

std::vector<std::filesystem::path> prepare_inputs(const PrepareOptions& options) {
  std::vector<std::filesystem::path> inputs;
  inputs.push_back(options.input);
  inputs.insert(inputs.end(), options.more_inputs.begin(), options.more_inputs.end());
  for (auto& input : inputs) {
    input = std::filesystem::absolute(input).lexically_normal();
    if (!input.has_filename() && input.has_parent_path()) input = input.parent_path();
  }
  return inputs;
}

std::string inputs_label(const std::vector<std::filesystem::path>& inputs) {
  std::string label;
  for (const auto& input : inputs) label += (label.empty() ? "" : ", ") + input.string();
  return label;
}

void check_prepare_options(const PrepareOptions& options) {
  if (!(options.val_fraction >= 0.0 && options.val_fraction < 1.0)) {
    throw DataError("validation fraction must be in [0, 1), not " +
                    std::to_string(options.val_fraction));
  }
  if (options.shard_tokens == 0) throw DataError("shard size must be at least one token");
  if (options.input_options.jsonl_field.empty()) throw DataError("the JSONL field name is empty");
  if (options.piece_bytes == 0) throw DataError("the piece size must be at least one byte");
  if (options.input_options.text_separator.find('\0') != std::string::npos) {
    throw DataError("the text separator holds a NUL byte (a NUL makes a text file binary)");
  }
  if (options.split_bytes == 0) throw DataError("the split size must be at least one byte");
  check_clean_settings(options.clean);
  check_fim_settings(options.fim);
  if (options.nodes == 0 || options.node_id >= options.nodes) {
    throw DataError("node id " + std::to_string(options.node_id) + " is not one of the " +
                    std::to_string(options.nodes) + " nodes (0.." +
                    std::to_string(options.nodes == 0 ? 0 : options.nodes - 1) + ")");
  }
  if (options.nodes > 1 && options.max_bytes != 0) {
    throw DataError("--max-bytes cuts the corpus where one node reaches it: prepare on one "
                    "node to use it");
  }
  if (options.nodes > 1 && !options.cache_dir.empty()) {
    throw DataError("--cache on several nodes: the nodes' finished parts in OUTPUT/.parts are "
                    "what a rerun reuses; leave --cache out");
  }
  if (!(options.node_wait_s > 0)) throw DataError("the node wait must be more than 0 seconds");
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
    // A run killed before its index was written leaves its token file: start again.
    fs::remove(output / ".tokens.tmp", error);
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

void clear_output(const std::filesystem::path& output) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(output, error)) {
    std::filesystem::remove_all(entry.path(), error);
  }
}

void write_prepare_report(const PrepareOptions& options, const PrepareSummary& s,
                          std::ostream& log) {
  const double seconds = s.seconds > 0 ? s.seconds : 1e-9;
  const double mb = static_cast<double>(s.read_bytes) / 1e6;
  char line[256];
  log << "data prepare: " << s.documents << " documents (" << s.train_documents
      << " with train tokens, " << s.val_documents << " with validation tokens), "
      << s.skipped_files << " files skipped (" << s.binary_files << " binary, "
      << s.unreadable_files << " unreadable, " << s.empty_files << " empty, " << s.damaged_files
      << " damaged), " << s.malformed_lines << " malformed JSON lines and "
      << s.missing_field_lines << " without \"" << options.input_options.jsonl_field
      << "\" skipped, " << s.empty_documents << " empty documents\n";
  log << "data prepare: report\n";
  std::snprintf(line, sizeof line, "  %-26s %12llu\n", "documents in",
                static_cast<unsigned long long>(s.documents_in));
  log << line;
  for (size_t i = 0; i < kDropReasons; ++i) {
    std::snprintf(line, sizeof line, "  %-8s%-18s %12llu\n", i == 0 ? "" : "dropped ",
                  drop_reason_name(static_cast<DropReason>(i)),
                  static_cast<unsigned long long>(s.dropped[i]));
    log << line;
  }
  std::snprintf(line, sizeof line,
                "  %-26s %12llu (%llu train, %llu validation, with separators)\n", "tokens out",
                static_cast<unsigned long long>(s.train_tokens + s.val_tokens),
                static_cast<unsigned long long>(s.train_tokens),
                static_cast<unsigned long long>(s.val_tokens));
  log << line;
  std::snprintf(line, sizeof line,
                "  %-26s %12.2f s, %.2f MB/s, %.0f documents/s, %.0f tokens/s on %u workers\n",
                "time", s.seconds, mb / seconds, static_cast<double>(s.documents_in) / seconds,
                static_cast<double>(s.content_tokens) / seconds, s.workers);
  log << line;
  for (size_t i = 0; i < kPrepareStages; ++i) {
    const double busy = s.stage_busy_seconds[i];
    std::snprintf(line, sizeof line,
                  "  stage %-20s %12llu documents, busy %.2f s (%.0f documents/s), at most %llu "
                  "pieces waiting\n",
                  prepare_stage_name(static_cast<PrepareStage>(i)),
                  static_cast<unsigned long long>(s.stage_documents[i]), busy,
                  busy > 0 ? static_cast<double>(s.stage_documents[i]) / busy : 0.0,
                  static_cast<unsigned long long>(s.stage_peak_waiting[i]));
    log << line;
  }
  log << "data prepare: " << s.content_tokens << " tokens of " << s.tokenizer << " (vocabulary "
      << s.vocab_size << ", "
      << (dtype_for_vocab(s.vocab_size) == TokenDtype::uint16_le ? "uint16" : "uint32")
      << "): " << s.val_content_tokens << " for validation ("
      << (s.content_tokens ? 100.0 * static_cast<double>(s.val_content_tokens) /
                                 static_cast<double>(s.content_tokens)
                           : 0)
      << "%, asked " << 100.0 * options.val_fraction << "%); " << s.train_tokens << " train and "
      << s.val_tokens << " validation tokens with separators in " << s.shards << " shards\n"
      << "data prepare: " << s.replaced_sequences << " invalid UTF-8 sequences replaced, " << s.fim_documents
      << " documents in FIM order; pipeline: " << s.pieces << " pieces, at most "
      << s.peak_pieces << " (window " << s.window << ") and " << s.peak_bytes
      << " bytes in flight, " << s.restarts << " actors restarted, " << s.cached_files
      << " files from the cache -> " << options.output.string()
      << "\n";
  log << "data prepare: dedup held " << s.exact_hashes_held << " document hashes";
  if (s.node_hashes_held.size() > 1) {
    log << " on this node (per node, each its partition of the hashes:";
    for (uint64_t held : s.node_hashes_held) log << " " << held;
    log << "; the merge none)";
  }
  log << " and " << s.near_signatures_held << " MinHash signatures";
  if (s.node_band_entries_held.size() > 1) {
    log << " (LSH bucket entries per node, each its bands:";
    for (uint64_t held : s.node_band_entries_held) log << " " << held;
    log << "; the merge read back " << s.near_signatures_read << " signatures)";
  }
  if (s.byte_ranges > 0) log << "; " << s.byte_ranges << " byte ranges of files";
  log << "\n";

  std::ostringstream json;
  json << "{\"documents_in\":" << s.documents_in << ",\"dropped\":{";
  for (size_t i = 1; i < kDropReasons; ++i) {
    json << (i > 1 ? "," : "") << '"' << drop_reason_name(static_cast<DropReason>(i))
         << "\":" << s.dropped[i];
  }
  json << "},\"documents\":" << s.documents << ",\"train_tokens\":" << s.train_tokens
       << ",\"val_tokens\":" << s.val_tokens << ",\"content_tokens\":" << s.content_tokens
       << ",\"skipped_files\":{\"binary\":" << s.binary_files
       << ",\"unreadable\":" << s.unreadable_files << ",\"empty\":" << s.empty_files
       << ",\"damaged\":" << s.damaged_files
       << "},\"skipped_lines\":{\"malformed\":" << s.malformed_lines
       << ",\"missing_field\":" << s.missing_field_lines
       << "},\"replaced_utf8_sequences\":" << s.replaced_sequences
       << ",\"fim_documents\":" << s.fim_documents << ",\"read_bytes\":" << s.read_bytes
       << ",\"pieces\":" << s.pieces << ",\"workers\":" << s.workers
       << ",\"window\":" << s.window << ",\"peak_pieces\":" << s.peak_pieces
       << ",\"peak_bytes\":" << s.peak_bytes << ",\"restarts\":" << s.restarts
       << ",\"cached_files\":" << s.cached_files
       << ",\"dedup_memory\":{\"exact_hashes_held\":" << s.exact_hashes_held
       << ",\"node_hashes_held\":[";
  for (size_t i = 0; i < s.node_hashes_held.size(); ++i)
    json << (i > 0 ? "," : "") << s.node_hashes_held[i];
  json << "],\"near_signatures_held\":" << s.near_signatures_held
       << ",\"node_band_entries_held\":[";
  for (size_t i = 0; i < s.node_band_entries_held.size(); ++i)
    json << (i > 0 ? "," : "") << s.node_band_entries_held[i];
  json << "],\"near_signatures_read\":" << s.near_signatures_read
       << ",\"near_candidates_peak\":" << s.near_candidates_peak
       << ",\"near_kept_bits\":" << s.near_kept_bits << "}"
       << ",\"byte_ranges\":" << s.byte_ranges
       << ",\"seconds\":" << s.seconds << ",\"stages\":{";
  for (size_t i = 0; i < kPrepareStages; ++i) {
    json << (i > 0 ? "," : "") << '"' << prepare_stage_name(static_cast<PrepareStage>(i))
         << "\":{\"documents\":" << s.stage_documents[i]
         << ",\"busy_seconds\":" << s.stage_busy_seconds[i]
         << ",\"peak_waiting\":" << s.stage_peak_waiting[i] << "}";
  }
  json << "}}\n";
  std::ofstream out(options.output / "report.json", std::ios::binary | std::ios::trunc);
  out << json.str();
  if (!out) throw DataError("cannot write " + (options.output / "report.json").string());
}

}  // namespace dseek::data
