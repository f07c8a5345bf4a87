// Bounds the file readers keep on input that agrees with itself (checksums and headers
// right) but holds what no real file does, each a fix from fuzzing them (issue 28,
// fuzz/): a safetensors shape whose element count wraps around 64 bits, a GPT-2
// config.json whose sizes no model.safetensors can back, a token id outside the data
// set's vocabulary, and a checkpoint manifest whose tensor shape is far larger than its
// slices (or overflows), and an empty config.json. Each is a clear error naming the
// file; before, the first was accepted as an empty tensor, the second and fourth ended in
// std::bad_alloc (or an overflow in the layout), the third reached training as an
// out-of-range embedding row, the last passed a null pointer to simdjson (UBSan).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/load.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/config/load.hpp"
#include "runtime/data/dataset_index.hpp"
#include "runtime/data/shard_file.hpp"
#include "runtime/data/token_dataset.hpp"
#include "runtime/export/hf_gpt2.hpp"
#include "runtime/export/import_checkpoint.hpp"
#include "runtime/export/safetensors_file.hpp"
#include "support/test_paths.hpp"

namespace ex = dseek::exporting;
namespace ck = dseek::checkpoint;
namespace d = dseek::data;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string safetensors_with_header(const std::string& json, size_t data_bytes) {
  std::string header = json;
  while (header.size() % 8 != 0) header += ' ';
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(header.size() >> (8 * i));
  return out + header + std::string(data_bytes, '\0');
}

const dseek::model::GptShape kTiny{.dim = 4, .layers = 1, .heads = 2, .context = 4, .vocab = 8};

}  // namespace

TEST_CASE("safetensors: a shape whose element count overflows is refused, not read as "
          "empty", "[export][safetensors][fuzz-fixes]") {
  dseek::testing::ScratchDir dir("st-overflow");
  // 2^33 x 2^31 float32 elements: 2^66 bytes, which wraps to 0 in 64 bits.
  write_text(dir / "wrap.safetensors",
             safetensors_with_header(R"({"w":{"dtype":"F32","shape":[8589934592,2147483648],)"
                                     R"("data_offsets":[0,0]}})",
                                     0));
  CHECK_THROWS_WITH(ex::read_safetensors(dir / "wrap.safetensors"),
                    Contains("wrap.safetensors: tensor w: shape [8589934592, 2147483648]") &&
                        Contains("more elements than any file holds"));
  // A zero extent is a real, empty tensor.
  write_text(dir / "empty.safetensors",
             safetensors_with_header(R"({"e":{"dtype":"F32","shape":[0,8589934592],)"
                                     R"("data_offsets":[0,0]}})",
                                     0));
  const auto tensors = ex::read_safetensors(dir / "empty.safetensors");
  REQUIRE(tensors.size() == 1);
  CHECK(tensors[0].elements() == 0);
}

TEST_CASE("hf import: config.json sizes that model.safetensors cannot hold are refused "
          "before allocating", "[export][hf][fuzz-fixes]") {
  dseek::testing::ScratchDir dir("hf-absurd");
  const std::vector<float> params(dseek::model::ParamLayout(kTiny).total(), 0.5f);
  ex::export_hf_gpt2(kTiny, params, dir / "tiny", {});
  for (const char* sizes : {R"("n_embd": 1099511627776, "n_layer": 1, "n_head": 2)",
                            R"("n_embd": 4, "n_layer": 1000000000000, "n_head": 2)",
                            R"("n_embd": 4294967296, "n_layer": 4294967296, "n_head": 2)"}) {
    write_text(dir / "tiny" / "config.json",
               std::string(R"({"model_type": "gpt2", "vocab_size": 8, "n_positions": 4, )") +
                   sizes + "}");
    INFO(sizes);
    CHECK_THROWS_WITH(ex::import_hf_gpt2(dir / "tiny"),
                      Contains("config.json: n_embd") && Contains("parameters, more than the tensors of") &&
                          Contains("model.safetensors"));
  }
}

