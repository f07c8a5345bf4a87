// Training on a backend whose memory is not host memory (train.device), through
// dseek-node and `dseek launch` as a user runs them. Without a GPU here, the proof is the
// scrambled test device (runtime/backend/scrambled_backend.hpp): the CPU's arithmetic
// behind memory that reads as garbage in place. A run on it ends with the CPU run's
// params_sha256 only if the trainer, its optimizer (by default on the device; with
// train.offload = "optimizer" the gradient_shard actors on the CPU), checkpoints, resume
// and the data-parallel reduction all go through the backend's copy calls. Also: train.device = "cuda" either trains (a CUDA build on a
// host with a device) or fails at once naming train.device; and every step event
// reports the backend's peak memory. The overlapped CPU offload (train.offload_overlap)
// gives the bits of the update finished in its own step, on both devices. fp8 gives the
// CPU's bits and skipped steps, also with compressed gradients.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kScrambled = {"--set", "train.device=\"scrambled-cpu-for-tests\""};

std::string run_ok(const std::vector<std::string>& job) {
  auto result = run_process(job, 300s);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  return result.output;
}

std::string final_sha(const fs::path& run, int node = 0) {
  const auto done = node_events(run, node, "train_done");
  REQUIRE(done.size() == 1);
  CHECK(number_field(done[0], "step") == 10);
  return string_field(done[0], "params_sha256");
}

// Node 0's step_skipped events as (step, loss scale) pairs.
std::vector<std::pair<double, double>> skipped_steps(const fs::path& run) {
  std::vector<std::pair<double, double>> steps;
  for (const auto& line : node_events(run, "step_skipped"))
    steps.emplace_back(number_field(line, "step"), number_field(line, "loss_scale"));
  return steps;
}

}  // namespace

TEST_CASE("a run on the scrambled test device ends with the CPU run's parameters, "
          "also through a checkpoint and resume",
          "[device][scrambled][checkpoint]") {
  ScratchDir cpu("device-cpu"), straight("device-scrambled"), resumed("device-resumed");
  run_ok(tiny_job(cpu.path(), 10));
  const std::string expected = final_sha(cpu.path());

  run_ok(tiny_job(straight.path(), 10, kScrambled));
  CHECK(final_sha(straight.path()) == expected);
  const auto started = node_events(straight.path(), "run_started");
  REQUIRE(started.size() == 1);
  // train.offload = "auto": AdamW on the device (its moments in the device's memory),
  // where the CPU run's is the node's gradient_shard actors; offloaded by choice, the
  // shards update the device's parameters through host copies, to the same bits.
  CHECK(string_field(started[0], "optimizer") == "AdamW on scrambled-cpu-for-tests");
  CHECK(string_field(node_events(cpu.path(), "run_started").at(0), "optimizer") ==
        "2 gradient_shard actors");
  ScratchDir offloaded("device-offloaded");
  run_ok(tiny_job(offloaded.path(), 10, kScrambled + std::vector<std::string>{
                                            "--set", "train.offload=\"optimizer\""}));
  CHECK(final_sha(offloaded.path()) == expected);
  CHECK(string_field(node_events(offloaded.path(), "run_started").at(0), "optimizer") ==
        "2 gradient_shard actors");
  // Every step reports the backend's peak memory: at least the parameters, gradients and
  // two moments of the model (4 buffers of params floats).
  const double params = number_field(started[0], "params");
  const auto steps = node_events(straight.path(), "step");
  REQUIRE(steps.size() == 10);
  for (const auto& step : steps) CHECK(number_field(step, "peak_memory_bytes") >= 2 * 4 * params);

  std::vector<std::string> stop = kScrambled;
  stop.insert(stop.end(), {"--set", "train.stop_after_steps=5", "--set",
                           "checkpoint.every_steps=3", "--set", "checkpoint.async=false"});
  run_ok(tiny_job(resumed.path(), 10, stop));
  REQUIRE(node_events(resumed.path(), "checkpoint_committed").size() == 2);  // steps 3 and 5
  std::vector<std::string> resume = kScrambled;
  resume.insert(resume.end(), {"--resume", "latest"});
  run_ok(tiny_job(resumed.path(), 10, resume));
  REQUIRE(node_events(resumed.path(), "resumed").size() == 1);
  CHECK(final_sha(resumed.path()) == expected);
}

