// `dseek data`: prepare a token data set from a directory of text and JSON Lines files,
// tokenize stdin (cmd_data_tokenize.cpp), verify a data set (every shard's checksum),
// or print its index.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "dseek/cmd_data.hpp"
#include "dseek/commands.hpp"
#include "actors/data/prepare_pipeline.hpp"
#include "runtime/data/dataset_index.hpp"
#include "runtime/config/prepare_config.hpp"
#include "runtime/data/prepare.hpp"
#include "runtime/data/prepare_config.hpp"
#include "runtime/data/token_dataset.hpp"

namespace dseek::tool {
namespace {

constexpr const char* kUsage =
    "usage: dseek data prepare --input DIR|FILE|'GLOB'... --output DIR [--tokenizer NAME|FILE]\n"
    "                          [--config FILE [--set prepare.KEY=VALUE]...]\n"
    "                          [--val-fraction F] [--jsonl-field NAME] [--strict]\n"
    "                          [--include GLOB]... [--exclude GLOB]...\n"
    "                          [--shard-tokens N] [--max-bytes N] [--workers N] [--cache DIR]\n"
    "                          [--text-separator TEXT]\n"
    "                          [--nodes N --node-id I [--node-wait SECONDS] [--split-bytes N]]\n"
    "                          [clean, augment and pipeline options: docs/data.md]\n"
    "         tokenizers: bytes (default), gpt2 = r50k_base, cl100k_base, a .tiktoken file\n"
    "       dseek data tokenize --tokenizer NAME|FILE [--decode | --stats] < INPUT\n"
    "       dseek data verify DIR   check every shard against the index\n"
    "       dseek data info DIR     print the index\n";

const std::vector<std::string> kActions = {"prepare", "tokenize", "verify", "info"};
// prepare's options that take a value, and those that do not.
const std::vector<std::string> kPrepareValueOptions = {
    "--input", "--output", "--tokenizer", "--val-fraction", "--jsonl-field", "--include",
    "--exclude", "--shard-tokens", "--max-bytes", "--cache", "--workers", "--window",
    "--piece-bytes", "--near-threshold", "--minhash-permutations", "--shingle-words",
    "--min-chars", "--max-chars", "--max-symbol-ratio", "--max-digit-ratio",
    "--max-repeated-lines", "--fim-rate", "--fim-spm-rate", "--fim-seed", "--inject-crash",
    "--slow-writer-ms", "--config", "--set", "--nodes", "--node-id", "--node-wait",
    "--text-separator", "--split-bytes"};
const std::vector<std::string> kPrepareFlags = {
    "--strict", "--keep-bytes", "--raw", "--no-nfc", "--no-dedup", "--no-near-dedup",
    "--no-filters", "--no-progress", "--resume", "--help"};

std::vector<std::string> prepare_options() {
  std::vector<std::string> all = kPrepareValueOptions;
  all.insert(all.end(), kPrepareFlags.begin(), kPrepareFlags.end());
  return all;
}

// "\n", "\t", "\r" and "\\" of a command line value as the bytes they stand for;
// false on another escape or an empty result.
bool parse_escaped(const std::string& text, std::string& out) {
  out.clear();
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out += text[i];
      continue;
    }
    if (++i == text.size()) return false;
    switch (text[i]) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      default: return false;
    }
  }
  return !out.empty();
}

template <typename Number>
bool parse_number(const std::string& text, Number& out) {
  const char* end = text.data() + text.size();
  auto [stop, error] = std::from_chars(text.data(), end, out);
  return error == std::errc() && stop == end;
}

void print_split(const char* name, const data::SplitEntry& split, bool list_shards) {
  std::printf("%s: %llu documents, %llu tokens, %zu shards\n", name,
              static_cast<unsigned long long>(split.documents),
              static_cast<unsigned long long>(split.tokens), split.shards.size());
  if (!list_shards) return;
  for (const data::ShardEntry& shard : split.shards) {
    std::printf("  %s  %llu tokens  %llu bytes  xxh64 %016llx\n", shard.file_name.c_str(),
                static_cast<unsigned long long>(shard.tokens),
                static_cast<unsigned long long>(shard.bytes),
                static_cast<unsigned long long>(shard.xxhash64));
  }
}

void print_index(const std::string& dir, const data::DatasetIndex& index, bool list_shards) {
  std::printf("data set %s: format %u, tokenizer %s, vocabulary %u, %s tokens\n", dir.c_str(),
              index.format_version, index.tokenizer.c_str(), index.vocab_size,
              index.token_dtype == data::TokenDtype::uint16_le ? "uint16" : "uint32");
  if (!index.tokenizer_sha256.empty()) {
    std::printf("tokenizer rank file SHA-256 %s\n", index.tokenizer_sha256.c_str());
  }
  std::printf("source %s: %llu bytes taken, %llu files and %llu records skipped, validation "
              "fraction %g\n",
              index.source_dir.c_str(), static_cast<unsigned long long>(index.input_bytes),
              static_cast<unsigned long long>(index.skipped_files),
              static_cast<unsigned long long>(index.skipped_records), index.val_fraction);
  print_split("train", index.train, list_shards);
  print_split("validation", index.validation, list_shards);
}

