// Checkpoints as a user meets them through dseek-node and `dseek ckpt`: a run stopped
// after 8 steps and resumed ends with the same parameters as one that never stopped;
// `latest` falls back past a corrupted checkpoint, naming the file and tensor; a failed
// or impossible write is reported and training goes on; SIGTERM leaves a checkpoint;
// the ckpt tools list, inspect, verify and export.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// The shared tiny job with evaluations every 7 steps (so resumed runs cross them).
std::vector<std::string> ckpt_job(const fs::path& run_dir, int steps,
                                  std::vector<std::string> extra = {}) {
  extra.insert(extra.begin(), {"--set", "train.eval_every=7"});
  return dseek::testing::tiny_job(run_dir, steps, extra);
}

std::vector<std::string> events(const fs::path& run, const std::string& event) {
  return node_events(run, event);
}

std::string run_ok(const std::vector<std::string>& job) {
  auto result = run_process(job, 180s);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  return result.output;
}

std::string final_sha(const fs::path& run) {
  const auto done = events(run, "train_done");
  REQUIRE(done.size() == 1);
  CHECK(number_field(done[0], "step") == 20);
  return string_field(done[0], "params_sha256");
}

void flip_byte(const fs::path& file, std::streamoff offset) {
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(offset);
  char byte = 0;
  io.read(&byte, 1);
  byte = static_cast<char>(byte ^ 0x21);
  io.seekp(offset);
  io.write(&byte, 1);
}

}  // namespace

TEST_CASE("a run stopped after 8 steps and resumed ends with the same parameters",
          "[checkpoint][resume]") {
  ScratchDir straight("ckpt-straight"), stopped("ckpt-stopped"), spare("ckpt-spare");
  run_ok(ckpt_job(straight.path(), 20));
  const std::string expected = final_sha(straight.path());

  // Synchronous writes, so that no periodic checkpoint is skipped on a busy machine.
  run_ok(ckpt_job(stopped.path(), 20,
                  {"--set", "train.stop_after_steps=8", "--set", "checkpoint.every_steps=3",
                   "--set", "checkpoint.async=false"}));
  const auto stop = events(stopped.path(), "train_stopped");
  REQUIRE(stop.size() == 1);
  CHECK(string_field(stop[0], "reason") == "stop_after_steps");
  CHECK(number_field(stop[0], "step") == 8);
  CHECK(events(stopped.path(), "train_done").empty());
  const auto committed = events(stopped.path(), "checkpoint_committed");
  REQUIRE(committed.size() == 3);  // steps 3, 6 and the stop at 8
  CHECK(number_field(committed[2], "step") == 8);
  for (const char* key : {"bytes", "snapshot_ms", "write_ms"}) CHECK(number_field(committed[2], key) > 0);
  const fs::path newest = string_field(committed[2], "path");
  CHECK(newest == stopped / "checkpoints/step-00000008");
  fs::copy(stopped / "checkpoints", spare / "checkpoints", fs::copy_options::recursive);

  // THE test: resume the stopped run to step 20.
  run_ok(ckpt_job(stopped.path(), 20, {"--resume", "latest"}));
  const auto resumed = events(stopped.path(), "resumed");
  REQUIRE(resumed.size() == 1);
  CHECK(number_field(resumed[0], "step") == 8);
  CHECK(final_sha(stopped.path()) == expected);

  // A corrupted newest checkpoint: latest falls back to step 6, says why, and still
  // arrives at the same parameters.
  const fs::path bad = spare / "checkpoints/step-00000008/params.bin";
  flip_byte(bad, 70000);  // inside wpe (wte is 256 x 64 floats = 65536 bytes)
  auto output = run_ok(ckpt_job(spare.path(), 20, {"--set", "checkpoint.resume=\"latest\""}));
  CHECK_THAT(output, Contains(bad.string()));
  CHECK_THAT(output, Contains("tensor wpe"));
  CHECK_THAT(output, Contains("falling back to"));
  const auto fallback = events(spare.path(), "checkpoint_fallback");
  REQUIRE(fallback.size() == 1);
  CHECK_THAT(string_field(fallback[0], "fallback"), Contains("step-00000006"));
  CHECK(number_field(events(spare.path(), "resumed").at(0), "step") == 6);
  CHECK(final_sha(spare.path()) == expected);

  // The tools on the same checkpoints.
  auto verify = run_process({bin("dseek"), "ckpt", "verify", (spare / "checkpoints/step-00000008").string()}, 60s);
  CHECK(verify.exit_code == 1);
  CHECK_THAT(verify.output, Contains("params.bin"));
  CHECK_THAT(verify.output, Contains("tensor wpe"));
  auto good = run_process({bin("dseek"), "ckpt", "verify", (spare / "checkpoints/step-00000006").string()}, 60s);
  CHECK(good.exit_code == 0);
  auto ls = run_process({bin("dseek"), "ckpt", "ls", (stopped / "checkpoints").string()}, 60s);
  CHECK(ls.exit_code == 0);
  CHECK_THAT(ls.output, Contains("step-00000020"));  // the end of the resumed run
  auto inspect = run_process({bin("dseek"), "ckpt", "inspect", newest.string()}, 60s);
  CHECK(inspect.exit_code == 0);
  CHECK_THAT(inspect.output, Contains("world size 1, data 1"));
  CHECK_THAT(inspect.output, Contains("[256, 64]"));
  auto exported = run_process({bin("dseek"), "ckpt", "export", newest.string(), "--format",
                               "safetensors", "--output", (spare / "m.safetensors").string()}, 60s);
  INFO(exported.output);
  CHECK(exported.exit_code == 0);
  CHECK(fs::file_size(spare / "m.safetensors") > 4 * 64 * 256);

  // A truncated file or a garbled manifest, asked for by path: an error naming it.
  const fs::path six = spare / "checkpoints/step-00000006";
  fs::resize_file(six / "adam_m.bin", 1000);
  auto truncated = run_process(ckpt_job(spare.path(), 20, {"--resume", six.string()}), 60s);
  CHECK(truncated.exit_code == 3);  // a checkpoint error: permanent
  CHECK_THAT(truncated.output, Contains((six / "adam_m.bin").string()));
  CHECK_THAT(truncated.output, Contains("truncated"));
  std::ofstream(six / "manifest.capnp", std::ios::trunc) << "garbage!";
  auto garbled = run_process({bin("dseek"), "ckpt", "verify", six.string()}, 60s);
  CHECK(garbled.exit_code == 1);
  CHECK_THAT(garbled.output, Contains("malformed checkpoint manifest"));
}

