// The Hugging Face GPT-2 layout (runtime/export/hf_gpt2.hpp): the exported folder read
// by a loader written against the published GPT-2 layout (tests/reference/
// gpt2_hf_reference.py: names, shapes, Conv1D transposes, its own forward in float64 on
// PyTorch), export then import bit for bit, the import as a checkpoint that loads, and
// bad input: a truncated file, an unknown or missing tensor, a shape that does not match
// config.json, an output that exists.
//
// Tolerance: the reference's float64 logits against dseek's fp32 decoder on the same
// weights (for bf16, the weights rounded to bf16 on both sides): max |difference| <=
// 1e-4 x max |logit|.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/load.hpp"
#include "runtime/config/load.hpp"
#include "runtime/export/hf_gpt2.hpp"
#include "runtime/export/import_checkpoint.hpp"
#include "runtime/export/safetensors_file.hpp"
#include "runtime/infer/decoder.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/numerics/bf16.hpp"
#include "support/process.hpp"
#include "support/small_gpt.hpp"
#include "support/test_paths.hpp"

namespace ex = dseek::exporting;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using dseek::checkpoint::CheckpointError;
using dseek::testing::ScratchDir;

namespace {

const dseek::model::GptShape kShape{.dim = 48, .layers = 2, .heads = 4, .context = 40,
                                    .vocab = 256};

std::vector<float> small_params() {
  auto backend = dseek::backend::make_cpu_backend(1);
  dseek::model::GptModel model(kShape, {0, kShape.layers}, *backend, 1);
  dseek::testing::init_nontrivial(model, 13, 0.05);
  return {model.params(), model.params() + model.num_params()};
}

std::vector<float> read_floats(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("hf export: the published GPT-2 layout, read by an independent loader, gives "
          "dseek's logits", "[export][hf][pytorch]") {
  const std::vector<float> params = small_params();
  auto backend = dseek::backend::make_cpu_backend(1);
  ScratchDir dir("hf-export");
  auto batch = dseek::testing::random_batch(1, kShape.context, kShape.vocab, 5);
  {
    std::ofstream ids(dir / "ids.bin", std::ios::binary);
    ids.write(reinterpret_cast<const char*>(batch.tokens.data()),
              static_cast<std::streamsize>(batch.tokens.size() * sizeof(int32_t)));
  }
  for (ex::TensorDtype dtype : {ex::TensorDtype::f32, ex::TensorDtype::bf16}) {
    const fs::path out = dir / (std::string("gpt2-") + ex::dtype_name(dtype));
    ex::export_hf_gpt2(kShape, params, out, {.dtype = dtype, .end_of_text = 0, .step = 4});
    CHECK(fs::exists(out / "model.safetensors"));
    CHECK(fs::exists(out / "config.json"));
    auto ran = dseek::testing::run_process(
        {"/usr/bin/python3",
         (dseek::testing::source_dir() / "tests/reference/gpt2_hf_reference.py").string(),
         out.string(), (dir / "ids.bin").string(), (dir / "logits.bin").string()},
        120s);
    INFO(ran.output);
    REQUIRE(ran.exit_code == 0);
    CHECK_THAT(ran.output, Contains(std::string("layout ok 48 2 4 256 40 ") +
                                    (dtype == ex::TensorDtype::f32 ? "float32" : "bfloat16") +
                                    " 0"));
    // dseek's logits on the weights as stored (bf16: rounded).
    std::vector<float> stored = params;
    if (dtype == ex::TensorDtype::bf16)
      for (float& v : stored) v = dseek::numerics::bf16_to_fp32(dseek::numerics::fp32_to_bf16(v));
    dseek::infer::Decoder decoder(kShape, *backend, stored);
    const auto& mine = decoder.append(batch.tokens, true);
    const std::vector<float> reference = read_floats(dir / "logits.bin");
    REQUIRE(reference.size() == mine.size());
    double worst = 0.0, largest = 0.0;
    for (size_t i = 0; i < mine.size(); ++i) {
      largest = std::max(largest, std::abs(static_cast<double>(reference[i])));
      worst = std::max(worst, std::abs(static_cast<double>(reference[i]) - mine[i]));
    }
    WARN(ex::dtype_name(dtype) << ": GPT-2 reference vs dseek max |logit difference| " << worst
                               << " (max |logit| " << largest << ")");
    CHECK(worst <= 1e-4 * largest);
  }
}

TEST_CASE("hf export then import is bit-identical, and the import is a checkpoint",
          "[export][hf]") {
  const std::vector<float> params = small_params();
  ScratchDir dir("hf-roundtrip");
  ex::export_hf_gpt2(kShape, params, dir / "fp32", {});
  const ex::HfGpt2 back = ex::import_hf_gpt2(dir / "fp32");
  CHECK(back.shape.dim == kShape.dim);
  CHECK(back.shape.layers == kShape.layers);
  CHECK(back.shape.heads == kShape.heads);
  CHECK(back.shape.context == kShape.context);
  CHECK(back.shape.vocab == kShape.vocab);
  CHECK(same_bits(back.params, params));

  ex::export_hf_gpt2(kShape, params, dir / "bf16", {.dtype = ex::TensorDtype::bf16});
  std::vector<float> rounded = params;
  for (float& v : rounded) v = dseek::numerics::bf16_to_fp32(dseek::numerics::fp32_to_bf16(v));
  CHECK(same_bits(ex::import_hf_gpt2(dir / "bf16").params, rounded));
  CHECK(fs::file_size(dir / "bf16" / "model.safetensors") <
        fs::file_size(dir / "fp32" / "model.safetensors") * 6 / 10);

  const fs::path written =
      ex::write_imported_checkpoint(back, dseek::config::default_config(), dir / "checkpoints");
  CHECK(written.filename() == "step-00000000");
  const auto loaded = dseek::checkpoint::load(written, dseek::model::ParamLayout(kShape));
  CHECK(same_bits(loaded.params, params));
  CHECK(loaded.manifest.step == 0);
  const auto job = dseek::config::load_config_text(loaded.manifest.config_toml, "manifest");
  CHECK(job.model.dim == 48);
  CHECK(job.model.context == 40);
  // A second import into the same folder would mix with what is there: refused.
  CHECK_THROWS_WITH(
      ex::write_imported_checkpoint(back, dseek::config::default_config(), dir / "checkpoints"),
      Contains("already holds checkpoints"));
  // An export over an existing folder is refused and leaves it as it was.
  const auto before = fs::file_size(dir / "fp32" / "model.safetensors");
  CHECK_THROWS_WITH(ex::export_hf_gpt2(kShape, params, dir / "fp32", {}), Contains("exists"));
  CHECK(fs::file_size(dir / "fp32" / "model.safetensors") == before);
  for (const auto& entry : fs::directory_iterator(dir.path()))
    CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);
}

TEST_CASE("hf import: bad input is refused, naming the file and the tensor", "[export][hf]") {
  const std::vector<float> params = small_params();
  ScratchDir dir("hf-bad");
  const fs::path good = dir / "good";
  ex::export_hf_gpt2(kShape, params, good, {});
  const auto tensors = ex::read_safetensors(good / "model.safetensors");
  auto variant = [&](const std::string& name, std::vector<ex::StoredTensor> ts) {
    const fs::path out = dir / name;
    fs::create_directories(out);
    fs::copy_file(good / "config.json", out / "config.json");
    ex::write_safetensors(out / "model.safetensors", ts, {});
    return out;
  };

  SECTION("a truncated file") {
    const fs::path out = dir / "truncated";
    fs::copy(good, out);
    fs::resize_file(out / "model.safetensors", fs::file_size(out / "model.safetensors") - 100);
    CHECK_THROWS_WITH(ex::import_hf_gpt2(out),
                      Contains((out / "model.safetensors").string()) &&
                          Contains("transformer.ln_f.bias") && Contains("truncated"));
    fs::resize_file(out / "model.safetensors", 5);
    CHECK_THROWS_WITH(ex::import_hf_gpt2(out), Contains("too short"));
  }
  SECTION("an unknown tensor") {
    auto ts = tensors;
    ts.push_back(ts.back());
    ts.back().name = "transformer.h.7.ln_1.bias";
    CHECK_THROWS_WITH(ex::import_hf_gpt2(variant("unknown", ts)),
                      Contains("tensor transformer.h.7.ln_1.bias is not a tensor of GPT-2 with "
                               "2 layers"));
  }
  SECTION("a missing tensor") {
    auto ts = tensors;
    ts.erase(std::find_if(ts.begin(), ts.end(), [](const auto& t) {
      return t.name == "transformer.h.1.mlp.c_fc.weight";
    }));
    CHECK_THROWS_WITH(ex::import_hf_gpt2(variant("missing", ts)),
                      Contains("transformer.h.1.mlp.c_fc.weight (shape [48, 192]) is missing"));
  }
  SECTION("a shape config.json does not give") {
    auto ts = tensors;
    for (auto& t : ts)
      if (t.name == "transformer.h.0.attn.c_attn.weight") {
        t.shape = {144, 48};  // dseek's (out, in), not GPT-2's Conv1D (in, out)
      }
    CHECK_THROWS_WITH(ex::import_hf_gpt2(variant("shape", ts)),
                      Contains("tensor transformer.h.0.attn.c_attn.weight has shape [144, 48]; ") &&
                          Contains("config.json makes it [48, 144]"));
  }
  SECTION("an untied head, and names without the transformer. prefix") {
    auto ts = tensors;
    for (auto& t : ts) t.name = t.name.substr(std::string("transformer.").size());
    CHECK(same_bits(ex::import_hf_gpt2(variant("unprefixed", ts)).params, params));
    ts.push_back(ts.front());  // wte as lm_head.weight: tied, accepted
    ts.back().name = "lm_head.weight";
    CHECK_NOTHROW(ex::import_hf_gpt2(variant("tied", ts)));
    ts.back().bytes[0] ^= 1;
    CHECK_THROWS_WITH(ex::import_hf_gpt2(variant("untied", ts)),
                      Contains("lm_head.weight differs from transformer.wte.weight"));
  }
  SECTION("a config of another architecture") {
    const fs::path out = dir / "config";
    fs::copy(good, out);
    std::ifstream in(out / "config.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    text.replace(text.find("gelu_new"), 8, "relu");
    std::ofstream(out / "config.json") << text;
    CHECK_THROWS_WITH(ex::import_hf_gpt2(out),
                      Contains((out / "config.json").string()) &&
                          Contains("\"activation_function\" must be \"gelu_new\""));
  }
}
