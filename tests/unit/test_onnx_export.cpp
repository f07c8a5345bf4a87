// The ONNX export (runtime/export/onnx_export.hpp) run by ONNX Runtime itself (npm's
// onnxruntime-node, tests/support/onnx_logits.cjs) and checked by ONNX's own checker
// (Debian's python3-onnx, full_check: the graph, the operators at opset 17, shape
// inference). Logits of a batch of two sequences, at the full context and at a
// shorter length (the graph's dimensions are dynamic), against the decoder's forward
// on the same weights (runtime/infer/decoder.hpp, itself checked against GptModel in
// test_generate.cpp).
//
// Tolerance: max |logit difference| <= 1e-4 x max |logit|, relative to the largest
// logit because single logits near zero have no meaningful relative error. Both sides
// are fp32; ONNX Runtime uses its own GEMM, exp and tanh, and dseek a fast exp
// (util/fast_math.hpp), so they agree to fp32 rounding plus those kernels' errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/checkpoint/error.hpp"
#include "runtime/export/onnx_export.hpp"
#include "runtime/infer/decoder.hpp"
#include "runtime/model/gpt_model.hpp"
#include "support/process.hpp"
#include "support/small_gpt.hpp"
#include "support/test_paths.hpp"

using namespace std::chrono_literals;
using dseek::testing::run_process;
using dseek::testing::ScratchDir;

namespace {

const dseek::model::GptShape kShape{.dim = 64, .layers = 2, .heads = 4, .context = 80,
                                    .vocab = 256};

std::vector<float> read_floats(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

}  // namespace

TEST_CASE("onnx export: ONNX Runtime computes dseek's logits and the checker accepts it",
          "[onnx][export]") {
  auto backend = dseek::backend::make_cpu_backend(1);
  dseek::model::GptModel model(kShape, {0, kShape.layers}, *backend, 1);
  dseek::testing::init_nontrivial(model, 9, 0.05);
  const std::span<const float> params(model.params(), model.num_params());
  ScratchDir dir("onnx-export");
  const auto onnx_file = dir / "model.onnx";
  dseek::exporting::export_onnx(kShape, params, onnx_file, 12);
  CHECK_FALSE(std::filesystem::exists(onnx_file.string() + ".tmp"));

  auto checked = run_process(
      {"/usr/bin/python3", "-c",
       "import onnx, sys\n"
       "m = onnx.load(sys.argv[1])\n"
       "onnx.checker.check_model(m, full_check=True)\n"
       "print('checker ok, opset', m.opset_import[0].version, 'ir', m.ir_version,\n"
       "      'inputs', [i.name for i in m.graph.input], 'outputs', [o.name for o in m.graph.output])\n",
       onnx_file.string()},
      120s);
  INFO(checked.output);
  REQUIRE(checked.exit_code == 0);
  CHECK_THAT(checked.output, Catch::Contains("checker ok, opset 17 ir 8 inputs ['input_ids'] "
                                             "outputs ['logits']"));

  dseek::infer::Decoder decoder(kShape, *backend, params);
  for (int64_t T : {kShape.context, int64_t{7}}) {
    const int64_t B = 2;
    auto batch = dseek::testing::random_batch(B, T, kShape.vocab, static_cast<uint32_t>(T));
    {
      std::ofstream ids(dir / "ids.bin", std::ios::binary);
      ids.write(reinterpret_cast<const char*>(batch.tokens.data()),
                static_cast<std::streamsize>(batch.tokens.size() * sizeof(int32_t)));
    }
    auto ran = run_process({"/usr/bin/node", (dseek::testing::source_dir() /
                                              "tests/support/onnx_logits.cjs").string(),
                            onnx_file.string(), (dir / "ids.bin").string(), std::to_string(B),
                            std::to_string(T), (dir / "logits.bin").string()},
                           120s);
    INFO(ran.output);
    REQUIRE(ran.exit_code == 0);
    CHECK_THAT(ran.output, Catch::Contains("logits dims 2 " + std::to_string(T) + " 256 type float32"));
    const std::vector<float> onnx = read_floats(dir / "logits.bin");
    REQUIRE(onnx.size() == static_cast<size_t>(B * T * kShape.vocab));
    double worst = 0.0, largest = 0.0;
    for (int64_t b = 0; b < B; ++b) {
      decoder.reset();
      const auto& mine = decoder.append(std::span(batch.tokens).subspan(b * T, T), true);
      for (size_t i = 0; i < mine.size(); ++i) {
        largest = std::max(largest, static_cast<double>(std::abs(mine[i])));
        worst = std::max(worst, static_cast<double>(std::abs(mine[i] - onnx[b * T * kShape.vocab + i])));
      }
    }
    WARN("sequence " << T << ": ONNX Runtime vs dseek max |logit difference| " << worst
                     << " (max |logit| " << largest << ", relative " << worst / largest << ")");
    CHECK(worst <= 1e-4 * largest);
  }
}

TEST_CASE("onnx export: a parameter count of another model is refused, nothing written",
          "[onnx][export]") {
  ScratchDir dir("onnx-bad");
  std::vector<float> too_few(100, 0.0f);
  CHECK_THROWS_AS(dseek::exporting::export_onnx(kShape, too_few, dir / "m.onnx", 0),
                  dseek::checkpoint::CheckpointError);
  CHECK_FALSE(std::filesystem::exists(dir / "m.onnx"));
  CHECK_THROWS_WITH(dseek::exporting::export_onnx(kShape, too_few, dir / "m.onnx", 0),
                    Catch::Contains("m.onnx") && Catch::Contains("100 parameters"));
}