TEST_CASE("a failed checkpoint write is reported and training goes on", "[checkpoint][faults]") {
  ScratchDir run("ckpt-fault");
  run_ok(ckpt_job(run.path(), 12,
                  {"--set", "checkpoint.every_steps=3", "--set", "checkpoint.keep_last=10",
                   "--set", "checkpoint.async=false",
                   "--set", "faults=[{kind = \"fail_checkpoint_write\", step = 6}]"}));
  const auto failed = events(run.path(), "checkpoint_failed");
  REQUIRE(failed.size() == 1);
  CHECK(number_field(failed[0], "step") == 6);
  CHECK_THAT(failed[0], Contains("params.bin"));
  CHECK_THAT(failed[0], Contains("fail_checkpoint_write"));
  std::vector<double> steps;
  for (const auto& line : events(run.path(), "checkpoint_committed")) steps.push_back(number_field(line, "step"));
  CHECK(steps == std::vector<double>{3, 9, 12});
  CHECK(events(run.path(), "train_done").size() == 1);
  CHECK_FALSE(fs::exists(run / "checkpoints/step-00000006"));
  auto verify = run_process({bin("dseek"), "ckpt", "verify", (run / "checkpoints/step-00000003").string()}, 60s);
  CHECK(verify.exit_code == 0);

  // A checkpoint directory that cannot be created (under a regular file): every write
  // fails with the path named, and training still finishes; but with no checkpoint of
  // the run on disk its end is not a success (exit 3, a checkpoint error: no restart
  // cures it), and the node says why.
  ScratchDir full("ckpt-unwritable");
  std::ofstream(full / "not-a-dir") << "x";
  auto lost = run_process(ckpt_job(full.path(), 6,
                                   {"--set", "checkpoint.every_steps=3",
                                    "--set", "checkpoint.dir=\"" + (full / "not-a-dir/ckpt").string() + "\"",
                                    "--set", "checkpoint.async=false"}),
                          180s);
  INFO(lost.output);
  CHECK(lost.exit_code == 3);
  CHECK_THAT(lost.output, Contains("the checkpoint of step 6, the run's last, was not written"));
  CHECK_THAT(lost.output, Contains("no checkpoint of this run was committed"));
  const auto unwritable = events(full.path(), "checkpoint_failed");
  // Steps 3 and 6, then the end-of-run checkpoint retries step 6 once more.
  REQUIRE(unwritable.size() == 3);
  CHECK_THAT(unwritable[0], Contains("not-a-dir"));
  CHECK(events(full.path(), "train_done").size() == 1);
  CHECK(events(full.path(), "node_failed").size() == 1);
}

