// `dseek data prepare --config FILE`: the [prepare] section of a job config, the settings
// of the preparation (runtime/data/prepare.hpp's PrepareOptions, whose defaults these
// equal: tests/unit/test_prepare_config.cpp), and the job around it, whose data.dir is
// the output. One file then says how the data set is made and what trains on it. The
// section is described with the job's keys (config/REFERENCE.md) and read by the same
// loader (the same errors: file, line, column, key); a training run leaves it alone.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/config/job_config.hpp"

namespace dseek::config {

struct PrepareConfig {
  std::string input = "";          // a directory, file or glob; "" = --input must say
  std::string tokenizer = "bytes";
  double val_fraction = 0.05;
  std::string jsonl_field = "text";
  std::string text_separator;  // "": a text file is one document
  bool strict = false;
  std::string include = "";        // globs separated by commas; "" = every file
  std::string exclude = "";
  int64_t shard_tokens = 16 << 20;
  int64_t max_bytes = 0;
  int64_t workers = 0;
  int64_t window = 0;
  int64_t piece_bytes = 1 << 20;
  std::string cache = "";
  bool progress = true;
  bool repair_utf8 = true;
  bool nfc = true;
  bool exact_dedup = true;
  bool near_dedup = true;
  double near_threshold = 0.8;
  int64_t minhash_permutations = 128;
  int64_t shingle_words = 5;
  int64_t min_chars = 0;
  int64_t max_chars = 0;
  double max_symbol_ratio = 0.5;
  double max_digit_ratio = 0.5;
  double max_repeated_lines = 0.5;
  double fim_rate = 0;
  double fim_spm_rate = 0.5;
  int64_t fim_seed = 0;
};

struct PrepareJob {
  JobConfig job;          // the other sections, validated as a job (data.dir: the output)
  PrepareConfig prepare;
};

// Reads `file` and applies `overrides` ("prepare.key=value" to the [prepare] section, any
// other to the job), then checks the section's relations. Relative prepare.input and
// prepare.cache in the file are read against its folder, as data.dir is. Throws
// ConfigError (config/load.hpp) naming the file, line and key, or the override.
PrepareJob load_prepare_job(const std::filesystem::path& file,
                            const std::vector<std::string>& overrides = {});
PrepareJob load_prepare_job_text(std::string_view toml_text, std::string_view source_name,
                                 const std::vector<std::string>& overrides = {});

}  // namespace dseek::config
