// `dseek data prepare` as a user runs it, with the pipeline's options: --workers, the
// clean and FIM settings, a crash injected into a stage (the run recovers and writes the
// same data set), the report table and report.json; a run killed with kill -9 and
// started again with the same --cache finishes with the data set of an uninterrupted
// run; bad values and --resume are refused with a message.
#include <catch2/catch.hpp>

#include <signal.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "actors/spawned_process.hpp"
#include "support/data_test_files.hpp"
#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {

// 60 documents, a copy of one of them and a short one.
void make_corpus(const std::filesystem::path& dir) {
  std::string lines;
  for (int d = 0; d < 60; ++d) {
    std::string text = "document";
    uint64_t state = static_cast<uint64_t>(d) * 2654435761u + 1;
    for (int w = 0; w < 40; ++w) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const int n = static_cast<int>((state >> 33) % 400);
      text += ' ';
      text += static_cast<char>('a' + n % 26);
      text += static_cast<char>('a' + n / 26 % 26);
      text += "ord";
    }
    const std::string line = std::string("{\"text\": \"").append(text).append("\"}\n");
    lines += line;
    if (d == 10) lines += line;  // an exact copy
  }
  lines += "{\"text\": \"tiny\"}\n";
  write_file(dir / "docs.jsonl", lines);
}

std::vector<std::string> prepare_args(const std::filesystem::path& in,
                                      const std::filesystem::path& out) {
  return {bin("dseek"), "data", "prepare", "--input", in.string(), "--output", out.string(),
          "--workers", "2", "--piece-bytes", "512", "--min-chars", "10", "--fim-rate", "0.5",
          "--val-fraction", "0.1", "--no-progress"};
}

}  // namespace

TEST_CASE("dseek data prepare runs the pipeline with its options and recovers a crash",
          "[data][pipeline][cli]") {
  ScratchDir dir("prepare-cli");
  make_corpus(dir / "in");
  auto plain = run_process(prepare_args(dir / "in", dir / "plain"), 60s);
  INFO(plain.output);
  REQUIRE(plain.exit_code == 0);
  CHECK_THAT(plain.output, Catch::Contains("data prepare: 60 documents (") &&
                               Catch::Contains("dropped exact_duplicate") &&
                               Catch::Contains("on 2 workers"));
  CHECK_THAT(read_file(dir / "plain/report.json"),
             Catch::Contains("\"exact_duplicate\":1") && Catch::Contains("\"too_short\":1") &&
                 Catch::Contains("\"documents_in\":62") && Catch::Contains("\"documents\":60"));
  auto info = run_process({bin("dseek"), "data", "info", (dir / "plain").string()}, 30s);
  CHECK_THAT(info.output, Catch::Contains("vocabulary 259"));  // bytes + FIM sentinels

  auto args = prepare_args(dir / "in", dir / "crashed");
  args.insert(args.end(), {"--inject-crash", "tokenize:3"});
  auto crashed = run_process(args, 60s);
  INFO(crashed.output);
  REQUIRE(crashed.exit_code == 0);
  CHECK_THAT(crashed.output, Catch::Contains("1 actors restarted"));
  for (const char* file : {"index.capnp", "train-00000.tok", "val-00000.tok"}) {
    INFO(file);
    CHECK(read_file(dir / "crashed" / file) == read_file(dir / "plain" / file));
  }
  auto verify = run_process({bin("dseek"), "data", "verify", (dir / "crashed").string()}, 30s);
  CHECK(verify.exit_code == 0);
}

TEST_CASE("dseek data prepare refuses bad pipeline options and what is not built",
          "[data][pipeline][cli]") {
  ScratchDir dir("prepare-cli-refused");
  make_corpus(dir / "in");
  auto with = [&](std::vector<std::string> extra) {
    auto args = prepare_args(dir / "in", dir / "out");
    args.insert(args.end(), extra.begin(), extra.end());
    return run_process(args, 30s);
  };
  auto resume = with({"--resume"});
  CHECK(resume.exit_code == 2);
  CHECK_THAT(resume.output, Catch::Contains("--resume is not implemented"));
  auto crash = with({"--inject-crash", "nowhere:1"});
  CHECK(crash.exit_code == 2);
  CHECK_THAT(crash.output, Catch::Contains("bad value 'nowhere:1' for --inject-crash"));
  auto threshold = with({"--near-threshold", "1.5"});
  CHECK(threshold.exit_code == 2);
  CHECK_THAT(threshold.output, Catch::Contains("--near-threshold"));
  CHECK_FALSE(std::filesystem::exists(dir / "out"));
}

TEST_CASE("a prepare killed with kill -9 and run again with its cache writes the same data set",
          "[data][pipeline][cli][cache]") {
  ScratchDir dir("prepare-cli-kill");
  for (int f = 0; f < 60; ++f) {
    std::string text = "file";
    for (int w = 0; w < 60; ++w) {
      text += ' ';
      text += static_cast<char>('a' + (f * 31 + w * 17) % 26);
      text += static_cast<char>('a' + (f * 7 + w * 3) % 26);
      text += static_cast<char>('a' + (f + w * 11) % 26);
    }
    write_file(dir / "in" / std::string("f").append(std::to_string(100 + f)).append(".txt"),
               text + "\n");
  }
  auto args = [&](const char* out, bool cached) {
    std::vector<std::string> a = {bin("dseek"), "data", "prepare", "--input", (dir / "in").string(),
                                  "--output", (dir / out).string(), "--workers", "2",
                                  "--val-fraction", "0.1", "--no-progress"};
    if (cached) a.insert(a.end(), {"--cache", (dir / "cache").string()});
    return a;
  };
  auto whole = run_process(args("whole", false), 60s);
  REQUIRE(whole.exit_code == 0);

  auto slow = args("out", true);
  slow.insert(slow.end(), {"--slow-writer-ms", "50"});  // 60 files: 3 s
  auto running = dseek::test::SpawnedProcess::start(slow, (dir / "killed.log").string());
  auto entries = [&] {
    size_t n = 0;
    std::error_code error;
    for (const auto& e : std::filesystem::directory_iterator(dir / "cache", error))
      n += e.path().extension() == ".piece";
    return n;
  };
  for (int i = 0; i < 3000 && entries() < 5; ++i) std::this_thread::sleep_for(10ms);
  running.signal(SIGKILL);
  CHECK(running.wait_for(10s) == 128 + SIGKILL);
  const size_t finished = entries();
  INFO(finished << " files finished before the kill");
  REQUIRE(finished >= 5);
  REQUIRE_FALSE(std::filesystem::exists(dir / "out/index.capnp"));  // never a data set

  auto again = run_process(args("out", true), 60s);  // the same command, into the same OUT
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(read_file(dir / "out/report.json"),
             Catch::Contains(std::string("\"cached_files\":").append(std::to_string(finished))));
  for (const char* file : {"index.capnp", "train-00000.tok", "val-00000.tok"}) {
    INFO(file);
    CHECK(read_file(dir / "out" / file) == read_file(dir / "whole" / file));
  }
}
