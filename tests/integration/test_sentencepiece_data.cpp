// SentencePiece models as tokenizers: a tiny BPE model trained here by spm_train
// (Debian's sentencepiece) on Python sources; `dseek data tokenize` gives the ids of
// spm_encode (the library's own command) line by line; `dseek data prepare` with the
// model records it (name, SHA-256, its vocabulary), separates documents by its </s>;
// and dseek-node trains on it with model.vocab = 1024 (the model's 1000, padded).
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/util/sha256.hpp"
#include "support/data_test_files.hpp"
#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {

}  // namespace

TEST_CASE("a SentencePiece model tokenizes as spm_encode does and trains", "[sentencepiece][data]") {
  ScratchDir dir("sentencepiece");
  const std::string corpus = read_file("/usr/lib/python3.11/argparse.py") +
                             read_file("/usr/lib/python3.11/textwrap.py");
  write_file(dir / "corpus.txt", corpus);
  auto trained = run_process({"spm_train", "--input=" + (dir / "corpus.txt").string(),
                              "--model_prefix=" + (dir / "tiny").string(), "--vocab_size=1000",
                              "--model_type=bpe", "--minloglevel=2"},
                             120s);
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const std::string model = (dir / "tiny.model").string();

  // Line by line, as spm_encode reads its input.
  std::vector<std::string> lines;
  std::istringstream in(read_file("/usr/lib/python3.11/shutil.py"));
  for (std::string line; std::getline(in, line) && lines.size() < 80;) {
    if (!line.empty()) lines.push_back(line);
  }
  std::string joined;
  for (const std::string& line : lines) joined += line + "\n";
  write_file(dir / "lines.txt", joined);
  auto reference = run_process({"/bin/sh", "-c", "spm_encode --model=" + model +
                                                      " --output_format=id < " +
                                                      (dir / "lines.txt").string()},
                               60s);
  REQUIRE(reference.exit_code == 0);
  std::string ours;
  for (size_t i = 0; i < lines.size(); ++i) {
    write_file(dir / "line.txt", lines[i]);
    auto one = run_process({"/bin/sh", "-c", bin("dseek") + " data tokenize --tokenizer " + model +
                                                 " < " + (dir / "line.txt").string()},
                           30s);
    REQUIRE(one.exit_code == 0);
    ours += one.output;
  }
  CHECK(ours == reference.output);  // every id of 80 lines

  // A data set of two JSON Lines documents, then a few training steps.
  std::string jsonl;
  for (int d = 0; d < 40; ++d) jsonl += "{\"text\": \"def f" + std::to_string(d) + "(x):\\n    return x + " + std::to_string(d) + "\\n\"}\n";
  write_file(dir / "in/docs.jsonl", jsonl);
  auto prepared = run_process({bin("dseek"), "data", "prepare", "--input", (dir / "in").string(),
                               "--output", (dir / "data").string(), "--tokenizer", model,
                               "--val-fraction", "0.1"},
                              60s);
  INFO(prepared.output);
  REQUIRE(prepared.exit_code == 0);
  auto info = run_process({bin("dseek"), "data", "info", (dir / "data").string()}, 30s);
  CHECK_THAT(info.output, Catch::Contains("tokenizer sentencepiece, vocabulary 1000, uint16 tokens"));
  const std::string bytes = read_file(model);
  CHECK_THAT(info.output, Catch::Contains(dseek::util::sha256_hex(bytes.data(), bytes.size())));
  auto run = run_process(
      {bin("dseek-node"), "--config", (source_dir() / "config/single.toml").string(), "--run-dir",
       (dir / "run").string(), "--set", "data.dir=\"" + (dir / "data").string() + "\"", "--set",
       "model.vocab=1024", "--set", "model.dim=32", "--set", "model.layers=1", "--set",
       "model.heads=2", "--set", "model.context=16", "--set", "train.batch_size=4", "--set",
       "train.steps=4", "--set", "train.warmup_steps=1", "--set", "train.eval_every=0", "--set",
       "train.threads=1", "--set", "metrics.progress=\"plain\"", "--set",
       "checkpoint.every_steps=0"},
      60s);
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(events_named(read_lines(dir / "run/node-0/events.jsonl"), "train_done").size() == 1);
}
