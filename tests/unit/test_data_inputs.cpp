// Unit tests of `dseek data prepare`'s inputs and tokenizers: JSON Lines with a chosen
// text field, gzip and zstd files, damaged files and bad lines named, counted and
// skipped (errors under strict), hidden and version-control files left out, the
// --include/--exclude globs, BPE data sets (uint16 for GPT-2, uint32 for cl100k_base)
// that read back as the tokenizer's ids, an index of format 1 that reads as bytes, and
// the model vocabulary check.
#include <catch2/catch.hpp>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <zstd.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/data/dataset_index.hpp"
#include "runtime/data/glob_match.hpp"
#include "actors/data/prepare_pipeline.hpp"
#include "runtime/data/prepare.hpp"
#include "runtime/data/token_dataset.hpp"
#include "runtime/data/tokenizer.hpp"
#include "runtime/data/vocab_check.hpp"
#include "schemas/shard_index.capnp.h"
#include "support/data_test_files.hpp"
#include "support/test_paths.hpp"

namespace fs = std::filesystem;
namespace data = dseek::data;
using dseek::data::DataError;
using dseek::data::Split;
using dseek::data::TokenDataset;
using dseek::testing::ScratchDir;

using dseek::testing::write_file;
using dseek::testing::gzip;
using dseek::testing::data_error_of;

namespace {


std::string zstd(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  size_t size = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3);
  REQUIRE(!ZSTD_isError(size));
  out.resize(size);
  return out;
}

std::string jsonl(const std::vector<std::string>& texts, const std::string& field = "text") {
  std::string out;
  for (const std::string& text : texts) out += "{\"id\": 1, \"" + field + "\": \"" + text + "\"}\n";
  return out;
}

struct Prepared {
  data::PrepareSummary summary;
  std::string log;
};

Prepared prepare(const fs::path& input, const fs::path& output,
                 const std::function<void(data::PrepareOptions&)>& adjust = {}) {
  data::PrepareOptions options;
  options.input = input;
  options.output = output;
  options.val_fraction = 0;
  if (adjust) adjust(options);
  std::ostringstream log;
  Prepared result{dseek::actors::prepare_dataset(options, log), log.str()};
  return result;
}

std::vector<uint32_t> train_tokens(const fs::path& dir) {
  TokenDataset data = TokenDataset::open(dir, Split::train);
  std::vector<int32_t> tokens(data.num_tokens());
  data.read(0, tokens.size(), tokens.data());
  return {tokens.begin(), tokens.end()};
}

std::string train_text(const fs::path& dir, const char* tokenizer = "bytes") {
  std::string text;
  data::open_tokenizer(tokenizer)->decode(train_tokens(dir), text);
  return text;
}


}  // namespace

TEST_CASE("JSON Lines give one document per line, from the chosen field", "[data][inputs]") {
  ScratchDir scratch("inputs-jsonl");
  write_file(scratch / "in/a.jsonl", jsonl({"first", "second \\u00e9 \\n line", "nul \\u0000 x"}));
  write_file(scratch / "in/b.ndjson", jsonl({"third"}, "body"));
  auto result = prepare(scratch / "in", scratch / "out");
  CHECK(result.summary.documents == 2);
  CHECK(result.summary.missing_field_lines == 1);
  CHECK_THAT(result.log, Catch::Contains("b.ndjson:1: no string field \"text\""));
  // NUL separates the byte tokenizer's documents: a text with one is refused.
  CHECK(result.summary.malformed_lines == 1);
  CHECK_THAT(result.log, Catch::Contains("a.jsonl:3: the text holds a NUL byte"));
  // The NUL byte separates documents of the byte tokenizer.
  CHECK(train_text(scratch / "out") == std::string("first") + '\0' + "second \xC3\xA9 \n line");

  auto body = prepare(scratch / "in", scratch / "out-body",
                      [](data::PrepareOptions& o) { o.input_options.jsonl_field = "body"; });
  CHECK(body.summary.documents == 1);
  CHECK(body.summary.missing_field_lines == 3);
  CHECK(train_text(scratch / "out-body") == "third");
}

TEST_CASE("gzip and zstd files are read decompressed, as text or JSON Lines", "[data][inputs]") {
  ScratchDir scratch("inputs-compressed");
  write_file(scratch / "in/a.txt.gz", gzip("gzip text"));
  write_file(scratch / "in/b.jsonl.gz", gzip(jsonl({"gz one"})) + gzip(jsonl({"gz two"})));
  write_file(scratch / "in/c.jsonl.zst", zstd(jsonl({"zstd line"})));
  write_file(scratch / "in/d.txt.zst", zstd("zstd text"));
  auto result = prepare(scratch / "in", scratch / "out");
  CHECK(result.summary.documents == 5);  // two gzip members read as one stream
  CHECK(result.summary.skipped_files == 0);
  CHECK(train_text(scratch / "out") ==
        std::string("gzip text\0gz one\0gz two\0zstd line\0zstd text", 43));
}