TEST_CASE("hf import: an empty config.json is an error naming it", "[export][hf][fuzz-fixes]") {
  dseek::testing::ScratchDir dir("hf-empty-config");
  const std::vector<float> params(dseek::model::ParamLayout(kTiny).total(), 0.5f);
  ex::export_hf_gpt2(kTiny, params, dir / "tiny", {});
  write_text(dir / "tiny" / "config.json", "");
  CHECK_THROWS_WITH(ex::import_hf_gpt2(dir / "tiny"),
                    Contains("tiny/config.json: empty, not a JSON object"));
}

TEST_CASE("token data set: an id outside the index's vocabulary is an error naming the "
          "shard", "[data][fuzz-fixes]") {
  dseek::testing::ScratchDir dir("shard-ids");
  const std::vector<uint32_t> tokens{104, 105, 300, 0};  // 300: not a byte
  d::ShardWriter writer(dir.path(), "train-00000.bin", tokens.size(), d::TokenDtype::uint16_le);
  writer.append_tokens(tokens.data(), tokens.size());
  d::DatasetIndex index;
  index.tokenizer = "bytes";
  index.vocab_size = 256;
  index.train.documents = 1;
  index.train.tokens = tokens.size();
  index.train.shards.push_back(writer.finish());
  d::write_dataset_index(dir.path(), index);
  CHECK_THROWS_WITH(d::TokenDataset::open(dir.path(), d::Split::train),
                    Contains("train-00000.bin: token 2 is id 300") &&
                        Contains("vocabulary of 256"));
  // Ids the vocabulary has open and read back as written.
  dseek::testing::ScratchDir good("shard-ids-good");
  const std::vector<uint32_t> bytes{104, 105, 255, 0};
  d::ShardWriter good_writer(good.path(), "train-00000.bin", bytes.size(), d::TokenDtype::uint16_le);
  good_writer.append_tokens(bytes.data(), bytes.size());
  index.train.shards = {good_writer.finish()};
  d::write_dataset_index(good.path(), index);
  std::vector<int32_t> back(bytes.size());
  d::TokenDataset::open(good.path(), d::Split::train).read(0, back.size(), back.data());
  CHECK(back == std::vector<int32_t>{104, 105, 255, 0});
}

TEST_CASE("checkpoint load: a manifest shape far larger than its slices, or overflowing, "
          "is an error before any allocation", "[checkpoint][fuzz-fixes]") {
  dseek::testing::ScratchDir dir("ckpt-absurd");
  const ex::HfGpt2 model{kTiny, std::vector<float>(dseek::model::ParamLayout(kTiny).total(), 0.25f)};
  const fs::path ckpt =
      ex::write_imported_checkpoint(model, dseek::config::default_config(), dir / "checkpoints");
  const ck::Manifest good = ck::read_manifest(ckpt);
  auto rewrite = [&](const std::vector<int64_t>& shape) {
    ck::Manifest m = good;
    for (auto& t : m.tensors)
      if (t.name == "wpe") t.shape = shape;
    m.checksum = ck::manifest_checksum(m);  // what a writer that is wrong writes
    ck::write_manifest(ckpt / ck::kManifestFile, m);
  };
  rewrite({int64_t{1} << 40});  // 2^40 floats: 4 TiB, from slices of 16
  CHECK_THROWS_WITH(ck::load(ckpt, dseek::model::ParamLayout(kTiny)),
                    Contains("shards of tensor wpe (param) cover 16 of 1099511627776"));
  // (write_manifest reads back what it wrote: the reader's check answers there.)
  CHECK_THROWS_WITH((rewrite({int64_t{1} << 40, int64_t{1} << 40}), ck::read_manifest(ckpt)),
                    Contains("manifest.capnp: tensor wpe") &&
                        Contains("element count overflows 64 bits"));
}