TEST_CASE("data parallel on the scrambled test device: 2 nodes end with the CPU job's "
          "parameters (ZeRO 0, ZeRO 1, compression)",
          "[device][scrambled][dp]") {
  // ZeRO 0 and 1; and compressed gradients, whose AdamW takes a second moment the
  // reducer estimates on the host (refreshed every 4 steps here, so 10 steps use it).
  const std::vector<std::vector<std::string>> variants = {
      {"--set", "parallel.zero=0"},
      {"--set", "parallel.zero=1"},
      {"--set", "comm.compression=\"topk+int8\"", "--set", "comm.compression_warmup_steps=2",
       "--set", "comm.variance_refresh_steps=4"}};
  for (const auto& variant : variants) {
    INFO("variant: " << variant[1]);
    ScratchDir cpu("device-dp-cpu"), scrambled("device-dp-scrambled");
    // One thread per node: two nodes share this machine's cores.
    const std::vector<std::string> zero_stage =
        variant + std::vector<std::string>{"--set", "train.replica_check_every=3", "--set",
                                           "train.threads=1"};
    auto cpu_run = run_process(tiny_launch(cpu.path(), 2, 10, zero_stage), 300s, launch_env());
    INFO(cpu_run.output);
    REQUIRE(cpu_run.exit_code == 0);
    auto job = tiny_launch(scrambled.path(), 2, 10, zero_stage + kScrambled);
    auto scrambled_run = run_process(job, 300s, launch_env());
    INFO(scrambled_run.output);
    REQUIRE(scrambled_run.exit_code == 0);
    const std::string expected = final_sha(cpu.path());
    CHECK(final_sha(scrambled.path(), 0) == expected);
    CHECK(final_sha(scrambled.path(), 1) == expected);
    CHECK(node_events(scrambled.path(), 0, "sdc_detected").empty());
    require_no_node_left(scrambled.path(), 2);
  }
}

TEST_CASE("the overlapped CPU offload through dseek-node ends with the parameters of the "
          "update finished in its step, on the cpu and the scrambled device",
          "[device][scrambled][offload]") {
  for (const std::string device : {"cpu", "scrambled-cpu-for-tests"}) {
    INFO("device " << device);
    ScratchDir on("offload-on"), off("offload-off");
    const std::vector<std::string> on_device = {"--set", "train.device=\"" + device + "\"",
                                                "--set", "train.offload=\"optimizer\""};
    run_ok(tiny_job(on.path(), 10, on_device + std::vector<std::string>{
                                       "--set", "train.offload_overlap=true"}));
    run_ok(tiny_job(off.path(), 10, on_device + std::vector<std::string>{
                                        "--set", "train.offload_overlap=false"}));
    CHECK(final_sha(on.path()) == final_sha(off.path()));
    // The step events say how long each forward waited for the updated chunks; with the
    // overlap off they do not carry the field.
    const auto steps_on = node_events(on.path(), "step");
    REQUIRE(steps_on.size() == 10);
    for (const auto& step : steps_on) CHECK(number_field(step, "offload_wait_ms") >= 0.0);
    for (const auto& step : node_events(off.path(), "step"))
      CHECK(step.find("offload_wait_ms") == std::string::npos);
  }
}

TEST_CASE("fp8 through dseek-node on the scrambled test device ends with the CPU run's "
          "parameters and skips the same steps (one node, and 2 nodes under ZeRO 1)",
          "[device][scrambled][precision]") {
  // The loss scaler's overflow check and unscaling run through the backend
  // (Backend::sum_squares, Backend::scale); the node's gradient_shard actors update on
  // the host from the unscaled host copy. 2^24 overflows E5M2 in the first steps.
  const std::vector<std::string> fp8 = {"--set", "train.precision=\"fp8\"", "--set",
                                        "train.loss_scale_init=16777216", "--set",
                                        "train.threads=1"};
  for (int nodes : {1, 2}) {
    INFO(nodes << " node(s)");
    ScratchDir cpu("fp8-node-cpu"), scrambled("fp8-node-scrambled");
    const std::vector<std::string> job =
        nodes == 1 ? fp8 : fp8 + std::vector<std::string>{"--set", "parallel.zero=1"};
    auto cpu_run = run_process(tiny_launch(cpu.path(), nodes, 10, job), 300s, launch_env());
    INFO(cpu_run.output);
    REQUIRE(cpu_run.exit_code == 0);
    auto device_run =
        run_process(tiny_launch(scrambled.path(), nodes, 10, job + kScrambled), 300s, launch_env());
    INFO(device_run.output);
    REQUIRE(device_run.exit_code == 0);
    const auto skipped = skipped_steps(cpu.path());
    CHECK_FALSE(skipped.empty());
    CHECK(skipped_steps(scrambled.path()) == skipped);
    for (int node = 0; node < nodes; ++node)
      CHECK(final_sha(scrambled.path(), node) == final_sha(cpu.path()));
  }
}

