// Implementation of node_runs.hpp.
#include "support/node_runs.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <regex>

#include "support/process.hpp"
#include "support/test_paths.hpp"

namespace dseek::testing {

using namespace std::chrono_literals;

std::string bin(const char* name) { return (binary_dir() / "bin" / name).string(); }

const std::filesystem::path& prepared_text() {
  static ScratchDir dir("node-data");
  static bool ready = false;
  if (!ready) {
    auto result = run_process({bin("dseek"), "data", "prepare", "--input", "/usr/lib/python3.11",
                               "--output", (dir / "text").string(), "--max-bytes", "3000000"},
                              60s);
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    ready = true;
  }
  static const std::filesystem::path path = dir / "text";
  return path;
}

std::vector<std::string> tiny_job(const std::filesystem::path& run_dir, int steps,
                                  const std::vector<std::string>& extra) {
  std::vector<std::string> job = {
      bin("dseek-node"), "--config", (source_dir() / "config/single.toml").string(),
      "--run-dir", run_dir.string(),
      "--set", "data.dir=\"" + prepared_text().string() + "\"",
      "--set", "model.dim=64", "--set", "model.layers=2", "--set", "model.heads=4",
      "--set", "model.context=64", "--set", "train.batch_size=8",
      "--set", "train.steps=" + std::to_string(steps), "--set", "train.warmup_steps=5",
      "--set", "train.eval_every=20", "--set", "train.threads=2",
      "--set", "metrics.progress=\"plain\""};
  job.insert(job.end(), extra.begin(), extra.end());
  return job;
}

std::vector<std::string> read_lines(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> events_named(const std::vector<std::string>& lines,
                                      const std::string& event) {
  std::vector<std::string> found;
  for (const auto& line : lines)
    if (line.find("\"event\":\"" + event + "\"") != std::string::npos) found.push_back(line);
  return found;
}

std::vector<std::string> node_events(const std::filesystem::path& run_dir,
                                     const std::string& event) {
  return events_named(read_lines(run_dir / "node-0/events.jsonl"), event);
}

double number_field(const std::string& line, const std::string& key) {
  std::smatch match;
  REQUIRE(std::regex_search(line, match, std::regex("\"" + key + "\":([-0-9.eE+]+)")));
  return std::stod(match[1]);
}

std::string string_field(const std::string& line, const std::string& key) {
  std::smatch match;
  REQUIRE(std::regex_search(line, match, std::regex("\"" + key + "\":\"([^\"]*)\"")));
  return match[1];
}

}  // namespace dseek::testing