TEST_CASE("damaged files and bad lines are named, counted and skipped, and strict refuses them",
          "[data][inputs]") {
  ScratchDir scratch("inputs-damaged");
  const std::string gz = gzip(jsonl({"lost 1", "lost 2", "lost 3"}));
  const std::string zst = zstd(jsonl({"lost zstd"}));
  write_file(scratch / "in/cut.jsonl.gz", gz.substr(0, gz.size() - 10));
  write_file(scratch / "in/cut.jsonl.zst", zst.substr(0, zst.size() - 4));
  write_file(scratch / "in/good.jsonl",
             "{\"text\": \"kept\"}\n{\"text\": broken\n\n[1, 2]\n{\"text\": 5}\n{\"text\": \"also kept\"}\n");
  auto result = prepare(scratch / "in", scratch / "out");
  CHECK(result.summary.damaged_files == 2);
  CHECK(result.summary.malformed_lines == 2);      // line 2 (not JSON), line 4 (an array)
  CHECK(result.summary.missing_field_lines == 1);  // line 5 (a number)
  CHECK(result.summary.documents == 2);            // the blank line 3 is no problem
  CHECK_THAT(result.log, Catch::Contains("truncated gzip file " + (scratch / "in/cut.jsonl.gz").string()));
  CHECK_THAT(result.log, Catch::Contains("truncated zstd file " + (scratch / "in/cut.jsonl.zst").string()));
  CHECK_THAT(result.log, Catch::Contains("good.jsonl:2: malformed JSON"));
  CHECK_THAT(result.log, Catch::Contains("good.jsonl:4: the line is not a JSON object"));
  CHECK_THAT(result.log, Catch::Contains("good.jsonl:5: no string field \"text\""));
  CHECK(train_text(scratch / "out") == std::string("kept\0also kept", 14));
  CHECK(data::read_dataset_index(scratch / "out").skipped_records == 3);

  const std::string message = data_error_of([&] {
    prepare(scratch / "in", scratch / "strict", [](data::PrepareOptions& o) { o.input_options.strict = true; });
  });
  CHECK_THAT(message, Catch::Contains("truncated gzip file") && Catch::Contains("--strict"));
  CHECK(fs::is_empty(scratch / "strict"));  // nothing of the failed run is left
  fs::remove(scratch / "in/cut.jsonl.gz");
  fs::remove(scratch / "in/cut.jsonl.zst");
  CHECK_THAT(data_error_of([&] {
               prepare(scratch / "in", scratch / "strict",
                       [](data::PrepareOptions& o) { o.input_options.strict = true; });
             }),
             Catch::Contains((scratch / "in/good.jsonl").string() + ":2: malformed JSON"));
}

TEST_CASE("hidden and version-control files are left out, and --include and --exclude pick files",
          "[data][inputs]") {
  ScratchDir scratch("inputs-filter");
  write_file(scratch / "in/a.txt", "a");
  write_file(scratch / "in/src/b.py", "b");
  write_file(scratch / "in/src/c.py", "c");
  write_file(scratch / "in/.hidden", "hidden");
  write_file(scratch / "in/.git/config", "git");
  write_file(scratch / "in/.hg/store/data", "hg");
  write_file(scratch / "in/CVS/Entries", "cvs");
  auto all = prepare(scratch / "in", scratch / "all");
  CHECK(all.summary.documents == 3);
  CHECK(all.summary.hidden_files == 1);  // .hidden; .git, .hg and CVS are not even entered
  CHECK(train_text(scratch / "all") == std::string("a\0b\0c", 5));

  auto py = prepare(scratch / "in", scratch / "py", [](data::PrepareOptions& o) {
    o.filter.include = {"*.py"};
    o.filter.exclude = {"src/c.*"};
  });
  CHECK(train_text(scratch / "py") == "b");
  CHECK(py.summary.filtered_files == 2);
  // An include glob that names a hidden file takes it.
  auto hidden = prepare(scratch / "in", scratch / "hidden",
                        [](data::PrepareOptions& o) { o.filter.include = {".hidden", "**/*.txt"}; });
  CHECK(train_text(scratch / "hidden") == std::string("hidden\0a", 8));

  CHECK(data::glob_match("*.py", "deep/er/x.py"));
  CHECK_FALSE(data::glob_match("src/*.py", "src/deep/x.py"));
  CHECK(data::glob_match("src/**/*.py", "src/deep/x.py"));
  CHECK(data::glob_match("src/**/*.py", "src/x.py"));
  CHECK(data::glob_match("data-[0-9]?.json[l]", "data-42.jsonl"));
  CHECK_FALSE(data::glob_match("data-[!0-9]*", "data-42"));
}

