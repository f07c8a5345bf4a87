// Implementation of prepare_config.hpp.
#include "runtime/data/prepare_config.hpp"

#include <string>
#include <vector>

namespace dseek::data {
namespace {

// "a,b, c" -> {"a", "b", "c"}; empty items are left out.
std::vector<std::string> comma_list(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    const size_t first = item.find_first_not_of(" \t");
    const size_t last = item.find_last_not_of(" \t");
    if (first != std::string::npos) items.push_back(item.substr(first, last - first + 1));
    start = end + 1;
  }
  return items;
}

}  // namespace

PrepareOptions prepare_options_from_config(const config::PrepareJob& config) {
  const config::PrepareConfig& p = config.prepare;
  PrepareOptions options;
  options.input = p.input;
  options.output = config.job.data.dir;
  options.tokenizer = p.tokenizer;
  options.val_fraction = p.val_fraction;
  options.shard_tokens = static_cast<uint64_t>(p.shard_tokens);
  options.max_bytes = static_cast<uint64_t>(p.max_bytes);
  options.input_options.jsonl_field = p.jsonl_field;
  options.input_options.text_separator = p.text_separator;
  options.input_options.strict = p.strict;
  options.filter.include = comma_list(p.include);
  options.filter.exclude = comma_list(p.exclude);
  options.repair_utf8 = p.repair_utf8;
  options.nfc = p.nfc;
  CleanSettings& clean = options.clean;
  clean.exact_dedup = p.exact_dedup;
  clean.near_dedup = p.near_dedup;
  clean.near_threshold = p.near_threshold;
  clean.minhash_permutations = static_cast<uint32_t>(p.minhash_permutations);
  clean.shingle_words = static_cast<uint32_t>(p.shingle_words);
  clean.min_chars = static_cast<uint64_t>(p.min_chars);
  clean.max_chars = static_cast<uint64_t>(p.max_chars);
  clean.max_symbol_ratio = p.max_symbol_ratio;
  clean.max_digit_ratio = p.max_digit_ratio;
  clean.max_repeated_lines = p.max_repeated_lines;
  options.fim.rate = p.fim_rate;
  options.fim.spm_rate = p.fim_spm_rate;
  options.fim.seed = static_cast<uint64_t>(p.fim_seed);
  options.workers = static_cast<uint32_t>(p.workers);
  options.window = static_cast<uint32_t>(p.window);
  options.piece_bytes = static_cast<uint64_t>(p.piece_bytes);
  options.progress = p.progress;
  options.cache_dir = p.cache;
  return options;
}

}  // namespace dseek::data
