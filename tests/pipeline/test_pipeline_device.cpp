// Pipeline and tensor parallelism on a device backend (train.device), proven without a
// GPU on the scrambled test device (runtime/backend/scrambled_backend.hpp): the CPU's
// arithmetic behind memory that reads as garbage in place. A layout run on it ends with
// the parameters of the same layout on the CPU backend only if every host access of the
// stages and tensor ranks -- activations and their gradients between stages, the tensor
// group's all-reduces, the vocabulary-parallel embedding and cross-entropy, the tied
// wte's sum between the first and last stage, the global norm, the replicas' sums,
// gathered parameters and checkpoints -- goes through the backend's copy calls.
//
// Bound: equality. The scrambled device runs the CPU backend's ops on the same values
// in the same order (train.threads = 1 on both), so every loss and every parameter bit
// must match; any host access that bypasses the backend reads a masked value (1.0f
// reads as about -1e-22) and moves the loss at once.
//
// A checkpoint written on the scrambled device holds the CPU job's bits: a P = 2 job's,
// resumed by P = 2 on the CPU backend, ends bitwise as the uninterrupted CPU run, and
// resumed by one node on the CPU stays within the pipeline's parity bound
// (test_pipeline_checkpoint.cpp); a P = 2 x T = 2 job's (the tensor ranks gather their
// shards) resumed by P = 2 x T = 2 on the CPU ends bitwise as the CPU run.
// T = 2 alone (the stage trainer's one stage) is launched
// with `dseek launch` on both backends, alone and as 2 replicas.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/pp_job.hpp"
#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace dseek::testing::pp;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const std::string kScrambled = "train.device=\"scrambled-cpu-for-tests\"";
const std::vector<std::string> kInterleaved = {"parallel.schedule=\"interleaved\"",
                                               "parallel.virtual_stages=2"};

// The NCCL path without a GPU: the stages' activations and gradients (per-direction
// groups, receives posted ahead), the tied embedding's sum, the tensor group's
// all-reduces and the data group's gradients in the backend's memory, through a staged
// device plane (dseek_test_rank --staged-backend-memory 1).
const std::vector<std::string> kDevicePlane = {"--staged-backend-memory", "1"};

// `ranks` processes (data replicas x stages x tensor ranks), 4 steps of the small job,
// with `extra` settings (train.device absent: the CPU backend).
JobRun run_ok(int ranks, int tensor, const fs::path& dir, std::vector<std::string> extra,
              int data = 1, const std::vector<std::string>& rank_args = {}) {
  std::vector<std::string> settings = {"train.steps=4"};
  settings.insert(settings.end(), extra.begin(), extra.end());
  JobRun run = run_job(ranks, dir, small_settings(settings), std::chrono::seconds(240), tensor,
                       data, rank_args);
  INFO(run.report);
  REQUIRE(run.ok);
  REQUIRE(static_cast<int>(run.stages.size()) == ranks);
  return run;
}

// The scrambled run has the CPU run's losses, norms, val_losses and parameters, bit for bit.
void check_same_bits(const std::string& name, const JobRun& device, const JobRun& cpu) {
  INFO(name);
  REQUIRE(device.stages.size() == cpu.stages.size());
  for (size_t r = 0; r < cpu.stages.size(); ++r) {
    INFO("rank " << r);
    REQUIRE_FALSE(cpu.stages[r].losses.empty());
    CHECK(device.stages[r].losses == cpu.stages[r].losses);
    CHECK(device.stages[r].grad_norms == cpu.stages[r].grad_norms);
    CHECK(device.stages[r].val_losses == cpu.stages[r].val_losses);
    REQUIRE_FALSE(cpu.stages[r].params_sha256.empty());
    CHECK(device.stages[r].params_sha256 == cpu.stages[r].params_sha256);
  }
  REQUIRE_FALSE(cpu.final_params.empty());
  CHECK(device.final_params == cpu.final_params);
}

}  // namespace

TEST_CASE("device: P=2 (1f1b and interleaved) on the scrambled device has the CPU "
          "backend's bits", "[pp][device][scrambled]") {
  for (const auto& [name, schedule] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{{"1f1b", {}},
                                                                     {"interleaved", kInterleaved}}) {
    ScratchDir cpu_dir("pp-dev-cpu-" + name), device_dir("pp-dev-scrambled-" + name);
    const JobRun cpu = run_ok(2, 1, cpu_dir.path(), schedule);
    const JobRun device = run_ok(2, 1, device_dir.path(), schedule + std::vector{kScrambled});
    check_same_bits("P=2 " + name, device, cpu);
  }
}