TEST_CASE("fp8 with compressed gradients through dseek-node on the scrambled test device "
          "ends with the CPU run's parameters and skips the same steps",
          "[device][scrambled][precision][compression]") {
  // 2 nodes, top-k + INT8: each node unscales its local gradients through the backend
  // before the codecs read their host copy, after a global overflow flag. 2^24
  // overflows step 0, and with it the second-moment refresh of step 0: step 1, not a
  // refresh step of its own (every 3), does the refresh owed (unit-tested in
  // tests/unit/test_fp8_compressed_reduction.cpp), here on both backends alike, and the
  // gradient_shard actors' AdamW takes that v.
  const std::vector<std::string> job = {
      "--set", "train.precision=\"fp8\"", "--set", "train.loss_scale_init=16777216",
      "--set", "train.threads=1", "--set", "comm.compression=\"topk+int8\"",
      "--set", "comm.variance_refresh_steps=3", "--set", "train.replica_check_every=3"};
  ScratchDir cpu("fp8-compressed-cpu"), scrambled("fp8-compressed-scrambled");
  auto cpu_run = run_process(tiny_launch(cpu.path(), 2, 10, job), 300s, launch_env());
  INFO(cpu_run.output);
  REQUIRE(cpu_run.exit_code == 0);
  auto device_run =
      run_process(tiny_launch(scrambled.path(), 2, 10, job + kScrambled), 300s, launch_env());
  INFO(device_run.output);
  REQUIRE(device_run.exit_code == 0);
  const auto skipped = skipped_steps(cpu.path());
  REQUIRE_FALSE(skipped.empty());
  CHECK(skipped[0].first == 1);  // events number steps from 1: step 0 was skipped
  CHECK(skipped_steps(scrambled.path()) == skipped);
  const std::string expected = final_sha(cpu.path());
  CHECK(final_sha(cpu.path(), 1) == expected);
  CHECK(final_sha(scrambled.path(), 0) == expected);
  CHECK(final_sha(scrambled.path(), 1) == expected);
  CHECK(node_events(scrambled.path(), 0, "sdc_detected").empty());
  require_no_node_left(scrambled.path(), 2);
}

TEST_CASE("train.device = cuda trains on a GPU or fails at once naming the key",
          "[device][cuda]") {
  ScratchDir run("device-cuda");
  auto result = run_process(tiny_job(run.path(), 2, {"--set", "train.device=\"cuda\""}), 300s);
  INFO(result.output);
  if (result.exit_code == 0) {
    // A CUDA build on a host with a device: the run trained.
    CHECK(node_events(run.path(), "train_done").size() == 1);
  } else {
    CHECK_THAT(result.output, Contains("train.device = \"cuda\""));
    CHECK(node_events(run.path(), "step").empty());
  }
}

TEST_CASE("pipeline and tensor parallelism accept a device (train.device) and a node runs "
          "several ranks of them when the layout fills the world",
          "[device][config]") {
  // A node's several ranks (cluster.gpus_per_node) are ranks of a pipeline or tensor
  // group too: accepted when the layout's ranks are the world's (2 nodes x 2 = 4), refused
  // by name when they are not.
  for (const char* parallel : {"parallel.pipeline=2", "parallel.tensor=2"}) {
    auto gpus = run_process({bin("dseek"), "config", "--check",
                             (source_dir() / "config" / "single.toml").string(), "--set",
                             "cluster.gpus_per_node=2", "--set", parallel, "--set",
                             "cluster.nodes=2", "--set", "train.micro_batch_size=2"},
                            60s);
    INFO(gpus.output);
    CHECK(gpus.exit_code != 0);
    CHECK_THAT(gpus.output, Contains("must equal cluster.nodes x cluster.gpus_per_node (4)"));
    auto filled = run_process({bin("dseek"), "config", "--check",
                               (source_dir() / "config" / "single.toml").string(), "--set",
                               "cluster.gpus_per_node=2", "--set", parallel, "--set",
                               "cluster.nodes=2", "--set", "parallel.data=2", "--set",
                               "train.micro_batch_size=2"},
                              60s);
    INFO(filled.output);
    CHECK(filled.exit_code == 0);
  }
  auto data_parallel = run_process({bin("dseek"), "config", "--check",
                                    (source_dir() / "config" / "single.toml").string(), "--set",
                                    "cluster.gpus_per_node=2", "--set", "cluster.nodes=2"},
                                   60s);
  INFO(data_parallel.output);
  CHECK(data_parallel.exit_code == 0);
  // Their runs on the scrambled device: tests/pipeline/test_pipeline_device.cpp.
  for (const char* parallel : {"parallel.pipeline=2", "parallel.tensor=2"}) {
    auto result = run_process({bin("dseek"), "config", "--check",
                               (source_dir() / "config" / "single.toml").string(), "--set",
                               parallel, "--set", "cluster.nodes=2", "--set",
                               "train.micro_batch_size=2", "--set",
                               "train.device=\"scrambled-cpu-for-tests\""},
                              60s);
    INFO(parallel << "\n" << result.output);
    CHECK(result.exit_code == 0);
  }
}
