// dseek-node and dseek as a user runs them: prepare real text (the Python standard
// library sources that the set-up installs), train, and read the events; a bad config
// and a corrupt shard must fail with messages that name the file; a signal stops a run
// cleanly; a run is reproducible from its seed.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;


TEST_CASE("dseek-node trains on real text and writes the events", "[node]") {
  ScratchDir run("node-train");
  auto result = run_process(tiny_job(run.path(), 60), 180s);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK(result.output.find("step 60/60") != std::string::npos);  // plain progress lines

  const auto lines = read_lines(run / "node-0/events.jsonl");
  REQUIRE(events_named(lines, "run_started").size() == 1);
  const auto steps = events_named(lines, "step");
  REQUIRE(steps.size() == 60);
  for (const char* key : {"loss", "lr", "tokens_per_s", "compute_ms", "comm_ms", "data_wait_ms"})
    CHECK(steps[0].find(std::string("\"") + key + "\":") != std::string::npos);
  CHECK(steps.front().find("\"ts\":") != std::string::npos);
  CHECK(steps.front().find("\"node\":0") != std::string::npos);
  CHECK(number_field(steps.front(), "step") == 1);
  CHECK(number_field(steps.back(), "step") == 60);
  // Byte-level text starts at ln(256) = 5.55 and a model that learns drops well below.
  CHECK(number_field(steps.front(), "loss") == Approx(5.55).margin(0.3));
  CHECK(number_field(steps.back(), "loss") < 3.6);

  const auto evals = events_named(lines, "eval");
  REQUIRE(evals.size() == 3);  // steps 20, 40 and the end
  CHECK(number_field(evals.back(), "val_loss") < 4.0);

  const auto done = events_named(lines, "train_done");
  REQUIRE(done.size() == 1);
  CHECK(number_field(done[0], "step") == 60);
  CHECK(std::regex_match(string_field(done[0], "params_sha256"), std::regex("[0-9a-f]{64}")));
}

TEST_CASE("a run is reproducible from its seed and thread count", "[node][determinism]") {
  ScratchDir a("node-seed-a"), b("node-seed-b"), c("node-seed-c");
  auto job_a = tiny_job(a.path(), 8);
  auto job_b = tiny_job(b.path(), 8);
  auto job_c = tiny_job(c.path(), 8);
  job_c.insert(job_c.end(), {"--set", "train.seed=7"});
  for (auto* job : {&job_a, &job_b, &job_c}) {
    auto result = run_process(*job, 120s);
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
  }
  auto sha = [](const ScratchDir& dir) {
    return string_field(events_named(read_lines(dir / "node-0/events.jsonl"), "train_done").at(0),
                        "params_sha256");
  };
  CHECK(sha(a) == sha(b));
  CHECK(sha(a) != sha(c));
}

TEST_CASE("a bad config is refused with its file, line, column and key", "[node][config]") {
  ScratchDir dir("node-config");
  {
    std::ofstream out(dir / "bad.toml");
    out << "[model]\ndim = 64\nheds = 4\n";
  }
  auto result = run_process({bin("dseek-node"), "--config", (dir / "bad.toml").string()}, 30s);
  INFO(result.output);
  CHECK(result.exit_code == 3);  // a config error: permanent, never retried
  CHECK(result.output.find("bad.toml:3:1") != std::string::npos);
  CHECK(result.output.find("model.heds") != std::string::npos);

  auto override = run_process({bin("dseek-node"), "--config", (source_dir() / "config/single.toml").string(),
                               "--set", "train.steps=-4"}, 30s);
  INFO(override.output);
  CHECK(override.exit_code == 3);
  CHECK(override.output.find("train.steps") != std::string::npos);
}

namespace {

// A 2-step node run on a copy of the prepared text in `dir` whose shard `shard` has one
// byte changed at `offset` (or is gone, with `remove`).
ProcessResult run_with_damaged_shard(const ScratchDir& dir, const std::string& shard,
                                     std::streamoff offset, bool remove = false) {
  std::filesystem::copy(prepared_text(), dir / "text");
  const auto path = dir / "text" / shard;
  REQUIRE(std::filesystem::exists(path));
  if (remove) {
    std::filesystem::remove(path);
  } else {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(offset);
    file.put('\x7f');
  }
  auto job = tiny_job(dir / "run", 2);
  job.insert(job.end(), {"--set", "data.dir=\"" + (dir / "text").string() + "\""});
  return run_process(job, 60s);
}

}  // namespace

TEST_CASE("a corrupt data shard stops the node with the shard's name", "[node][data]") {
  ScratchDir dir("node-corrupt");
  const auto result = run_with_damaged_shard(dir, "train-00000.tok", 1000);
  INFO(result.output);
  CHECK(result.exit_code == 3);  // a data error: permanent
  CHECK(result.output.find("data error: ") != std::string::npos);
  CHECK(result.output.find("train-00000.tok") != std::string::npos);
}

// Issue 28, finding 4: a corrupt validation shard was one warning, exit 0 and no val_loss.
TEST_CASE("a corrupt or missing validation shard stops the node, not just its validation",
          "[node][data]") {
  for (const bool remove : {false, true}) {
    INFO((remove ? "missing" : "corrupt"));
    ScratchDir dir(remove ? "node-val-missing" : "node-val-corrupt");
    const auto result = run_with_damaged_shard(dir, "val-00000.tok", 100, remove);
    INFO(result.output);
    CHECK(result.exit_code == 3);  // a data error: permanent
    CHECK(result.output.find("the validation split cannot be read") != std::string::npos);
    CHECK(result.output.find("val-00000.tok") != std::string::npos);
  }
}

TEST_CASE("SIGTERM stops a run at a step boundary with a train_stopped event", "[node][signal]") {
  ScratchDir run("node-signal");
  auto job = tiny_job(run.path(), 100000);
  std::thread killer([&] {
    // Wait for training to start (the first step event), then ask the node to stop.
    for (int i = 0; i < 300; ++i) {
      std::this_thread::sleep_for(100ms);
      const auto lines = read_lines(run / "node-0/events.jsonl");
      if (!events_named(lines, "step").empty()) {
        ::kill(static_cast<pid_t>(number_field(events_named(lines, "run_started").at(0), "pid")), SIGTERM);
        return;
      }
    }
  });
  auto result = run_process(job, 120s);
  killer.join();
  INFO(result.output);
  CHECK_FALSE(result.timed_out);
  CHECK(result.exit_code == 143);  // stopped by SIGTERM, after the orderly stop
  const auto lines = read_lines(run / "node-0/events.jsonl");
  REQUIRE(events_named(lines, "train_stopped").size() == 1);
  CHECK(events_named(lines, "train_done").empty());
}

TEST_CASE("dseek bench train prints one JSON line with tokens_per_s", "[bench]") {
  auto result = run_process({bin("dseek"), "bench", "train", "--steps", "2", "--warmup", "1",
                             "--threads", "2", "--set", "model.dim=64", "--set", "model.layers=2",
                             "--set", "model.context=64"},
                            120s);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK(std::regex_search(result.output, std::regex(R"(^\{"bench":"train","tokens_per_s":[0-9.]+)")));
}
