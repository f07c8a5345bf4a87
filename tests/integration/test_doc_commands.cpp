// The documentation's commands cannot rot: every fenced block of README.md and docs/*.md
// whose info string is "sh runnable" runs here, as written, and must exit 0. A page's
// blocks run in order in one scratch directory (a later block may use what an earlier
// one left, as a reader following the page would), with:
//   build/    a link to this build tree (the blocks say build/bin/dseek)
//   config/single.toml  the default config shrunk to a model that trains in seconds on
//             a small prepared text, its steps (and checkpoint and evaluation periods)
//             divided by kStepScale; a `train.steps=N` in a block is divided the same way
// so a block may show the real job's numbers. A block that needs what a test cannot have
// (apt, a GPU, placeholders such as DIR_OF_TEXT) stays a plain ```sh block.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/config/load.hpp"
#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

namespace fs = std::filesystem;
using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {

constexpr int kStepScale = 10;

struct Block {
  int line = 0;  // of the opening fence
  std::string text;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<Block> runnable_blocks(const std::string& page) {
  std::vector<Block> blocks;
  std::istringstream in(page);
  std::string line;
  int number = 0;
  Block* open = nullptr;
  while (std::getline(in, line)) {
    ++number;
    if (open != nullptr) {
      if (line.rfind("```", 0) == 0) open = nullptr;
      else open->text += line + "\n";
    } else if (line == "```sh runnable") {
      blocks.push_back({number, ""});
      open = &blocks.back();
    }
  }
  return blocks;
}

// `train.steps=N` -> `train.steps=N/kStepScale`.
std::string scaled(const std::string& block) {
  static const std::regex steps("train\\.steps=([0-9]+)");
  std::string out;
  auto last = block.cbegin();
  for (std::sregex_iterator it(block.begin(), block.end(), steps), end; it != end; ++it) {
    out.append(last, (*it)[0].first);
    out += "train.steps=" + std::to_string(std::max(1, std::stoi((*it)[1].str()) / kStepScale));
    last = (*it)[0].second;
  }
  out.append(last, block.cend());
  return out;
}

// The scratch directory a page's blocks run in (see the header).
void set_up(const fs::path& dir) {
  fs::create_directory_symlink(binary_dir(), dir / "build");
  fs::create_directories(dir / "config");
  const auto real = dseek::config::load_config(source_dir() / "config/single.toml");
  const auto tiny = dseek::config::load_config(
      source_dir() / "config/single.toml",
      {"data.dir=\"" + prepared_text().string() + "\"",
       "train.run_dir=\"" + (dir / "runs/single").string() + "\"", "model.dim=64",
       "model.layers=2", "model.heads=4", "model.context=64", "train.batch_size=12",
       "train.threads=1", "train.eval_batches=1",
       "train.steps=" + std::to_string(real.train.steps / kStepScale),
       "train.warmup_steps=" + std::to_string(real.train.warmup_steps / kStepScale),
       "train.eval_every=" + std::to_string(real.train.eval_every / kStepScale),
       "checkpoint.every_steps=" + std::to_string(real.checkpoint.every_steps / kStepScale)});
  std::ofstream(dir / "config/single.toml") << dseek::config::to_toml(tiny);
}

}  // namespace

TEST_CASE("the runnable command blocks of README.md and docs/ run", "[docs][integration]") {
  std::vector<fs::path> pages{source_dir() / "README.md"};
  for (const auto& entry : fs::directory_iterator(source_dir() / "docs"))
    if (entry.path().extension() == ".md") pages.push_back(entry.path());
  size_t ran = 0;
  for (const auto& page : pages) {
    const auto blocks = runnable_blocks(read_text(page));
    if (blocks.empty()) continue;
    ScratchDir dir("doc-commands");
    set_up(dir.path());
    for (const auto& block : blocks) {
      const fs::path script = dir / ("block-" + std::to_string(block.line) + ".sh");
      std::ofstream(script) << "set -euo pipefail\ncd '" << dir.path().string() << "'\n"
                            << scaled(block.text);
      const auto result = run_process({"/bin/bash", script.string()}, 300s,
                                      {"DSEEK_CLUSTER_ENV=none"});
      INFO(page.filename().string() << ", the block at line " << block.line << ":\n"
                                    << block.text << "--- output:\n" << result.output);
      CHECK_FALSE(result.timed_out);
      CHECK(result.exit_code == 0);
      ++ran;
    }
  }
  CHECK(ran >= 2);  // README.md's first run and resume, docs/running.md's
}

TEST_CASE("the doc command test finds runnable blocks and scales steps", "[docs][integration]") {
  const auto blocks = runnable_blocks(
      "text\n```sh\nnot this\n```\n```sh runnable\na --set train.steps=600\nb\n```\n");
  REQUIRE(blocks.size() == 1);
  CHECK(blocks[0].line == 5);
  CHECK(blocks[0].text == "a --set train.steps=600\nb\n");
  CHECK(scaled(blocks[0].text) == "a --set train.steps=60\nb\n");
}
