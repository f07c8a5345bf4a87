// A GPT-2 vocabulary end to end, as a user runs it: a generated JSON Lines corpus,
// gzip-compressed, prepared with the gpt2 tokenizer (`dseek data prepare`), then a tiny
// model (model.vocab = 50304: GPT-2's 50257 padded, as llm.c does) trained a few steps
// by dseek-node; a model.vocab smaller than the tokenizer's is refused, naming both.
// Also `dseek data tokenize` and `--decode` round trip through files.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {

// About 300 documents of plain English-like sentences, one JSON object per line.
std::string generated_jsonl() {
  static const char* const kWords[] = {
      "the", "model", "learns", "to", "predict", "next", "token", "from", "text", "data",
      "it's", "we'll", "a", "small", "corpus", "with", "numbers", "like", "2024", "and",
      "punctuation", "training", "runs", "on", "many", "machines", "that", "fail", "sometimes"};
  std::mt19937 rng(11);
  std::string out;
  for (int d = 0; d < 300; ++d) {
    std::string text;
    for (int w = 0, n = 20 + static_cast<int>(rng() % 60); w < n; ++w) {
      text += (w == 0 ? "" : " ");
      text += kWords[rng() % (sizeof kWords / sizeof kWords[0])];
      if (rng() % 9 == 0) text += ".";
    }
    out += "{\"id\": " + std::to_string(d) + ", \"text\": \"" + text + "\"}\n";
  }
  return out;
}

void write_gzip(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  REQUIRE(gzwrite(file, text.data(), static_cast<unsigned>(text.size())) ==
          static_cast<int>(text.size()));
  REQUIRE(gzclose(file) == Z_OK);
}

std::vector<std::string> node_job(const std::filesystem::path& data, const std::filesystem::path& run,
                                  int64_t vocab) {
  return {bin("dseek-node"), "--config", (source_dir() / "config/single.toml").string(),
          "--run-dir", run.string(), "--set", "data.dir=\"" + data.string() + "\"",
          "--set", "model.vocab=" + std::to_string(vocab), "--set", "model.dim=32",
          "--set", "model.layers=1", "--set", "model.heads=2", "--set", "model.context=32",
          "--set", "train.batch_size=8", "--set", "train.steps=20", "--set", "train.warmup_steps=2",
          "--set", "train.lr=6e-3", "--set", "train.eval_every=20", "--set", "train.threads=2",
          "--set", "metrics.progress=\"plain\"", "--set", "checkpoint.every_steps=0"};
}

}  // namespace

TEST_CASE("a gzip JSON Lines corpus prepared with gpt2 trains with model.vocab = 50304",
          "[gpt2][data]") {
  ScratchDir dir("gpt2-data");
  write_gzip(dir / "corpus/part-0.jsonl.gz", generated_jsonl());
  auto prepared = run_process({bin("dseek"), "data", "prepare", "--input", (dir / "corpus").string(),
                               "--output", (dir / "data").string(), "--tokenizer", "gpt2",
                               "--val-fraction", "0.1"},
                              60s);
  INFO(prepared.output);
  REQUIRE(prepared.exit_code == 0);
  CHECK_THAT(prepared.output, Catch::Contains("300 documents"));
  CHECK_THAT(prepared.output, Catch::Contains("r50k_base (vocabulary 50257, uint16)"));
  auto info = run_process({bin("dseek"), "data", "info", (dir / "data").string()}, 30s);
  CHECK_THAT(info.output, Catch::Contains("tokenizer r50k_base, vocabulary 50257, uint16 tokens"));
  CHECK_THAT(info.output, Catch::Contains(
                              "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"));

  auto run = run_process(node_job(dir / "data", dir / "run", 50304), 120s);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto lines = read_lines(dir / "run/node-0/events.jsonl");
  const auto steps = events_named(lines, "step");
  REQUIRE(steps.size() == 20);
  // Uniform over 50304 ids is ln(50304) = 10.83; tolerance 0.5 for the random init.
  CHECK(number_field(steps.front(), "loss") == Approx(std::log(50304.0)).margin(0.5));
  // 29 distinct words: 20 steps of lr 6e-3 take the loss well down (from 10.8 to 6.9 here).
  CHECK(number_field(steps.back(), "loss") < number_field(steps.front(), "loss") - 2.5);
  REQUIRE(events_named(lines, "train_done").size() == 1);

  auto refused = run_process(node_job(dir / "data", dir / "run-small", 256), 60s);
  INFO(refused.output);
  CHECK(refused.exit_code != 0);
  CHECK_THAT(refused.output, Catch::Contains("r50k_base") && Catch::Contains("50257") &&
                                 Catch::Contains("model.vocab = 256") &&
                                 Catch::Contains((dir / "data/index.capnp").string()));
}

TEST_CASE("dseek data tokenize prints ids and --decode gives the text back", "[gpt2][data]") {
  ScratchDir dir("gpt2-tokenize");
  {
    std::ofstream out(dir / "in.txt", std::ios::binary);
    out << "hello world";
  }
  const std::string shell = bin("dseek") + " data tokenize --tokenizer gpt2 < " +
                            (dir / "in.txt").string() + " > " + (dir / "ids.txt").string() +
                            " && " + bin("dseek") + " data tokenize --tokenizer gpt2 --decode < " +
                            (dir / "ids.txt").string();
  auto result = run_process({"/bin/sh", "-c", shell}, 30s);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK(result.output == "hello world");
  std::ifstream ids(dir / "ids.txt");
  std::string line;
  std::getline(ids, line);
  CHECK(line == "31373 995");
  auto bad = run_process({bin("dseek"), "data", "tokenize", "--tokenizer", "o200k_base"}, 30s);
  CHECK(bad.exit_code == 3);  // a data error
  CHECK_THAT(bad.output, Catch::Contains("unknown tokenizer 'o200k_base'"));
}
