// `dseek data prepare` as a user runs it, with the pipeline's options: --workers, the
// clean and FIM settings, a crash injected into a stage (the run recovers and writes the
// same data set), the report table and report.json; a run killed with kill -9 and
// started again with the same --cache finishes with the data set of an uninterrupted
// run; bad values and --resume are refused with a message; the progress lines. The same
// settings from a job config's [prepare] section (--config FILE, output data.dir) give the
// same data set, flags win over the file, and a bad value is refused naming the file, the
// key and the value.
#include <catch2/catch.hpp>

#include <signal.h>

#include <fstream>
#include <regex>
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
    const std::string text = random_words("document", static_cast<uint64_t>(d), 40);
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

TEST_CASE("dseek data prepare --config takes the [prepare] section, the output is data.dir",
          "[data][pipeline][cli][config]") {
  ScratchDir dir("prepare-cli-config");
  make_corpus(dir / "in");
  auto flags = run_process(prepare_args(dir / "in", dir / "flags"), 60s);
  INFO(flags.output);
  REQUIRE(flags.exit_code == 0);
  // The settings of prepare_args() in the file; relative paths are the file's folder's.
  write_file(dir / "job.toml",
             "[data]\ndir = \"from-config\"\n"
             "[prepare]\ninput = \"in\"\nworkers = 2\npiece_bytes = 512\nmin_chars = 10\n"
             "fim_rate = 0.5\nval_fraction = 0.1\nprogress = false\n");
  auto from_config = run_process(
      {bin("dseek"), "data", "prepare", "--config", (dir / "job.toml").string()}, 60s);
  INFO(from_config.output);
  REQUIRE(from_config.exit_code == 0);
  CHECK_THAT(from_config.output, Catch::Contains("on 2 workers"));
  for (const char* file : {"index.capnp", "train-00000.tok", "val-00000.tok"}) {
    INFO(file);
    CHECK(read_file(dir / "from-config" / file) == read_file(dir / "flags" / file));
  }
  // A flag wins over the file, and --set over the file too.
  auto flag_wins = run_process({bin("dseek"), "data", "prepare", "--config",
                                (dir / "job.toml").string(), "--set", "prepare.fim_rate=0",
                                "--output", (dir / "no-fim").string(), "--workers", "1"},
                               60s);
  INFO(flag_wins.output);
  REQUIRE(flag_wins.exit_code == 0);
  CHECK_THAT(flag_wins.output, Catch::Contains("on 1 worker"));
  auto info = run_process({bin("dseek"), "data", "info", (dir / "no-fim").string()}, 30s);
  CHECK_THAT(info.output, Catch::Contains("vocabulary 256"));  // no FIM sentinels

  // A bad value names the file, the key and why; nothing is written.
  write_file(dir / "bad.toml", "[data]\ndir = \"bad-out\"\n[prepare]\ninput = \"in\"\n"
                               "near_threshold = 1.5\n");
  auto bad = run_process({bin("dseek"), "data", "prepare", "--config", (dir / "bad.toml").string()},
                         30s);
  INFO(bad.output);
  CHECK(bad.exit_code == 3);
  CHECK_THAT(bad.output, Catch::Contains("bad.toml") && Catch::Contains("prepare.near_threshold") &&
                             Catch::Contains("1.5"));
  write_file(dir / "typo.toml", "[prepare]\ninput = \"in\"\nworkres = 2\n");
  auto typo = run_process({bin("dseek"), "data", "prepare", "--config",
                           (dir / "typo.toml").string()}, 30s);
  INFO(typo.output);
  CHECK(typo.exit_code == 3);
  CHECK_THAT(typo.output, Catch::Contains("prepare.workres"));
  auto no_config = run_process({bin("dseek"), "data", "prepare", "--set", "prepare.workers=2"}, 30s);
  CHECK(no_config.exit_code == 2);
  CHECK_THAT(no_config.output, Catch::Contains("--set needs --config FILE"));
  CHECK_FALSE(std::filesystem::exists(dir / "bad-out"));
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

TEST_CASE("dseek data prepare prints a progress line with each stage's rate, MB/s and an ETA",
          "[data][pipeline][cli]") {
  ScratchDir dir("prepare-cli-progress");
  for (int f = 0; f < 40; ++f) {
    std::string text = "file";
    for (int w = 0; w < 80; ++w) {
      text += ' ';
      text += static_cast<char>('a' + (f * 13 + w * 7) % 26);
      text += static_cast<char>('a' + (f * 5 + w * 3) % 26);
      text += "ing";
    }
    write_file(dir / "in" / std::string("f").append(std::to_string(100 + f)).append(".txt"),
               text + "\n");
  }
  // A slow writer (40 files x 60 ms): the run lasts over 2 s, a line a second.
  auto run = run_process({bin("dseek"), "data", "prepare", "--input", (dir / "in").string(),
                          "--output", (dir / "out").string(), "--workers", "2",
                          "--slow-writer-ms", "60"},
                         60s);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const std::regex line(
      R"(data prepare: \d+ s, \d+/40 files \| decode \d+ \(\d+/s, 0 waiting\) \| )"
      R"(clean \d+ \(\d+/s, \d+ waiting\) \| dedup \d+ \(\d+/s, \d+ waiting\) \| )"
      R"(tokenize \d+ \(\d+/s, \d+ waiting\) \| write \d+ \(\d+/s, \d+ waiting\) documents; )"
      R"([0-9.]+ MB/s, ETA \d+ s)");
  CHECK(std::regex_search(run.output, line));
  // The stage queues: the pieces wait before the slow writer, on the progress lines and
  // at most the window (8 with 2 workers) less the one being written in the summary.
  CHECK(std::regex_search(run.output, std::regex(R"(\| write \d+ \(\d+/s, [1-9]\d* waiting\))")));
  CHECK(std::regex_search(run.output,
                          std::regex(R"(stage write .* at most [1-7] pieces waiting)")));
  // Without a terminal the lines are plain: no carriage return, no escape sequence.
  CHECK(run.output.find('\r') == std::string::npos);
  CHECK(run.output.find('\x1b') == std::string::npos);

  // On a terminal (util-linux `script` gives it one): a line per stage, redrawn in place.
  const std::string command = bin("dseek") + " data prepare --input " + (dir / "in").string() +
                              " --output " + (dir / "tty").string() +
                              " --workers 2 --slow-writer-ms 60";
  auto tty = run_process({"script", "-q", "-e", "-c", command, "/dev/null"}, 60s);
  INFO(tty.output);
  REQUIRE(tty.exit_code == 0);
  for (const char* stage : {"decode", "clean", "dedup", "tokenize", "write"}) {
    INFO(stage);
    CHECK(std::regex_search(tty.output, std::regex(std::string("\x1b\\[2K  ") + stage +
                                                   R"( +\d+ documents +\d+/s +[0-9.]+ MB/s)")));
  }
  CHECK(tty.output.find("\x1b[6A") != std::string::npos);  // back up over the 6 lines
  CHECK(read_file(dir / "tty/train-00000.tok") == read_file(dir / "out/train-00000.tok"));
}