TEST_CASE("device: P=2 x T=2 on the scrambled device has the CPU backend's bits, and "
          "its sharded checkpoint resumes on the CPU bitwise",
          "[pp][tp][device][scrambled][checkpoint]") {
  ScratchDir cpu_dir("pxt-dev-cpu"), device_dir("pxt-dev-scrambled"), resumed_dir("pxt-dev-resumed");
  const JobRun cpu = run_ok(4, 2, cpu_dir.path(), {});
  // Checkpoints at steps 2 and 4 (writing one does not change the run's bits).
  const JobRun device = run_ok(4, 2, device_dir.path(), {kScrambled, "checkpoint.every_steps=2"});
  check_same_bits("P=2 x T=2", device, cpu);

  // The tensor ranks' shards gathered on the device, resumed on the CPU: the CPU run's
  // last two steps and final parameters, bit for bit.
  const fs::path checkpoint = device_dir.path() / "checkpoints/step-00000002";
  REQUIRE(fs::exists(checkpoint / "COMMITTED"));
  const JobRun resumed = run_ok(4, 2, resumed_dir.path(), resume_from(checkpoint));
  const std::vector<double> rest(cpu.stages[0].losses.begin() + 2, cpu.stages[0].losses.end());
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    CHECK(number_field(resumed_event(resumed, r), "step") == 2);
    CHECK(resumed.stages[static_cast<size_t>(r)].losses == rest);
    CHECK(resumed.stages[static_cast<size_t>(r)].params_sha256 == cpu.stages[0].params_sha256);
  }
  CHECK(resumed.final_params == cpu.final_params);
}

TEST_CASE("device: DP=2 x P=2 on the scrambled device has the CPU backend's bits "
          "without and with ZeRO", "[pp][dp][device][scrambled][zero]") {
  // The replicas' gradient sums run on the host data plane: staged through the backend;
  // under ZeRO so are the reduce-scatter of the gradients and the all-gather of the
  // updated parameter pieces (layout/data_group_shards.hpp).
  for (const auto& [name, zero] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"zero 0", {}}, {"zero 1", {"parallel.zero=1"}}}) {
    ScratchDir cpu_dir("dxp-dev-cpu"), device_dir("dxp-dev-scrambled");
    const JobRun cpu = run_ok(4, 1, cpu_dir.path(), zero, 2);
    const JobRun device = run_ok(4, 1, device_dir.path(), zero + std::vector{kScrambled}, 2);
    check_same_bits("DP=2 x P=2 " + name, device, cpu);
  }
}

TEST_CASE("device: T=2 and DP=2 x T=2 launched on dseek-nodes on the scrambled device have "
          "the CPU backend's bits", "[tp][dp][device][scrambled][launch][zero]") {
  struct Layout {
    std::string name;
    int nodes;
    std::vector<std::string> settings;
  };
  const std::vector<Layout> layouts = {
      {"T=2", 2, {"--set", "parallel.tensor=2", "--set", "train.micro_batch_size=4"}},
      // The replicas' gradient sums run on the host data plane: staged through the backend.
      {"DP=2 x T=2", 4,
       {"--set", "parallel.tensor=2", "--set", "parallel.data=2", "--set",
        "train.micro_batch_size=3"}},
      // ZeRO: the reduce-scatter and the all-gather staged through the backend too.
      {"DP=2 x T=2 zero 1", 4,
       {"--set", "parallel.tensor=2", "--set", "parallel.data=2", "--set", "parallel.zero=1",
        "--set", "train.micro_batch_size=3"}}};
  for (const Layout& layout : layouts) {
    INFO(layout.name);
    ScratchDir cpu_dir("tp-dev-cpu"), device_dir("tp-dev-scrambled");
    const auto settings = layout.settings + std::vector<std::string>{"--set", "train.threads=1"};
    const auto cpu = run_process(tiny_launch(cpu_dir.path(), layout.nodes, 4, settings), 240s,
                                 launch_env());
    INFO(cpu.output);
    REQUIRE(cpu.exit_code == 0);
    const auto device = run_process(
        tiny_launch(device_dir.path(), layout.nodes, 4,
                    settings + std::vector<std::string>{"--set", kScrambled}),
        240s, launch_env());
    INFO(device.output);
    REQUIRE(device.exit_code == 0);
    for (int node = 0; node < layout.nodes; ++node) {
      INFO("node " << node);
      const auto cpu_steps = node_events(cpu_dir.path(), node, "step");
      const auto device_steps = node_events(device_dir.path(), node, "step");
      REQUIRE(cpu_steps.size() == 4);
      REQUIRE(device_steps.size() == 4);
      for (size_t s = 0; s < cpu_steps.size(); ++s) {
        CHECK(number_field(device_steps[s], "loss") == number_field(cpu_steps[s], "loss"));
        CHECK(number_field(device_steps[s], "grad_norm") == number_field(cpu_steps[s], "grad_norm"));
      }
      const auto cpu_done = node_events(cpu_dir.path(), node, "train_done");
      const auto device_done = node_events(device_dir.path(), node, "train_done");
      REQUIRE(cpu_done.size() == 1);
      REQUIRE(device_done.size() == 1);
      CHECK(string_field(device_done[0], "params_sha256") ==
            string_field(cpu_done[0], "params_sha256"));
      CHECK(number_field(device_done[0], "val_loss") == number_field(cpu_done[0], "val_loss"));
    }
  }
}

