// `dseek data prepare`'s settings and results: inputs (a directory of text and JSON Lines
// files, optionally gzip or zstd compressed), the clean, tokenize and augment settings,
// the pipeline's sizes, and what a run did. The pipeline of actors that does the work is
// actors/data/prepare_pipeline.hpp; its stages' pure functions are piece_stages.hpp and
// dataset_builder.hpp here. See token_dataset.hpp for the reader.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/data/clean_settings.hpp"
#include "runtime/data/fim.hpp"
#include "runtime/data/input_documents.hpp"
#include "runtime/data/piece.hpp"
#include "runtime/data/source_files.hpp"

namespace dseek::data {

// The pipeline's stages, in order. decode, clean, tokenize and augment are pools of
// `workers` actors; dedup and write take the pieces one at a time in corpus order.
enum class PrepareStage : uint8_t { decode, clean, dedup, tokenize, augment, write };
inline constexpr size_t kPrepareStages = 6;
const char* prepare_stage_name(PrepareStage stage);
std::optional<PrepareStage> parse_prepare_stage(std::string_view name);

// Faults for tests (`--inject-crash STAGE:N`, `--slow-writer-ms MS`).
struct PrepareFaults {
  std::optional<PrepareStage> crash_stage;  // the actor of this stage that takes its
  uint64_t crash_at = 0;                    // crash_at-th piece (1-based) throws, once
  uint32_t writer_delay_ms = 0;             // the writer sleeps this long per piece
};

struct PrepareOptions {
  // The inputs: `input` and then `more_inputs` (--input given again), each a directory
  // walked recursively, a single file, or a glob (source_files.hpp says their names).
  std::filesystem::path input;
  std::vector<std::filesystem::path> more_inputs;
  std::filesystem::path output;           // created; must be empty or absent
  std::string tokenizer = "bytes";        // a name or a .tiktoken file (tokenizer.hpp)
  double val_fraction = 0.05;             // share of the tokens for validation; 0 = none
  uint64_t shard_tokens = 16u << 20;      // tokens per shard file
  uint64_t max_bytes = 0;                 // stop after this many bytes of text; 0 = all
                                          // (the document that reaches it is cut there)
  InputOptions input_options;             // JSONL text field, --strict
  SourceFilter filter;                    // --include / --exclude globs
  // The decode stage: invalid UTF-8 replaced by U+FFFD, then Unicode NFC. Both off
  // (--keep-bytes) passes the bytes as they are (the byte tokenizer takes any).
  bool repair_utf8 = true;
  bool nfc = true;
  CleanSettings clean;
  FimSettings fim;
  // The pipeline: `workers` actors per pool stage (0: the cores), at most `window`
  // pieces between reading and writing (0: 4 per worker, at least 8), pieces of at
  // most `piece_bytes` of text (a larger document is a piece of its own).
  uint32_t workers = 0;
  uint32_t window = 0;
  uint64_t piece_bytes = 1u << 20;
  bool progress = true;                   // a progress line per second on the log
  bool progress_terminal = false;         // the log is a terminal: a line per stage,
                                          // redrawn in place (else plain lines)
  std::filesystem::path cache_dir;        // --cache: the content-addressed cache (piece_cache.hpp)
  PrepareFaults faults;
  // On several nodes (prepare_nodes.hpp): this node's id among `nodes`, and how long
  // node 0 waits for the others' parts before it fails naming the missing node.
  uint32_t nodes = 1;
  uint32_t node_id = 0;
  double node_wait_s = 600;
  // A large uncompressed JSON Lines or separated text file is split between the nodes
  // by byte ranges of at least this many bytes (work_units.hpp).
  uint64_t split_bytes = 64u << 20;
};

struct PrepareSummary {
  uint64_t documents = 0;
  uint64_t skipped_files = 0;  // binary, unreadable, empty or damaged files, not taken
  uint64_t train_tokens = 0;
  uint64_t val_tokens = 0;
  uint64_t shards = 0;
  // The details of the counts above.
  uint64_t train_documents = 0;   // documents with tokens in train (one may be in both)
  uint64_t val_documents = 0;
  uint64_t content_tokens = 0;    // tokens of the documents, separators not counted
  uint64_t val_content_tokens = 0;
  uint64_t binary_files = 0;      // contain a NUL byte
  uint64_t unreadable_files = 0;
  uint64_t empty_files = 0;
  uint64_t damaged_files = 0;     // truncated or corrupt gzip/zstd
  uint64_t hidden_files = 0;      // hidden or version-control files, left out
  uint64_t filtered_files = 0;    // left out by --include/--exclude
  uint64_t malformed_lines = 0;   // JSON Lines that are not a JSON object
  uint64_t missing_field_lines = 0;
  uint64_t empty_documents = 0;   // no text or no tokens (= dropped[empty])
  uint64_t input_bytes = 0;       // bytes of the documents' text taken
  // The pipeline's report.
  uint64_t documents_in = 0;      // documents read from the files taken
  std::array<uint64_t, kDropReasons> dropped{};  // by DropReason (kept: the documents)
  uint64_t replaced_sequences = 0;  // invalid UTF-8 replaced by U+FFFD
  uint64_t fim_documents = 0;
  uint64_t read_bytes = 0;        // decoded text bytes of every document read
  uint64_t pieces = 0;
  uint32_t workers = 0, window = 0;
  uint64_t peak_pieces = 0;       // most pieces between reading and writing at once
  uint64_t peak_bytes = 0;        // most bytes those held at once (Piece::bytes)
  uint64_t largest_piece_bytes = 0;
  uint64_t restarts = 0;          // stage actors restarted after a crash
  uint64_t cached_files = 0;      // files taken from the cache (--cache)
  // Exact dedup's memory: the document hashes this process held at most (one node: every
  // kept text's; on several nodes each node holds its partition's, node 0's merge none),
  // and per node of the run (node 0's report: from every node's marker). Near dedup's:
  // the MinHash signatures held at most (one node: every kept text's; node 0 on several
  // nodes: the one candidate read back at a time), the LSH bucket entries per node (one
  // node: kept texts x bands; on several nodes each its bands' entries of every text
  // with a signature), and on several nodes node 0's signatures read back, its longest
  // candidate list of one document and its kept bits (one per document).
  uint64_t exact_hashes_held = 0;
  std::vector<uint64_t> node_hashes_held;
  uint64_t near_signatures_held = 0;
  std::vector<uint64_t> node_band_entries_held;
  uint64_t near_signatures_read = 0;
  uint64_t near_candidates_peak = 0;
  uint64_t near_kept_bits = 0;
  uint64_t byte_ranges = 0;       // work units that are byte ranges of a file (nodes)
  // Per stage (PrepareStage): documents through it, and its actors' time at work on
  // them (the sum over its workers, so up to workers x the run's time for a pool).
  std::array<uint64_t, kPrepareStages> stage_documents{};
  std::array<double, kPrepareStages> stage_busy_seconds{};
  // The stage queues: the most pieces that waited at once for a worker of the stage (for
  // its turn, at the in-order stages dedup and write); 0 for decode, which pieces do
  // not wait for (it reads when a credit is free). A slow stage shows as a full queue
  // before it; the sum over the stages stays within the window.
  std::array<uint64_t, kPrepareStages> stage_peak_waiting{};
  double seconds = 0;
  uint32_t vocab_size = 0;        // the data set's (the tokenizer's, + FIM sentinels)
  std::string tokenizer;          // its canonical name
};

// The inputs, absolute and normalised ("dir/" and "dir" are the same input).
std::vector<std::filesystem::path> prepare_inputs(const PrepareOptions& options);
// How the index and the log name them: the one input, or the inputs joined by ", ".
std::string inputs_label(const std::vector<std::filesystem::path>& inputs);

// Throws DataError on settings out of range.
void check_prepare_options(const PrepareOptions& options);
// The output must be empty or absent; created. Throws DataError naming it.
void create_output(const std::filesystem::path& output);
// Removes what a failed preparation wrote into the output (which was empty before).
void clear_output(const std::filesystem::path& output);
// The final table (documents in, kept, dropped by reason, tokens, throughput) and
// OUT/report.json.
void write_prepare_report(const PrepareOptions& options, const PrepareSummary& summary,
                          std::ostream& log);

}  // namespace dseek::data