// The value of an option taking a fraction in [0, 1].
bool parse_fraction(const std::string& text, double& out) {
  return parse_number(text, out) && out >= 0.0 && out <= 1.0;
}

// --inject-crash STAGE:N
bool parse_crash(const std::string& text, data::PrepareFaults& faults) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return false;
  faults.crash_stage = data::parse_prepare_stage(text.substr(0, colon));
  return faults.crash_stage && parse_number(text.substr(colon + 1), faults.crash_at) &&
         faults.crash_at > 0;
}

// --config FILE and its --set overrides: the settings of its [prepare] section and
// data.dir as the output (runtime/data/prepare_config.hpp); the other flags win.
data::PrepareOptions options_from_config(const Args& args) {
  std::string file;
  std::vector<std::string> overrides;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] != "--config" && args[i] != "--set") continue;
    if (i + 1 >= args.size()) throw cli::UsageError(args[i] + " needs a value");
    if (args[i] == "--config") file = args[i + 1];
    else overrides.push_back(args[i + 1]);
    ++i;
  }
  if (file.empty()) {
    if (!overrides.empty()) throw cli::UsageError("--set needs --config FILE");
    return data::PrepareOptions{};
  }
  return data::prepare_options_from_config(config::load_prepare_job(file, overrides));
}

}  // namespace

data::PrepareOptions prepare_options_from_args(const Args& args) {
  data::PrepareOptions options = options_from_config(args);
  data::CleanSettings& clean = options.clean;
  bool have_input = !options.input.empty(), have_output = !options.output.empty();
  bool have_nodes = false, have_node_id = false, have_cli_input = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--config" || flag == "--set") {  // options_from_config() took them
      ++i;
      continue;
    }
    if (flag == "--strict") {
      options.input_options.strict = true;
      continue;
    }
    if (flag == "--keep-bytes" || flag == "--raw") {
      options.repair_utf8 = options.nfc = false;
      if (flag == "--raw") {  // and no clean stage: every document as it is
        clean.exact_dedup = clean.near_dedup = false;
        clean.min_chars = clean.max_chars = 0;
        clean.max_symbol_ratio = clean.max_digit_ratio = clean.max_repeated_lines = 1.0;
      }
      continue;
    }
    if (flag == "--no-nfc" || flag == "--no-dedup" || flag == "--no-near-dedup" ||
        flag == "--no-filters" || flag == "--no-progress") {
      if (flag == "--no-nfc") options.nfc = false;
      if (flag == "--no-dedup") clean.exact_dedup = false;
      if (flag == "--no-near-dedup") clean.near_dedup = false;
      if (flag == "--no-progress") options.progress = false;
      if (flag == "--no-filters") {
        clean.min_chars = clean.max_chars = 0;
        clean.max_symbol_ratio = clean.max_digit_ratio = clean.max_repeated_lines = 1.0;
      }
      continue;
    }
    if (flag == "--resume")
      throw cli::UsageError("--resume is not implemented: rerun with the same --cache DIR, "
                            "which reuses every file the interrupted run finished");
    if (std::find(kPrepareValueOptions.begin(), kPrepareValueOptions.end(), flag) ==
        kPrepareValueOptions.end())
      cli::unknown("option", flag, prepare_options());
    if (i + 1 >= args.size()) throw cli::UsageError(flag + " needs a value");
    const std::string& value = args[++i];
    bool ok = true;
    if (flag == "--input") {
      // The first replaces the config's prepare.input; each later one adds an input.
      if (have_cli_input) options.more_inputs.push_back(value);
      else options.input = value;
      have_input = have_cli_input = true;
    } else if (flag == "--output") {
      options.output = value;
      have_output = true;
    } else if (flag == "--val-fraction") {
      ok = parse_number(value, options.val_fraction) && options.val_fraction >= 0.0 &&
           options.val_fraction < 1.0;
    } else if (flag == "--shard-tokens") {
      ok = parse_number(value, options.shard_tokens) && options.shard_tokens > 0;
    } else if (flag == "--max-bytes") {
      ok = parse_number(value, options.max_bytes);
    } else if (flag == "--tokenizer") {
      options.tokenizer = value;
    } else if (flag == "--jsonl-field") {
      options.input_options.jsonl_field = value;
      ok = !value.empty();
    } else if (flag == "--include") {
      options.filter.include.push_back(value);
    } else if (flag == "--exclude") {
      options.filter.exclude.push_back(value);
    } else if (flag == "--cache") {
      options.cache_dir = value;
    } else if (flag == "--workers") {
      ok = parse_number(value, options.workers) && options.workers > 0 && options.workers <= 1024;
    } else if (flag == "--window") {
      ok = parse_number(value, options.window) && options.window >= 2;
    } else if (flag == "--piece-bytes") {
      ok = parse_number(value, options.piece_bytes) && options.piece_bytes > 0;
    } else if (flag == "--near-threshold") {
      ok = parse_number(value, clean.near_threshold) && clean.near_threshold > 0.0 &&
           clean.near_threshold <= 1.0;
    } else if (flag == "--minhash-permutations") {
      ok = parse_number(value, clean.minhash_permutations) && clean.minhash_permutations > 0 &&
           clean.minhash_permutations <= 1024;
    } else if (flag == "--shingle-words") {
      ok = parse_number(value, clean.shingle_words) && clean.shingle_words > 0;
    } else if (flag == "--min-chars") {
      ok = parse_number(value, clean.min_chars);
    } else if (flag == "--max-chars") {
      ok = parse_number(value, clean.max_chars);
    } else if (flag == "--max-symbol-ratio") {
      ok = parse_fraction(value, clean.max_symbol_ratio);
    } else if (flag == "--max-digit-ratio") {
      ok = parse_fraction(value, clean.max_digit_ratio);
    } else if (flag == "--max-repeated-lines") {
      ok = parse_fraction(value, clean.max_repeated_lines);
    } else if (flag == "--fim-rate") {
      ok = parse_fraction(value, options.fim.rate);
    } else if (flag == "--fim-spm-rate") {
      ok = parse_fraction(value, options.fim.spm_rate);
    } else if (flag == "--fim-seed") {
      ok = parse_number(value, options.fim.seed);
    } else if (flag == "--nodes") {
      ok = parse_number(value, options.nodes) && options.nodes > 0 && options.nodes <= 4096;
      have_nodes = true;
    } else if (flag == "--node-id") {
      ok = parse_number(value, options.node_id);
      have_node_id = true;
    } else if (flag == "--text-separator") {
      ok = parse_escaped(value, options.input_options.text_separator) &&
           value.find('\0') == std::string::npos;
    } else if (flag == "--split-bytes") {
      ok = parse_number(value, options.split_bytes) && options.split_bytes > 0;
    } else if (flag == "--node-wait") {
      ok = parse_number(value, options.node_wait_s) && options.node_wait_s > 0;
    } else if (flag == "--inject-crash") {
      ok = parse_crash(value, options.faults);
    } else if (flag == "--slow-writer-ms") {
      ok = parse_number(value, options.faults.writer_delay_ms);
    }
    if (!ok) throw cli::UsageError("bad value '" + value + "' for " + flag);
  }
  options.progress_terminal = ::isatty(STDOUT_FILENO) == 1;
  if (!have_input || !have_output)
    throw cli::UsageError("prepare needs --input and --output (or a --config FILE whose "
                          "prepare.input and data.dir say them)");
  if (have_nodes != have_node_id || options.node_id >= options.nodes)
    throw cli::UsageError("--nodes N and --node-id I (0..N-1) go together: run the same "
                          "command on each of the N nodes with its own --node-id");
  return options;
}