TEST_CASE("device: a P=2 checkpoint written on the scrambled device resumes on the CPU "
          "backend, by P=2 bitwise and by one node within the pipeline's bound",
          "[pp][device][scrambled][checkpoint]") {
  ScratchDir straight_dir("pp-dev-ckpt-straight"), first_dir("pp-dev-ckpt-first"),
      second_dir("pp-dev-ckpt-second"), one_dir("pp-dev-ckpt-one");
  const JobRun straight = run_ok(2, 1, straight_dir.path(), {"train.steps=8"});
  const JobRun first = run_ok(2, 1, first_dir.path(),
                              {"train.steps=8", "checkpoint.every_steps=4",
                               "train.stop_after_steps=4", kScrambled});
  const fs::path checkpoint = first_dir.path() / "checkpoints/step-00000004";
  REQUIRE(fs::exists(checkpoint / "COMMITTED"));

  std::vector<std::string> resume = {"train.steps=8"};
  const auto from = resume_from(checkpoint);
  resume.insert(resume.end(), from.begin(), from.end());
  const JobRun second = run_ok(2, 1, second_dir.path(), resume);
  const auto& straight_losses = straight.stages[0].losses;
  REQUIRE(straight_losses.size() == 8);
  const std::vector<double> rest(straight_losses.begin() + 4, straight_losses.end());
  for (int s = 0; s < 2; ++s) {
    CHECK(number_field(resumed_event(second, s), "step") == 4);
    CHECK(second.stages[static_cast<size_t>(s)].losses == rest);
    CHECK(second.stages[static_cast<size_t>(s)].params_sha256 == straight.stages[0].params_sha256);
  }
  CHECK(second.final_params == straight.final_params);

  // One node continues from it as the pipeline did, up to the pipeline's summation
  // order (1e-5 relative, test_pipeline_checkpoint.cpp).
  const JobRun one = run_ok(1, 1, one_dir.path(), resume);
  CHECK(number_field(resumed_event(one, 0), "written_pipeline") == 2);
  const double loss_error = max_relative_difference(one.stages[0].losses, rest);
  WARN("scrambled P=2 checkpoint resumed by one CPU node: max relative loss difference "
       << loss_error);
  CHECK(loss_error <= 1e-5);
}

TEST_CASE("device: the NCCL path of pipeline and tensor layouts (stage hand-overs, tensor "
          "all-reduces and data-group gradients in backend memory, staged) has the CPU "
          "backend's bits",
          "[pp][tp][dp][device][scrambled][backend_memory]") {
  struct Layout {
    std::string name;
    int ranks, tensor, data;
    std::vector<std::string> settings;
  };
  // Each layout against the same layout on the CPU backend over UCX alone.
  const std::vector<Layout> layouts = {
      {"P=2", 2, 1, 1, {}},
      // 6 chunks of one layer: the last stage hands over to the first (the ring's wrap).
      {"P=3 interleaved", 3, 1, 1, kInterleaved + std::vector<std::string>{"model.layers=6"}},
      {"P=2 x T=2", 4, 2, 1, {}},
      {"DP=2 x P=2 zero 0", 4, 1, 2, {}},
      {"DP=2 x P=2 zero 1", 4, 1, 2, {"parallel.zero=1"}},
      {"DP=2 x T=2 zero 1", 4, 2, 2, {"parallel.zero=1"}},
      // A codec encodes host memory: its gradients go over the host plane, the tensor
      // group's all-reduces over the device one.
      {"DP=2 x T=2 top-k", 4, 2, 2,
       {"comm.compression=\"topk\"", "comm.variance_refresh_steps=0"}}};
  for (const Layout& layout : layouts) {
    ScratchDir cpu_dir("nccl-path-cpu"), device_dir("nccl-path-scrambled");
    const JobRun cpu = run_ok(layout.ranks, layout.tensor, cpu_dir.path(), layout.settings, layout.data);
    const JobRun device = run_ok(layout.ranks, layout.tensor, device_dir.path(),
                                 layout.settings + std::vector{kScrambled}, layout.data, kDevicePlane);
    check_same_bits(layout.name + " (device plane)", device, cpu);
    // The activations and their gradients crossed on the device plane (not staged by the
    // trainer through the host): at least every training step's micro-batches (the
    // replica's 12 / data rows in micro-batches of 2), one activation of micro_batch_size
    // x context x dim floats each, from every stage.
    const int stages = layout.ranks / (layout.tensor * layout.data);
    if (stages == 1) continue;
    const uint64_t activation_bytes = 2 * 32 * 64 * sizeof(float);
    const uint64_t handed_over = 4 * (6 / layout.data) * activation_bytes;
    for (size_t r = 0; r < device.stages.size(); ++r) {
      INFO(layout.name << " rank " << r << " device plane bytes " << device.stages[r].device_bytes_sent);
      CHECK(device.stages[r].device_bytes_sent >= handed_over);
    }
  }
}
