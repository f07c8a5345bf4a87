// The [prepare] section of a job config (runtime/config/prepare_config.hpp): its defaults
// are PrepareOptions' (one set of defaults, checked here field by field), every key
// reaches its option, relative paths are the file's folder's, overrides win, a job that
// trains accepts and ignores the section, and bad values are errors naming the key.
#include <catch2/catch.hpp>

#include <fstream>

#include "runtime/config/load.hpp"
#include "runtime/config/prepare_config.hpp"
#include "runtime/data/prepare_config.hpp"
#include "support/test_paths.hpp"

using dseek::config::ConfigError;
using dseek::config::load_prepare_job_text;
using dseek::data::PrepareOptions;
using dseek::data::prepare_options_from_config;

namespace {

std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    load_prepare_job_text(text, "job.toml", overrides);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("prepare config: an empty section gives PrepareOptions' defaults", "[config][data]") {
  const PrepareOptions defaults;
  const PrepareOptions from = prepare_options_from_config(load_prepare_job_text("", "empty.toml"));
  CHECK(from.input.empty());
  CHECK(from.output == "data/prepared");  // data.dir's default
  CHECK(from.tokenizer == defaults.tokenizer);
  CHECK(from.val_fraction == defaults.val_fraction);
  CHECK(from.shard_tokens == defaults.shard_tokens);
  CHECK(from.max_bytes == defaults.max_bytes);
  CHECK(from.input_options.jsonl_field == defaults.input_options.jsonl_field);
  CHECK(from.input_options.text_separator == defaults.input_options.text_separator);
  CHECK(from.input_options.strict == defaults.input_options.strict);
  CHECK(from.filter.include.empty());
  CHECK(from.filter.exclude.empty());
  CHECK(from.repair_utf8 == defaults.repair_utf8);
  CHECK(from.nfc == defaults.nfc);
  CHECK(from.clean.exact_dedup == defaults.clean.exact_dedup);
  CHECK(from.clean.near_dedup == defaults.clean.near_dedup);
  CHECK(from.clean.near_threshold == defaults.clean.near_threshold);
  CHECK(from.clean.minhash_permutations == defaults.clean.minhash_permutations);
  CHECK(from.clean.shingle_words == defaults.clean.shingle_words);
  CHECK(from.clean.min_chars == defaults.clean.min_chars);
  CHECK(from.clean.max_chars == defaults.clean.max_chars);
  CHECK(from.clean.max_symbol_ratio == defaults.clean.max_symbol_ratio);
  CHECK(from.clean.max_digit_ratio == defaults.clean.max_digit_ratio);
  CHECK(from.clean.max_repeated_lines == defaults.clean.max_repeated_lines);
  CHECK(from.fim.rate == defaults.fim.rate);
  CHECK(from.fim.spm_rate == defaults.fim.spm_rate);
  CHECK(from.fim.seed == defaults.fim.seed);
  CHECK(from.workers == defaults.workers);
  CHECK(from.window == defaults.window);
  CHECK(from.piece_bytes == defaults.piece_bytes);
  CHECK(from.progress == defaults.progress);
  CHECK(from.cache_dir == defaults.cache_dir);
}

TEST_CASE("prepare config: every key reaches its option, overrides win", "[config][data]") {
  const std::string text =
      "[data]\ndir = \"/out\"\n"
      "[prepare]\ninput = \"/corpus/*.jsonl.gz\"\ntokenizer = \"gpt2\"\nval_fraction = 0.01\n"
      "jsonl_field = \"content\"\ntext_separator = \"\\n<doc>\\n\"\nstrict = true\ninclude = \"**/*.py, *.md\"\n"
      "exclude = \"tests/**\"\nshard_tokens = 1000\nmax_bytes = 5000\nworkers = 3\n"
      "window = 12\npiece_bytes = 4096\ncache = \"/cache\"\nprogress = false\n"
      "repair_utf8 = false\nnfc = false\nexact_dedup = false\nnear_dedup = false\n"
      "near_threshold = 0.7\nminhash_permutations = 64\nshingle_words = 3\nmin_chars = 10\n"
      "max_chars = 100000\nmax_symbol_ratio = 0.4\nmax_digit_ratio = 0.3\n"
      "max_repeated_lines = 0.2\nfim_rate = 0.5\nfim_spm_rate = 0.25\nfim_seed = 7\n";
  const PrepareOptions o = prepare_options_from_config(
      load_prepare_job_text(text, "job.toml", {"prepare.workers=4", "data.dir=/elsewhere"}));
  CHECK(o.input == "/corpus/*.jsonl.gz");
  CHECK(o.output == "/elsewhere");
  CHECK(o.tokenizer == "gpt2");
  CHECK(o.val_fraction == 0.01);
  CHECK(o.input_options.jsonl_field == "content");
  CHECK(o.input_options.text_separator == "\n<doc>\n");
  CHECK(o.input_options.strict);
  CHECK(o.filter.include == std::vector<std::string>{"**/*.py", "*.md"});
  CHECK(o.filter.exclude == std::vector<std::string>{"tests/**"});
  CHECK(o.shard_tokens == 1000);
  CHECK(o.max_bytes == 5000);
  CHECK(o.workers == 4);
  CHECK(o.window == 12);
  CHECK(o.piece_bytes == 4096);
  CHECK(o.cache_dir == "/cache");
  CHECK_FALSE(o.progress);
  CHECK_FALSE(o.repair_utf8);
  CHECK_FALSE(o.nfc);
  CHECK_FALSE(o.clean.exact_dedup);
  CHECK_FALSE(o.clean.near_dedup);
  CHECK(o.clean.near_threshold == 0.7);
  CHECK(o.clean.minhash_permutations == 64);
  CHECK(o.clean.shingle_words == 3);
  CHECK(o.clean.min_chars == 10);
  CHECK(o.clean.max_chars == 100000);
  CHECK(o.clean.max_symbol_ratio == 0.4);
  CHECK(o.clean.max_digit_ratio == 0.3);
  CHECK(o.clean.max_repeated_lines == 0.2);
  CHECK(o.fim.rate == 0.5);
  CHECK(o.fim.spm_rate == 0.25);
  CHECK(o.fim.seed == 7);
}

TEST_CASE("prepare config: relative paths are the file's folder's, training ignores the section",
          "[config][data]") {
  dseek::testing::ScratchDir dir("prepare-config");
  {
    std::ofstream out(dir / "job.toml");
    out << "[data]\ndir = \"prepared\"\n[prepare]\ninput = \"corpus\"\ncache = \"cache\"\n"
           "workers = 2\n";
  }
  const PrepareOptions o =
      prepare_options_from_config(dseek::config::load_prepare_job(dir / "job.toml"));
  CHECK(o.input == (dir / "corpus").lexically_normal());
  CHECK(o.cache_dir == (dir / "cache").lexically_normal());
  CHECK(o.output == (dir / "prepared").lexically_normal());
  // The same file as a training job: the section is checked and left alone.
  const auto job = dseek::config::load_config(dir / "job.toml");
  CHECK(job.data.dir == (dir / "prepared").lexically_normal().string());
  CHECK(dseek::config::to_toml(job).find("[prepare]") == std::string::npos);
  try {
    dseek::config::load_config_text("[prepare]\nworkres = 2\n", "train.toml");
    FAIL("a typo in [prepare] was accepted by the job loader");
  } catch (const ConfigError& error) {
    CHECK_THAT(error.what(), Catch::Contains("train.toml:2:1: prepare.workres: unknown key") &&
                                 Catch::Contains("did you mean prepare.workers?"));
  }
}

TEST_CASE("prepare config: bad values are errors naming the file, line and key",
          "[config][data]") {
  CHECK_THAT(error_of("[prepare]\nnear_threshold = 1.5\n"),
             Catch::Contains("job.toml:2:18: prepare.near_threshold: must be") &&
                 Catch::Contains("got 1.5"));
  CHECK_THAT(error_of("[prepare]\nworkers = \"two\"\n"),
             Catch::Contains("job.toml:2:11: prepare.workers: expected an integer, got string"));
  CHECK_THAT(error_of("[prepare]\nval_fraction = 1\n"), Catch::Contains("prepare.val_fraction"));
  CHECK_THAT(error_of("[prepare]\nwindow = 1\n"),
             Catch::Contains("job.toml: prepare.window (1) must be 0"));
  CHECK_THAT(error_of("[prepare]\njsonl_field = \"\"\n"), Catch::Contains("prepare.jsonl_field"));
  CHECK_THAT(error_of("prepare = 3\n"), Catch::Contains("prepare: expected a table"));
  CHECK_THAT(error_of("", {"prepare.fim_rate=2"}),
             Catch::Contains("--set prepare.fim_rate=2: prepare.fim_rate: must be"));
  CHECK_THAT(error_of("", {"prepare.nope=2"}),
             Catch::Contains("--set prepare.nope=2: prepare.nope: unknown key"));
}