// Issue 28, finding 4: the run's final checkpoint failed (on a full disk, every write
// after the last committed one) and the run still exited 0.
TEST_CASE("a run whose final checkpoint could not be written exits 3 and says so",
          "[checkpoint][faults]") {
  ScratchDir run("ckpt-final-lost");
  auto result = run_process(ckpt_job(run.path(), 9,
                                     {"--set", "checkpoint.every_steps=3", "--set", "checkpoint.async=false",
                                      "--set", "faults=[{kind = \"fail_checkpoint_write\", step = 9}]"}),
                            180s);
  INFO(result.output);
  CHECK(result.exit_code == 3);
  CHECK_THAT(result.output, Contains("the checkpoint of step 9, the run's last, was not written"));
  CHECK_THAT(result.output, Contains("the newest committed checkpoint is step 6"));
  std::vector<double> steps;
  for (const auto& line : events(run.path(), "checkpoint_committed")) steps.push_back(number_field(line, "step"));
  CHECK(steps == std::vector<double>{3, 6});
  const auto failed = events(run.path(), "node_failed");
  REQUIRE(failed.size() == 1);
  CHECK_THAT(failed[0], Contains("step 9"));
}

TEST_CASE("SIGTERM with checkpoints on leaves a checkpoint of the last step", "[checkpoint][signal]") {
  ScratchDir run("ckpt-signal");
  auto job = ckpt_job(run.path(), 100000, {"--set", "checkpoint.every_steps=100000"});
  std::thread killer([&] {
    for (int i = 0; i < 300; ++i) {
      std::this_thread::sleep_for(100ms);
      const auto steps = events(run.path(), "step");
      if (steps.size() >= 2) {
        ::kill(static_cast<pid_t>(number_field(events(run.path(), "run_started").at(0), "pid")), SIGTERM);
        return;
      }
    }
  });
  auto result = run_process(job, 120s);
  killer.join();
  INFO(result.output);
  CHECK(result.exit_code == 143);
  const auto stop = events(run.path(), "train_stopped");
  REQUIRE(stop.size() == 1);
  CHECK(string_field(stop[0], "reason") == "signal");
  const auto committed = events(run.path(), "checkpoint_committed");
  REQUIRE(committed.size() == 1);
  CHECK(number_field(committed[0], "step") == number_field(stop[0], "step"));
}

TEST_CASE("a checkpoint due while the last write runs is skipped, not queued",
          "[checkpoint][skip]") {
  ScratchDir run("ckpt-skip");
  run_ok(ckpt_job(run.path(), 30, {"--set", "checkpoint.every_steps=1",
                                   "--set", "checkpoint.keep_last=100"}));
  // Every due checkpoint is accounted for: committed or skipped (with the step of the
  // write in flight), never both, and none twice. Whether any is skipped depends on the
  // disk; a skipped last step is then written by the end-of-run checkpoint.
  const auto committed = events(run.path(), "checkpoint_committed");
  const auto skipped = events(run.path(), "checkpoint_skipped");
  std::map<int, int> seen;
  for (const auto& line : committed) ++seen[static_cast<int>(number_field(line, "step"))];
  for (const auto& line : skipped) ++seen[static_cast<int>(number_field(line, "step"))];
  for (int step = 1; step <= 30; ++step) {
    INFO("step " << step);
    CHECK(seen[step] == (step == 30 && skipped.size() > 0 &&
                                 number_field(skipped.back(), "step") == 30
                             ? 2
                             : 1));
  }
  for (const auto& line : skipped) {
    CHECK(number_field(line, "in_progress_step") < number_field(line, "step"));
    CHECK_THAT(line, Contains("previous write in progress"));
  }
  CHECK(number_field(committed.back(), "step") == 30);
}

TEST_CASE("stop_after_minutes ends a run with a checkpoint", "[checkpoint][stop]") {
  ScratchDir run("ckpt-minutes");
  // 6 ms: the first step boundary is already past it.
  run_ok(ckpt_job(run.path(), 1000, {"--set", "train.stop_after_minutes=0.0001"}));
  const auto stop = events(run.path(), "train_stopped");
  REQUIRE(stop.size() == 1);
  CHECK(string_field(stop[0], "reason") == "stop_after_minutes");
  const auto committed = events(run.path(), "checkpoint_committed");
  REQUIRE(committed.size() == 1);
  CHECK(number_field(committed[0], "step") == number_field(stop[0], "step"));
  CHECK(number_field(stop[0], "step") < 1000);
}
