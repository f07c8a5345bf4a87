// The GPU check's flow without a GPU (issue 7): bench/gpu/gpt2_train trains a tiny GPT on
// the CPU backend and reports speed and MFU by llm.c's formula; --precision bf16 and fp8
// train through model::PrecisionPolicy there too; bench/gpu/check.sh --device cpu runs its rows,
// prints the table last and writes the same table and a JSON summary; a missing binary
// fails its row and the script. Its parallel rows run P = 2 and T = 2 on the scrambled
// test device there (bench/gpu/parallel_device_check.sh), its wide_fp8 row fp8 against
// bf16 on a wider model, and its user-path row the same
// bf16 model through dseek-node and through gpt2_train.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {

const std::vector<std::string> kTinyModel = {"--device", "cpu", "--threads", "1", "--layers",
                                             "2", "--dim", "32", "--heads", "2", "--context",
                                             "16", "--vocab", "64", "--batch", "2"};

std::string last_line(const std::string& text) {
  std::istringstream lines(text);
  std::string line, last;
  while (std::getline(lines, line))
    if (!line.empty()) last = line;
  return last;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The object of row `name` in check.sh's JSON summary.
std::string row(const std::string& json, const std::string& name) {
  std::smatch match;
  REQUIRE(std::regex_search(json, match, std::regex("\\{\"name\":\"" + name + "\"[^}]*\\}")));
  return match[0];
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("gpt2_train trains a tiny GPT on the CPU backend and reports tokens/s and MFU",
          "[gpu_check]") {
  const auto result = run_process(
      with({bin("gpt2_train")}, with(kTinyModel, {"--steps", "8", "--warmup", "2", "--lr",
                                                  "1e-2", "--peak-tflops", "0.01"})),
      120s);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  for (int step = 1; step <= 8; ++step)
    CHECK(result.output.find("step " + std::to_string(step) + "/8 loss ") != std::string::npos);

  const std::string json = last_line(result.output);
  CHECK(string_field(json, "status") == "ok");
  // The model's parameters, gradients and AdamW moments alone are 4 x 4 bytes per parameter.
  CHECK(number_field(json, "peak_memory_bytes") >= 16.0 * number_field(json, "params"));
  const double first = number_field(json, "first_loss"), last = number_field(json, "last_loss");
  CHECK(std::isfinite(first));
  CHECK(std::isfinite(last));
  // One repeated batch: the model memorises it, so the loss must fall clearly.
  CHECK(last < first - 0.1);
  CHECK(json.find("\"loss_decreased\":true") != std::string::npos);

  // N: wte 128x32 (vocabulary 64 padded to a multiple of 128, counted as llm.c counts
  // its padded Vp) + wpe 16x32 + 2 blocks of 12 C^2 + 13 C + the final LayerNorm 2 C.
  const double C = 32, L = 2, T = 16;
  const double params = 128 * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
  CHECK(number_field(json, "vocab") == 64);
  CHECK(number_field(json, "padded_vocab") == 128);
  // The padded ids take no part in the loss: at step 1 it is near ln 64, not ln 128.
  CHECK(std::abs(first - std::log(64.0)) < 0.1);
  CHECK(number_field(json, "params") == params);
  CHECK(number_field(json, "flops_per_token") == Approx(6 * params + 6 * L * C * T));
  const double tokens_per_s = number_field(json, "tokens_per_s");
  CHECK(tokens_per_s > 0);
  CHECK(tokens_per_s == Approx(2 * 16 / (number_field(json, "step_ms_median") / 1000)).epsilon(1e-4));
  CHECK(number_field(json, "mfu") ==
        Approx(tokens_per_s * (6 * params + 6 * L * C * T) / 0.01e12).epsilon(1e-4));
}

TEST_CASE("gpt2_train trains a tiny GPT in bf16 and fp8 on the CPU backend", "[gpu_check]") {
  for (const char* precision : {"bf16", "fp8"}) {
    const auto result = run_process(
        with({bin("gpt2_train")}, with(kTinyModel, {"--steps", "8", "--warmup", "2", "--lr",
                                                    "1e-2", "--precision", precision})),
        120s);
    INFO(precision << "\n" << result.output);
    REQUIRE(result.exit_code == 0);
    const std::string json = last_line(result.output);
    CHECK(string_field(json, "status") == "ok");
    CHECK(string_field(json, "precision") == precision);
    const double first = number_field(json, "first_loss"), last = number_field(json, "last_loss");
    CHECK(std::isfinite(first));
    CHECK(std::isfinite(last));
    // The same memorisation bound as fp32: rounding the block matmuls' operands must not
    // stop the model from learning one repeated batch.
    CHECK(last < first - 0.1);
    // bf16 has no loss scaler; fp8's first steps may skip while the scale settles, not all.
    const double skipped = number_field(json, "skipped_steps");
    if (std::string(precision) == "bf16") CHECK(skipped == 0);
    CHECK(skipped < 4);
  }
  const auto bad = run_process({bin("gpt2_train"), "--precision", "fp16"}, 60s);
  CHECK(bad.exit_code == 1);
  CHECK(bad.output.find("--precision must be fp32, bf16 or fp8") != std::string::npos);
}

TEST_CASE("check.sh --device cpu runs the check's rows and writes the table and JSON",
          "[gpu_check]") {
  ScratchDir out("gpu-check");
  const auto result = run_process({"bash", (source_dir() / "bench/gpu/check.sh").string(),
                                   "--device", "cpu", "--bin-dir", (binary_dir() / "bin").string(),
                                   "--out", out.path().string(), "--peak-tflops", "0.01",
                                   "--steps", "4"},
                                  300s);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);

  // The table is printed last, and the same table is in gpu_check.txt.
  const std::string table = read_file(out / "gpu_check.txt");
  REQUIRE(!table.empty());
  CHECK(result.output.size() >= table.size());
  CHECK(result.output.compare(result.output.size() - table.size(), table.size(), table) == 0);
  CHECK(std::regex_search(table, std::regex("train_fp32 +ok +[0-9]+ +[0-9.]+%")));
  CHECK(std::regex_search(table, std::regex("train_bf16 +ok +[0-9]+ +[0-9.]+%")));
  CHECK(std::regex_search(table, std::regex("train_fp8 +ok +[0-9]+ +[0-9.]+%")));
  // bf16 with the tiled attention kernels beside it, and the ratio of the two
  CHECK(std::regex_search(table, std::regex("train_bf16_tiled +ok +[0-9]+ +[0-9.]+%")));
  CHECK(std::regex_search(table, std::regex("bf16 \\(default attention\\) / bf16_tiled = [0-9.]+")));

  const std::string json = read_file(out / "gpu_check.json");
  CHECK(json.find("\"failed\":false") != std::string::npos);
  CHECK(string_field(row(json, "parity"), "status") == "skipped");
  CHECK(string_field(row(json, "nccl"), "status") == "skipped");  // NCCL needs a GPU
  CHECK(number_field(row(json, "peak"), "bf16_tflops") == Approx(0.01));
  const std::string fp32 = row(json, "train_fp32");
  CHECK(string_field(fp32, "status") == "ok");
  CHECK(number_field(fp32, "tokens_per_s") > 0);
  CHECK(number_field(fp32, "mfu") > 0);
  CHECK(std::isfinite(number_field(fp32, "last_loss")));
  for (const char* name : {"train_bf16", "train_bf16_tiled", "train_fp8"}) {
    const std::string mixed = row(json, name);
    CHECK(string_field(mixed, "status") == "ok");
    CHECK(std::isfinite(number_field(mixed, "last_loss")));
    CHECK(number_field(mixed, "skipped_steps") >= 0);
  }
  CHECK(std::filesystem::exists(out / "train_fp32.log"));
  // The PyTorch peer (Debian's python3-torch, which the test dependencies install): the
  // same tiny model in bf16 autocast, and the ratio to dseek's bf16 row.
  const std::string peer = row(json, "peer_bf16");
  CHECK(string_field(peer, "status") == "ok");
  CHECK(number_field(peer, "tokens_per_s") > 0);
  CHECK(std::stod(string_field(peer, "dseek_over_pytorch")) > 0);
  // Pipeline and tensor parallelism: two dseek-node processes on the scrambled device
  // against the CPU backend (equal losses there; 1e-4 relative is the row's bound).
  for (const char* name : {"parallel_p2", "parallel_t2"}) {
    const std::string parallel = row(json, name);
    CHECK(string_field(parallel, "status") == "ok");
    CHECK(string_field(parallel, "device") == "scrambled-cpu-for-tests");
    CHECK(number_field(parallel, "max_relative_loss_difference") == 0.0);
  }
  // fp8 against bf16 on the wider model, both from one row: their rates and the ratio.
  const std::string wide = row(json, "wide_fp8");
  CHECK(string_field(wide, "status") == "ok");
  CHECK(number_field(wide, "bf16_tokens_per_s") > 0);
  CHECK(number_field(wide, "fp8_over_bf16") ==
        Approx(number_field(wide, "fp8_tokens_per_s") / number_field(wide, "bf16_tokens_per_s"))
            .epsilon(1e-2));
  // The user path: the same bf16 model through dseek-node and through gpt2_train, both
  // rates from their own runs and the ratio of the two (no bound asserted: a timing).
  const std::string user = row(json, "user_path");
  CHECK(string_field(user, "status") == "ok");
  const double node_rate = number_field(user, "tokens_per_s");
  const double bench_rate = number_field(user, "bench_tokens_per_s");
  CHECK(node_rate > 0);
  CHECK(bench_rate > 0);
  CHECK(number_field(user, "node_over_bench") == Approx(node_rate / bench_rate).epsilon(1e-2));
  CHECK(string_field(user, "detail").find("optimizer 2 gradient_shard actors") != std::string::npos);
}

TEST_CASE("check.sh fails the rows whose binaries are missing", "[gpu_check]") {
  ScratchDir out("gpu-check-missing");
  ScratchDir empty("gpu-check-empty-bin");
  const auto result = run_process({"bash", (source_dir() / "bench/gpu/check.sh").string(),
                                   "--device", "cpu", "--bin-dir", empty.path().string(), "--out",
                                   out.path().string()},
                                  60s);
  INFO(result.output);
  CHECK(result.exit_code == 1);
  const std::string json = read_file(out / "gpu_check.json");
  CHECK(json.find("\"failed\":true") != std::string::npos);
  CHECK(string_field(row(json, "train_fp32"), "status") == "missing");
}
