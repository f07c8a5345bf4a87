// Unit tests of the data module: prepare (counts, round trip, determinism, split),
// corruption detection when opening, and the sample order (bijection, worker-count
// independence, shifted targets).
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "actors/data/prepare_pipeline.hpp"
#include "runtime/data/prepare.hpp"
#include "runtime/data/sample_order.hpp"
#include "runtime/data/token_dataset.hpp"
#include "support/data_test_files.hpp"
#include "support/test_paths.hpp"

namespace fs = std::filesystem;
using dseek::data::DataError;
using dseek::data::PrepareOptions;
using dseek::data::PrepareSummary;
using dseek::data::SampleOrder;
using dseek::data::Split;
using dseek::data::TokenDataset;
using dseek::testing::ScratchDir;

using dseek::testing::write_file;
using dseek::testing::data_error_of;

namespace {

std::string read_whole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text documents of the sample tree, by relative path.
std::map<std::string, std::string> sample_documents() {
  return {
      {"a.txt", "alpha: the first document\n"},
      {"b.md", "# bravo\nsecond document, a little longer than the first one\n"},
      {"c.py", "def charlie():\n    return 3\n"},
      {"sub/d.txt", "delta lives in a subdirectory\n"},
      {"sub/deeper/e.txt", "echo is nested twice, and it is the last document\n"},
      {"zz/f.txt", "foxtrot\n"},
  };
}

// A small input tree: the documents above, plus a binary file, an empty file and a
// symbolic link loop, which must all be left out.
void make_sample_tree(const fs::path& root) {
  for (const auto& [name, content] : sample_documents()) write_file(root / name, content);
  write_file(root / "sub/blob.bin", std::string("\x7f" "ELF\0\x01\x02 binary", 14));
  write_file(root / "empty.txt", "");
  fs::create_directory_symlink("..", root / "sub/loop");
}

PrepareSummary prepare(const fs::path& input, const fs::path& output, double val_fraction = 0.3,
                       uint64_t shard_tokens = 1 << 20, uint64_t max_bytes = 0,
                       bool raw_bytes = false) {
  PrepareOptions options;
  if (raw_bytes) {  // --keep-bytes --no-filters: every byte value as it is
    options.repair_utf8 = options.nfc = false;
    options.clean.max_symbol_ratio = options.clean.max_digit_ratio = 1.0;
    options.clean.max_repeated_lines = 1.0;
  }
  options.input = input;
  options.output = output;
  options.val_fraction = val_fraction;
  options.shard_tokens = shard_tokens;
  options.max_bytes = max_bytes;
  std::ostringstream log;
  return dseek::actors::prepare_dataset(options, log);
}

std::vector<int32_t> all_tokens(const TokenDataset& data) {
  std::vector<int32_t> tokens(data.num_tokens());
  data.read(0, tokens.size(), tokens.data());
  return tokens;
}

// A split's tokens cut at the separators back into documents.
std::vector<std::string> split_documents(const std::vector<int32_t>& tokens) {
  std::vector<std::string> documents;
  if (tokens.empty()) return documents;
  documents.emplace_back();
  for (int32_t token : tokens) {
    REQUIRE(token >= 0);
    REQUIRE(token < 256);
    if (token == 0) {
      documents.emplace_back();
    } else {
      documents.back().push_back(static_cast<char>(token));
    }
  }
  return documents;
}


void flip_byte(const fs::path& path, std::streamoff offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(offset);
  char byte = 0;
  file.read(&byte, 1);
  byte = static_cast<char>(byte ^ 0x5a);
  file.seekp(offset);
  file.write(&byte, 1);
  REQUIRE(file.good());
}

std::vector<std::string> sorted_listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("prepare counts documents, skipped files and tokens", "[data]") {
  ScratchDir scratch("data-counts");
  make_sample_tree(scratch / "in");
  PrepareSummary summary = prepare(scratch / "in", scratch / "out");

  const auto documents = sample_documents();
  CHECK(summary.documents == documents.size());
  CHECK(summary.binary_files == 1);
  CHECK(summary.empty_files == 1);
  CHECK(summary.unreadable_files == 0);
  CHECK(summary.skipped_files == 2);
  // The document that reaches the validation share is in both splits.
  CHECK(summary.train_documents + summary.val_documents >= documents.size());
  CHECK(summary.train_documents + summary.val_documents <= documents.size() + 1);
  CHECK(summary.train_documents >= 1);
  CHECK(summary.val_documents >= 1);

  uint64_t bytes = 0;
  for (const auto& [name, content] : documents) bytes += content.size();
  CHECK(summary.input_bytes == bytes);
  // One separator between consecutive documents of each split.
  uint64_t separators = (summary.train_documents - 1) + (summary.val_documents - 1);
  CHECK(summary.train_tokens + summary.val_tokens == bytes + separators);

  TokenDataset train = TokenDataset::open(scratch / "out", Split::train);
  TokenDataset validation = TokenDataset::open(scratch / "out", Split::validation);
  CHECK(train.num_tokens() == summary.train_tokens);
  CHECK(validation.num_tokens() == summary.val_tokens);
  CHECK(train.vocab_size() == 256);
}

TEST_CASE("prepared tokens read back as the files' bytes in path order", "[data]") {
  ScratchDir scratch("data-roundtrip");
  make_sample_tree(scratch / "in");
  // Tiny shards, so that documents and reads cross shard boundaries.
  PrepareSummary summary = prepare(scratch / "in", scratch / "out", 0.3, 7);
  CHECK(summary.shards > 4);

  std::vector<std::string> train = split_documents(
      all_tokens(TokenDataset::open(scratch / "out", Split::train)));
  std::vector<std::string> validation = split_documents(
      all_tokens(TokenDataset::open(scratch / "out", Split::validation)));
  REQUIRE(!validation.empty());
  REQUIRE(!train.empty());

  // Every document is in one split, but for the one cut at the validation share (its
  // start in validation, its rest in train); each split keeps the sorted path order.
  std::vector<std::string> expected_order;
  for (const auto& [name, content] : sample_documents()) expected_order.push_back(content);
  std::vector<std::string> merged;
  size_t t = 0, v = 0, cut = 0;
  for (const std::string& content : expected_order) {
    if (t < train.size() && train[t] == content) {
      merged.push_back(train[t++]);
    } else if (v < validation.size() && validation[v] == content) {
      merged.push_back(validation[v++]);
    } else if (v < validation.size() && t < train.size() && validation[v] + train[t] == content) {
      merged.push_back(validation[v++] + train[t++]);
      ++cut;
    }
  }
  CHECK(cut <= 1);
  CHECK(t == train.size());
  CHECK(v == validation.size());
  CHECK(merged == expected_order);

  // A read that starts inside one shard and ends several shards later.
  TokenDataset data = TokenDataset::open(scratch / "out", Split::train);
  std::vector<int32_t> whole = all_tokens(data);
  REQUIRE(whole.size() > 20);
  std::vector<int32_t> part(15);
  data.read(3, part.size(), part.data());
  CHECK(std::equal(part.begin(), part.end(), whole.begin() + 3));
  CHECK_THAT(data_error_of([&] { data.read(whole.size() - 2, 3, part.data()); }),
             Catch::Contains("past the end"));
}

TEST_CASE("prepare is deterministic: same input, byte-identical output", "[data]") {
  ScratchDir scratch("data-determinism");
  make_sample_tree(scratch / "in");
  prepare(scratch / "in", scratch / "out1", 0.3, 16);
  prepare(scratch / "in", scratch / "out2", 0.3, 16);
  std::vector<std::string> names = sorted_listing(scratch / "out1");
  REQUIRE(names == sorted_listing(scratch / "out2"));
  CHECK(std::count(names.begin(), names.end(), "index.capnp") == 1);
  for (const std::string& name : names) {
    if (name == "report.json") continue;  // it holds the run's timings
    INFO(name);
    CHECK(read_whole(scratch / "out1" / name) == read_whole(scratch / "out2" / name));
  }
}

TEST_CASE("the validation split holds the asked share of tokens, none for 0", "[data]") {
  ScratchDir scratch("data-split");
  make_sample_tree(scratch / "in");
  PrepareSummary none = prepare(scratch / "in", scratch / "zero", 0.0);
  CHECK(none.val_documents == 0);
  CHECK(none.val_tokens == 0);
  CHECK(none.train_documents == sample_documents().size());
  CHECK(TokenDataset::open(scratch / "zero", Split::validation).num_tokens() == 0);
  // The share is of the documents' tokens (separators apart), to the nearest token.
  for (double fraction : {0.05, 0.3, 0.5}) {
    INFO("fraction " << fraction);
    std::string name = "f";  // (not "f" + ...: GCC 12 warns falsely of -Wrestrict there)
    name += std::to_string(static_cast<int>(fraction * 100));
    PrepareSummary summary = prepare(scratch / "in", scratch / name, fraction);
    CHECK(static_cast<double>(summary.val_content_tokens) ==
          Approx(fraction * static_cast<double>(summary.content_tokens)).margin(0.5));
    CHECK(summary.val_tokens == summary.val_content_tokens + summary.val_documents - 1);
  }
  PrepareSummary almost_all = prepare(scratch / "in", scratch / "most", 0.999999);
  CHECK(almost_all.train_tokens >= 1);  // training always gets data
  CHECK(almost_all.val_documents >= 1);

  write_file(scratch / "single/only.txt", "just one document");
  PrepareSummary single = prepare(scratch / "single", scratch / "single-out", 0.5);
  CHECK(single.documents == 1);
  CHECK(single.train_documents == 1);
  CHECK(single.val_tokens == 9);  // 17 bytes: round(8.5) = 9 for validation
  CHECK(single.train_tokens == 8);
}

TEST_CASE("max bytes limits the input taken", "[data]") {
  ScratchDir scratch("data-max-bytes");
  make_sample_tree(scratch / "in");
  PrepareSummary summary = prepare(scratch / "in", scratch / "out", 0.3, 1 << 20, 40);
  CHECK(summary.input_bytes == 40);
  CHECK(summary.documents == 2);  // a.txt whole, then b.md cut at the limit
}

TEST_CASE("a flipped byte in a shard is an error naming the shard", "[data]") {
  ScratchDir scratch("data-flip");
  make_sample_tree(scratch / "in");
  prepare(scratch / "in", scratch / "out", 0.3, 16);
  const fs::path shard = scratch / "out" / "train-00001.tok";
  REQUIRE(fs::exists(shard));
  flip_byte(shard, static_cast<std::streamoff>(fs::file_size(shard)) - 3);
  std::string message = data_error_of([&] { TokenDataset::open(scratch / "out", Split::train); });
  CHECK_THAT(message, Catch::Contains("train-00001.tok"));
  CHECK_THAT(message, Catch::Contains("corrupt"));
  // The other split does not use that shard.
  CHECK_NOTHROW(TokenDataset::open(scratch / "out", Split::validation));
}

TEST_CASE("a damaged shard header is an error naming the shard", "[data]") {
  ScratchDir scratch("data-magic");
  make_sample_tree(scratch / "in");
  prepare(scratch / "in", scratch / "out", 0.3, 16);
  flip_byte(scratch / "out" / "train-00000.tok", 0);
  std::string message = data_error_of([&] { TokenDataset::open(scratch / "out", Split::train); });
  CHECK_THAT(message, Catch::Contains("train-00000.tok"));
  CHECK_THAT(message, Catch::Contains("magic"));
}

TEST_CASE("a truncated or missing shard is an error naming the shard", "[data]") {
  ScratchDir scratch("data-truncate");
  make_sample_tree(scratch / "in");
  prepare(scratch / "in", scratch / "out", 0.3, 16);
  const fs::path shard = scratch / "out" / "train-00002.tok";
  REQUIRE(fs::exists(shard));
  fs::resize_file(shard, fs::file_size(shard) - 2);
  std::string message = data_error_of([&] { TokenDataset::open(scratch / "out", Split::train); });
  CHECK_THAT(message, Catch::Contains("train-00002.tok"));
  CHECK_THAT(message, Catch::Contains("truncated"));

  fs::remove(shard);
  message = data_error_of([&] { TokenDataset::open(scratch / "out", Split::train); });
  CHECK_THAT(message, Catch::Contains("train-00002.tok"));
  CHECK_THAT(message, Catch::Contains("missing"));
}

TEST_CASE("a missing or malformed index is an error naming it", "[data]") {
  ScratchDir scratch("data-index");
  make_sample_tree(scratch / "in");
  prepare(scratch / "in", scratch / "out");
  const fs::path index = scratch / "out" / "index.capnp";

  write_file(index, std::string(64, '\xff'));
  std::string message = data_error_of([&] { TokenDataset::open(scratch / "out", Split::train); });
  CHECK_THAT(message, Catch::Contains("index.capnp"));
  CHECK_THAT(message, Catch::Contains("malformed"));

  fs::remove(index);
  message = data_error_of([&] { TokenDataset::open(scratch / "out", Split::train); });
  CHECK_THAT(message, Catch::Contains("index.capnp"));
  CHECK_THAT(message, Catch::Contains("missing"));
}

TEST_CASE("prepare refuses an output directory that is not empty", "[data]") {
  ScratchDir scratch("data-nonempty");
  make_sample_tree(scratch / "in");
  write_file(scratch / "out/keep.txt", "precious");
  std::string message = data_error_of([&] { prepare(scratch / "in", scratch / "out"); });
  CHECK_THAT(message, Catch::Contains((scratch / "out").string()));
  CHECK_THAT(message, Catch::Contains("not empty"));
  CHECK(sorted_listing(scratch / "out") == std::vector<std::string>{"keep.txt"});

  write_file(scratch / "file-out", "x");
  CHECK_THAT(data_error_of([&] { prepare(scratch / "in", scratch / "file-out"); }),
             Catch::Contains("not a directory"));
  CHECK_THAT(data_error_of([&] { prepare(scratch / "absent", scratch / "out2"); }),
             Catch::Contains("absent"));
}

TEST_CASE("sample order is a bijection on each epoch", "[data]") {
  for (uint64_t n : {1ull, 2ull, 3ull, 7ull, 64ull, 1000ull, 1009ull, 4097ull}) {
    for (uint64_t seed : {0ull, 42ull}) {
      SampleOrder order(seed, n);
      for (uint64_t epoch = 0; epoch < 3; ++epoch) {
        INFO("n=" << n << " seed=" << seed << " epoch=" << epoch);
        std::vector<bool> seen(n, false);
        for (uint64_t i = 0; i < n; ++i) {
          uint64_t sample = order.sample_at(epoch * n + i);
          REQUIRE(sample < n);
          REQUIRE(!seen[sample]);
          seen[sample] = true;
        }
      }
    }
  }
}

TEST_CASE("sample order differs between epochs and between seeds", "[data]") {
  const uint64_t n = 1000;
  auto epoch_order = [&](uint64_t seed, uint64_t epoch) {
    SampleOrder order(seed, n);
    std::vector<uint64_t> samples;
    for (uint64_t i = 0; i < n; ++i) samples.push_back(order.sample_at(epoch * n + i));
    return samples;
  };
  std::set<std::vector<uint64_t>> orders;
  for (uint64_t epoch = 0; epoch < 4; ++epoch) orders.insert(epoch_order(7, epoch));
  CHECK(orders.size() == 4);
  CHECK(epoch_order(7, 0) != epoch_order(8, 0));
  // Not the identity either: the order is shuffled.
  std::vector<uint64_t> identity(n);
  for (uint64_t i = 0; i < n; ++i) identity[i] = i;
  CHECK(epoch_order(7, 0) != identity);
  // Same seed, same order: a pure function.
  CHECK(epoch_order(7, 2) == epoch_order(7, 2));
}

TEST_CASE("sample order stays in range for huge sample counts", "[data]") {
  for (uint64_t n : {(1ull << 40) + 3, ~0ull}) {
    SampleOrder order(1, n);
    std::set<uint64_t> samples;
    for (uint64_t i = 0; i < 100; ++i) {
      uint64_t sample = order.sample_at(i);
      CHECK(sample < n);
      samples.insert(sample);
    }
    CHECK(samples.size() == 100);
  }
}

TEST_CASE("samples_in counts windows of context plus one tokens", "[data]") {
  CHECK(dseek::data::samples_in(0, 4) == 0);
  CHECK(dseek::data::samples_in(4, 4) == 0);
  CHECK(dseek::data::samples_in(5, 4) == 1);
  CHECK(dseek::data::samples_in(8, 4) == 1);
  CHECK(dseek::data::samples_in(9, 4) == 2);
  CHECK(dseek::data::samples_in(1001, 10) == 100);
  CHECK(dseek::data::samples_in(100, 0) == 0);
}

namespace {

// A data set whose train split is one document of known bytes.
std::string make_single_document_dataset(const ScratchDir& scratch, size_t bytes) {
  std::string content;
  for (size_t i = 0; i < bytes; ++i) content.push_back(static_cast<char>(1 + (i * 37) % 255));
  write_file(scratch / "in/only.txt", content);
  prepare(scratch / "in", scratch / "out", 0.0, 100, 0, true);  // several shards, all train
  return content;
}

}  // namespace

TEST_CASE("fill_batch gives the same batch whatever the slicing across workers", "[data]") {
  ScratchDir scratch("data-batch");
  const std::string content = make_single_document_dataset(scratch, 1000);
  TokenDataset data = TokenDataset::open(scratch / "out", Split::train);
  REQUIRE(data.num_tokens() == content.size());

  const int64_t context = 16, batch = 6;
  SampleOrder order(3, dseek::data::samples_in(data.num_tokens(), context));
  const size_t size = static_cast<size_t>(batch * context);
  for (uint64_t step : {0ull, 1ull, 17ull}) {
    INFO("step " << step);
    std::vector<int32_t> inputs(size), targets(size);
    dseek::data::fill_batch(data, order, step, batch, 0, batch, context, inputs.data(),
                            targets.data());
    for (int workers : {2, 3}) {
      INFO(workers << " workers");
      std::vector<int32_t> sliced_inputs(size, -1), sliced_targets(size, -1);
      int64_t per_worker = batch / workers;
      for (int w = 0; w < workers; ++w) {
        int64_t first = w * per_worker;
        dseek::data::fill_batch(data, order, step, batch, first, per_worker, context,
                                sliced_inputs.data() + first * context,
                                sliced_targets.data() + first * context);
      }
      CHECK(sliced_inputs == inputs);
      CHECK(sliced_targets == targets);
    }
    // Each sequence is the window of its sample; targets are the inputs shifted by one.
    for (int64_t j = 0; j < batch; ++j) {
      uint64_t sample = order.sample_at(step * batch + static_cast<uint64_t>(j));
      for (int64_t k = 0; k < context; ++k) {
        size_t at = static_cast<size_t>(j * context + k);
        size_t token = static_cast<size_t>(sample * context + k);
        CHECK(inputs[at] == static_cast<unsigned char>(content[token]));
        CHECK(targets[at] == static_cast<unsigned char>(content[token + 1]));
        if (k + 1 < context) CHECK(targets[at] == inputs[at + 1]);
      }
    }
  }
}

TEST_CASE("fill_batch without enough tokens names the context and the token count", "[data]") {
  ScratchDir scratch("data-too-short");
  make_single_document_dataset(scratch, 50);
  TokenDataset data = TokenDataset::open(scratch / "out", Split::train);
  SampleOrder order(0, 0);
  std::vector<int32_t> inputs(64), targets(64);
  std::string message = data_error_of([&] {
    dseek::data::fill_batch(data, order, 0, 1, 0, 1, 64, inputs.data(), targets.data());
  });
  CHECK_THAT(message, Catch::Contains("context of 64"));
  CHECK_THAT(message, Catch::Contains("50"));
}
