// A GPT-2 vocabulary end to end, as a user runs it: a generated JSON Lines corpus,
// gzip-compressed, prepared with the gpt2 tokenizer (`dseek data prepare`), then a tiny
// model (model.vocab = 50304: GPT-2's 50257 padded, as llm.c does) trained a few steps
// by dseek-node; a model.vocab smaller than the tokenizer's is refused, naming both.
// Also `dseek data tokenize` and `--decode` round trip through files. And the same as a
// user runs a cluster job: one config file says how the corpus is prepared ([prepare],
// `dseek data prepare --config`) and what trains on it, `dseek launch --nodes 2` trains
// the GPT-2-vocabulary model on both replicas; the loss goes down, and no id of the data
// set is a padded id (every one below the tokenizer's 50257, all below model.vocab).
#include <catch2/catch.hpp>

#include <iomanip>

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/data/dataset_index.hpp"
#include "runtime/data/token_dataset.hpp"
#include "support/data_test_files.hpp"
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
  // The padded ids 50257 .. 50303 take no part in the softmax: near-uniform logits give
  // ln(50257) = 10.825 (not ln(50304)); tolerance 0.5 for the random init.
  CHECK(number_field(steps.front(), "loss") == Approx(std::log(50257.0)).margin(0.5));
  // 29 distinct words: 20 steps of lr 6e-3 take the loss well down (from 10.8 to 6.9 here).
  CHECK(number_field(steps.back(), "loss") < number_field(steps.front(), "loss") - 2.5);
  REQUIRE(events_named(lines, "train_done").size() == 1);

  // With model.init_std = 1e-6 every logit is ~1e-8: the step-0 loss is the log of the
  // number of ids in the softmax, ln(50257) = 10.82480 within 2e-4, where a softmax over
  // the padded 50304 would give ln(50304) = 10.82584 (9.3e-4 above).
  std::vector<std::string> tiny = node_job(dir / "data", dir / "run-tiny", 50304);
  tiny.insert(tiny.end(), {"--set", "model.init_std=1e-6", "--set", "train.steps=2", "--set",
                           "train.warmup_steps=1", "--set", "train.eval_every=2"});
  auto uniform = run_process(tiny, 120s);
  INFO(uniform.output);
  REQUIRE(uniform.exit_code == 0);
  const auto tiny_steps = events_named(read_lines(dir / "run-tiny/node-0/events.jsonl"), "step");
  REQUIRE(tiny_steps.size() == 2);
  const double step0 = number_field(tiny_steps.front(), "loss");
  WARN("padded GPT-2 vocabulary, init_std 1e-6: step-0 loss " << std::setprecision(8) << step0
       << ", ln(50257) = " << std::log(50257.0) << ", ln(50304) = " << std::log(50304.0));
  CHECK(step0 == Approx(std::log(50257.0)).margin(2e-4));

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

TEST_CASE("a corpus prepared from the job's config trains a GPT-2-vocabulary model through "
          "dseek launch", "[gpt2][data][launch]") {
  ScratchDir dir("gpt2-launch");
  // The corpus with every document twice (in two files): the copies are caught.
  const std::string corpus = generated_jsonl();
  write_gzip(dir / "corpus/part-0.jsonl.gz", corpus);
  write_gzip(dir / "corpus/part-1.jsonl.gz", corpus);
  {
    std::ofstream job(dir / "job.toml");
    job << "[model]\nvocab = 50304\ndim = 32\nlayers = 1\nheads = 2\ncontext = 32\n"
           "[train]\nbatch_size = 8\nsteps = 20\nwarmup_steps = 2\nlr = 6e-3\n"
           "eval_every = 20\nthreads = 1\nrun_dir = \"run\"\n"
           "[data]\ndir = \"data/gpt2\"\n"
           "[checkpoint]\nevery_steps = 0\n[metrics]\nprogress = \"plain\"\n"
           "[prepare]\ninput = \"corpus\"\ntokenizer = \"gpt2\"\nval_fraction = 0.1\n"
           "workers = 2\nprogress = false\n";
  }
  auto prepared = run_process(
      {bin("dseek"), "data", "prepare", "--config", (dir / "job.toml").string()}, 120s);
  INFO(prepared.output);
  REQUIRE(prepared.exit_code == 0);
  CHECK_THAT(prepared.output, Catch::Contains("r50k_base (vocabulary 50257, uint16)"));
  CHECK_THAT(read_file(dir / "data/gpt2/report.json"), Catch::Contains("\"exact_duplicate\":300"));

  // No id of the data set is one of the padded ids 50257 .. 50303.
  const auto index = dseek::data::read_dataset_index(dir / "data/gpt2");
  REQUIRE(index.vocab_size == 50257);
  uint32_t largest = 0;
  uint64_t tokens = 0;
  for (auto split : {dseek::data::Split::train, dseek::data::Split::validation}) {
    const auto data = dseek::data::TokenDataset::open(dir / "data/gpt2", split);
    std::vector<int32_t> ids(data.num_tokens());
    data.read(0, ids.size(), ids.data());
    for (int32_t id : ids) largest = std::max(largest, static_cast<uint32_t>(id));
    tokens += ids.size();
  }
  CHECK(tokens > 10000);
  CHECK(largest < 50257);

  auto launched = run_process({bin("dseek"), "launch", "--nodes", "2", (dir / "job.toml").string()},
                              240s, launch_env());
  INFO(launched.output);
  REQUIRE(launched.exit_code == 0);
  CHECK_THAT(launched.output, Catch::Contains("[launch] job done: 2 nodes, 0 restarts, exit 0"));
  std::string params[2];
  for (int node = 0; node < 2; ++node) {
    const auto steps = node_events(dir / "run", node, "step");
    REQUIRE(steps.size() == 20);
    // Uniform over the 50257 real ids (the padding is out of the softmax) is ln(50257) =
    // 10.82; tolerance 0.5 for the random init.
    CHECK(number_field(steps.front(), "loss") == Approx(std::log(50257.0)).margin(0.5));
    CHECK(number_field(steps.back(), "loss") < number_field(steps.front(), "loss") - 2.0);
    params[node] = final_params_sha256(dir / "run", node, 20);
  }
  CHECK(params[0] == params[1]);  // the two replicas trained the same model
  require_no_node_left(dir / "run", 2);
}
