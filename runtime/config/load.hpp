// Loading and validating a job configuration.
//
// A config is a TOML file whose sections and keys are exactly those of the key table
// (config/schema.cpp, described in config/REFERENCE.md). Unknown keys, wrong types and
// out-of-range values are ConfigErrors whose message names the file, line, column and
// key; `--set section.key=value` overrides go through the same validation and name the
// override instead of a file position.
#pragma once

#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config/job_config.hpp"

namespace dseek::config {

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The defaults of every key (what an empty file gives).
JobConfig default_config();

// Reads `file`, then applies `overrides` ("section.key=value") in order, then checks the
// relations between keys (validate()). Throws ConfigError. A relative path the file
// gives to one of path_keys() is resolved against the file's folder (and becomes
// absolute); an override's relative path stays relative to the current directory, as
// a path on the command line does.
JobConfig load_config(const std::filesystem::path& file,
                      const std::vector<std::string>& overrides = {});

// The keys whose values are file system paths.
const std::vector<std::string_view>& path_keys();
bool is_path_key(std::string_view name);

// Parses TOML text as if it were the file named `source_name` (for tests and tools);
// its relative paths stay as written.
JobConfig load_config_text(std::string_view toml_text, std::string_view source_name,
                           const std::vector<std::string>& overrides = {});

// The keys ("section.key") that `file` and `overrides` set, whatever their values: what
// the user chose (dseek-node lets them win over what Slurm or Kubernetes say). A file
// that cannot be read or parsed gives the overrides' keys only: load_config() reports it.
std::set<std::string> keys_set_by(const std::filesystem::path& file,
                                  const std::vector<std::string>& overrides);

// Applies one "section.key=value" override; the value is read as a TOML value, and a
// bare word that is not valid TOML is taken as a string (--set data.dir=foo works).
void apply_override(JobConfig& config, std::string_view assignment);

// Relations between keys (dim divisible by heads, batch divisible by micro-batch, ...).
void validate(const JobConfig& config);

// Rejects settings whose feature this build does not implement yet, with a message that
// says so (a feature that is not there fails loudly, never silently).
void check_supported(const JobConfig& config);

// The reference of every key (section, key, type, default, range, description) as
// Markdown: `dseek config --describe` prints it and config/REFERENCE.md holds it.
std::string describe_markdown();

// The config as TOML text that load_config_text() reads back to an equal config.
std::string to_toml(const JobConfig& config);
// Faults as inline tables, the value of `--set faults=[...]` ("[{kind = \"kill\", node =
// 1, step = 10}]"): only the keys off their defaults; read back to equal faults.
std::string faults_inline_toml(const std::vector<FaultSpec>& faults);

}  // namespace dseek::config