TEST_CASE("BPE data sets hold the tokenizer's ids: uint16 for GPT-2, uint32 for cl100k_base",
          "[data][inputs][tokenizer]") {
  ScratchDir scratch("inputs-bpe");
  write_file(scratch / "in/a.jsonl.gz", gzip(jsonl({"Hello world, it's GPT-2.", "Second doc 12345"})));
  for (const char* name : {"gpt2", "cl100k_base"}) {
    INFO(name);
    const auto tokenizer = data::open_tokenizer(name);
    const fs::path out = scratch / name;
    prepare(scratch / "in", out, [&](data::PrepareOptions& o) { o.tokenizer = name; });
    const data::DatasetIndex index = data::read_dataset_index(out);
    CHECK(index.tokenizer == tokenizer->name());
    CHECK(index.tokenizer_sha256 == tokenizer->files_sha256());
    CHECK(index.vocab_size == tokenizer->vocab_size());
    CHECK(index.separator_token == tokenizer->separator());
    CHECK(index.token_dtype == (std::string(name) == "gpt2" ? data::TokenDtype::uint16_le
                                                              : data::TokenDtype::uint32_le));
    std::vector<uint32_t> expected;
    tokenizer->encode("Hello world, it's GPT-2.", expected);
    expected.push_back(tokenizer->separator());
    tokenizer->encode("Second doc 12345", expected);
    CHECK(train_tokens(out) == expected);
    CHECK(fs::file_size(out / "train-00000.tok") ==
          32 + expected.size() * data::token_bytes(index.token_dtype));
  }
}

TEST_CASE("an index of format 1 (no tokenizer hash, uint16) reads as a byte data set",
          "[data][inputs]") {
  ScratchDir scratch("inputs-v1");
  write_file(scratch / "in/a.txt", "old data");
  prepare(scratch / "in", scratch / "out");
  // Rewrite the index as format 1 wrote it: no tokenizer hash, no skipped records.
  data::DatasetIndex index = data::read_dataset_index(scratch / "out");
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<dseek::schema::ShardIndex>();
  root.setFormatVersion(1);
  root.setTokenizer("bytes");
  root.setVocabSize(256);
  root.setTokenDtype(dseek::schema::TokenDtype::UINT16_LE);
  root.setSourceDir(index.source_dir);
  root.setInputBytes(index.input_bytes);
  auto shards = root.initTrain().initShards(1);
  root.getTrain().setDocuments(1);
  root.getTrain().setTokens(index.train.tokens);
  shards[0].setFileName(index.train.shards[0].file_name);
  shards[0].setTokens(index.train.shards[0].tokens);
  shards[0].setBytes(index.train.shards[0].bytes);
  shards[0].setXxhash64(index.train.shards[0].xxhash64);
  root.initValidation();
  auto words = capnp::messageToFlatArray(message);
  write_file(scratch / "out/index.capnp",
             std::string(reinterpret_cast<const char*>(words.asBytes().begin()), words.asBytes().size()));
  TokenDataset old = TokenDataset::open(scratch / "out", Split::train);
  CHECK(old.tokenizer() == "bytes");
  CHECK(old.tokenizer_sha256().empty());
  CHECK(old.vocab_size() == 256);
  CHECK(train_text(scratch / "out") == "old data");
}

TEST_CASE("training refuses a data set whose vocabulary does not fit model.vocab",
          "[data][inputs][tokenizer]") {
  ScratchDir scratch("inputs-vocab");
  write_file(scratch / "in/a.txt", "some text for GPT-2");
  prepare(scratch / "in", scratch / "out", [](data::PrepareOptions& o) { o.tokenizer = "gpt2"; });
  TokenDataset data = TokenDataset::open(scratch / "out", Split::train);
  CHECK_NOTHROW(data::check_model_vocab(data, 50257));
  CHECK_NOTHROW(data::check_model_vocab(data, 50304));  // padded, as llm.c does
  const std::string message = data_error_of([&] { data::check_model_vocab(data, 256); });
  CHECK_THAT(message, Catch::Contains("r50k_base") && Catch::Contains("50257") &&
                          Catch::Contains("model.vocab = 256") &&
                          Catch::Contains((scratch / "out/index.capnp").string()));
}
