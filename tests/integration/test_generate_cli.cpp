// `dseek generate` as a user runs it: on the checkpoint of a tiny training run, found by
// `latest` or by its path, decoded with the byte tokenizer its data set's index names;
// the same seed gives the same text, a prompt that fills the context is refused (exit
// 2), --device cuda is refused by name (exit 3), as is a run without checkpoints.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// The text generate wrote: its output up to the summary line on stderr.
std::string text_of(const std::string& output) {
  const size_t summary = output.rfind("generate: ");
  REQUIRE(summary != std::string::npos);
  return output.substr(0, summary);
}

ProcessResult generate(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {bin("dseek"), "generate"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, 120s);
}

}  // namespace

TEST_CASE("generate: text from a tiny run's checkpoint, the same for the same seed",
          "[integration][generate]") {
  ScratchDir dir("generate-cli");
  const fs::path run = dir / "run";
  {
    auto trained = run_process(tiny_job(run, 10, {"--set", "checkpoint.every_steps=10"}), 180s);
    INFO(trained.output);
    REQUIRE(trained.exit_code == 0);
  }
  const std::vector<std::string> sample = {"--checkpoint", "latest", "--run-dir", run.string(),
                                           "--prompt", "def ", "--max-tokens", "40",
                                           "--temperature", "0.8", "--top-k", "50",
                                           "--seed", "3", "--threads", "1"};
  auto first = generate(sample);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.output, Contains("step-00000010 (step 10), 4 prompt tokens"));
  CHECK_THAT(first.output, Contains("seed 3"));
  const std::string text = text_of(first.output);
  CHECK(text.size() > 1);
  auto again = generate(sample);
  REQUIRE(again.exit_code == 0);
  CHECK(text_of(again.output) == text);

  // By its path, greedy, and an empty prompt (a new document).
  auto greedy = generate({"--checkpoint", (run / "checkpoints" / "step-00000010").string(),
                          "--prompt", "", "--temperature", "0", "--max-tokens", "10"});
  INFO(greedy.output);
  CHECK(greedy.exit_code == 0);
  CHECK_THAT(greedy.output, Contains("1 prompt tokens"));

  // 64 bytes are 64 tokens: the whole context of the tiny model.
  auto too_long = generate({"--checkpoint", "latest", "--run-dir", run.string(), "--prompt",
                            std::string(64, 'x')});
  INFO(too_long.output);
  CHECK(too_long.exit_code == 2);
  CHECK_THAT(too_long.output,
             Contains("the prompt is 64 tokens and the model's context is 64"));

  auto cuda = generate({"--checkpoint", "latest", "--run-dir", run.string(), "--prompt", "a",
                        "--device", "cuda"});
  CHECK(cuda.exit_code == 3);
  CHECK_THAT(cuda.output, Contains("no CUDA kernel yet"));

  auto nothing = generate({"--checkpoint", "latest", "--run-dir", (dir / "none").string(),
                           "--prompt", "a"});
  CHECK(nothing.exit_code == 3);
  CHECK_THAT(nothing.output, Contains("no committed checkpoint under"));

  auto no_run = generate({"--checkpoint", "latest", "--prompt", "a"});
  CHECK(no_run.exit_code == 2);
  CHECK_THAT(no_run.output, Contains("needs --config FILE or --run-dir DIR"));
}