namespace {

int prepare(const Args& args) {
  const data::PrepareOptions options = prepare_options_from_args(args);
  data::PrepareSummary summary = actors::prepare_dataset(options, std::cout);
  if (options.node_id != 0) {
    std::printf("node %u of %u prepared its files in %.2f s\n", options.node_id, options.nodes,
                summary.seconds);
    return 0;
  }
  std::printf("prepared %llu tokens from %llu bytes in %.2f s\n",
              static_cast<unsigned long long>(summary.train_tokens + summary.val_tokens),
              static_cast<unsigned long long>(summary.input_bytes), summary.seconds);
  return 0;
}

int verify(const std::string& dir) {
  data::DatasetIndex index = data::read_dataset_index(dir);
  // Opening a split checks every shard's size, header and checksum.
  data::TokenDataset train = data::TokenDataset::open(dir, data::Split::train);
  data::TokenDataset validation = data::TokenDataset::open(dir, data::Split::validation);
  print_index(dir, index, false);
  std::printf("verified: %zu shards, %llu tokens, all checksums match\n",
              index.train.shards.size() + index.validation.shards.size(),
              static_cast<unsigned long long>(train.num_tokens() + validation.num_tokens()));
  return 0;
}

int run_data(const Args& args) {
  if (args.empty()) throw cli::UsageError("an action is required (prepare, tokenize, verify, info)");
  const std::string& action = args[0];
  if (std::find(kActions.begin(), kActions.end(), action) == kActions.end())
    cli::unknown(action.rfind("-", 0) == 0 ? "option" : "action", action, kActions);
  if (action == "prepare") return prepare(args);
  if (action == "tokenize") return cmd_data_tokenize(args);
  if (args.size() != 2) throw cli::UsageError(action + " takes one directory");
  if (args[1].rfind("-", 0) == 0) cli::unknown("option", args[1], {"--help"});
  if (action == "verify") return verify(args[1]);
  print_index(args[1], data::read_dataset_index(args[1]), true);
  return 0;
}

}  // namespace

const Command& data_command() {
  static const Command command{
      "data",
      "  data prepare --input DIR|FILE|GLOB --output DIR [--tokenizer NAME|FILE] [...]\n"
      "                                 turn text files into token shards\n"
      "  data tokenize --tokenizer NAME|FILE [--decode | --stats] < INPUT\n"
      "  data verify DIR                re-check every shard's checksum\n"
      "  data info DIR                  print a prepared data set's index\n",
      kUsage, run_data};
  return command;
}

}  // namespace dseek::tool
