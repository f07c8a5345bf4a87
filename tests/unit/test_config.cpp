// Tests of the job configuration: loading, error messages, --set overrides, relations,
// the feature gate, the TOML round trip, and that the shipped reference and configs are
// current.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/config/absolute_paths.hpp"
#include "runtime/config/backup_coordinators.hpp"
#include "runtime/config/load.hpp"
#include "runtime/config/memory_bound.hpp"
#include "support/test_paths.hpp"

namespace config = dseek::config;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;

namespace {

// The ConfigError message `action` throws; fails the test when it throws nothing.
std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const config::ConfigError& error) {
    return error.what();
  }
  FAIL("expected a ConfigError");
  return {};
}

std::string load_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return error_of([&] { config::load_config_text(text, "x.toml", overrides); });
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every field differs from its default, and the strings need escaping.
constexpr const char* kFullConfig = R"(
[model]
dim = 64
layers = 2
heads = 8
context = 32
vocab = 300
init_std = 0.015

[train]
batch_size = 48
micro_batch_size = 4
steps = 7
seed = -5
threads = 2
lr = 3e-4
min_lr = 0
warmup_steps = 3
weight_decay = 0.0
beta1 = 0.8
beta2 = 0.99
eps = 1e-6
grad_clip = 0.5
eval_every = 2
eval_batches = 1
precision = "bf16"
run_dir = "runs/a \"quoted\" \\ dir"

[data]
dir = "data/tiny"
prefetch = 0

[cluster]
nodes = 12
node_id = 2
coordinator = "10.0.0.1:9000"

[parallel]
data = 3
tensor = 2
pipeline = 2
zero = 1

[comm]
backend = "nccl"
compression = "topk+int8"
topk_fraction = 1

[checkpoint]
every_steps = 5
dir = "ckpt"
keep_last = 1

[metrics]
log_every = 1
progress = "plain"
prometheus_port = 9100

[[faults]]
kind = "kill"
node = 1
step = 4

[[faults]]
kind = "crash_actor"
after_seconds = 2.5
actor = "worker"
)";

}  // namespace

TEST_CASE("config: an empty file gives the defaults", "[config]") {
  auto loaded = config::load_config_text("", "empty.toml");
  CHECK(loaded.source == "empty.toml");
  CHECK(config::to_toml(loaded) == config::to_toml(config::JobConfig{}));
  CHECK(loaded.model.dim == 256);
  CHECK(loaded.train.lr == 1e-3);
  CHECK(loaded.train.precision == config::Precision::fp32);
  CHECK(loaded.faults.empty());
  CHECK(config::default_config().source == "defaults");
  CHECK_NOTHROW(config::validate(config::default_config()));
  CHECK_NOTHROW(config::check_supported(config::default_config()));
}

TEST_CASE("config: a full file sets every section", "[config]") {
  auto loaded = config::load_config_text(kFullConfig, "full.toml");
  CHECK(loaded.model.dim == 64);
  CHECK(loaded.model.init_std == 0.015);
  CHECK(loaded.train.micro_batch_size == 4);
  CHECK(loaded.train.seed == -5);
  CHECK(loaded.train.lr == 3e-4);
  CHECK(loaded.train.min_lr == 0.0);
  CHECK(loaded.train.precision == config::Precision::bf16);
  CHECK(loaded.train.run_dir == "runs/a \"quoted\" \\ dir");
  CHECK(loaded.data.dir == "data/tiny");
  CHECK(loaded.cluster.node_id == 2);
  CHECK(loaded.cluster.coordinator == "10.0.0.1:9000");
  CHECK(loaded.parallel.zero == 1);
  CHECK(loaded.comm.compression == config::Compression::topk_int8);
  CHECK(loaded.comm.topk_fraction == 1.0);
  CHECK(loaded.checkpoint.every_steps == 5);
  CHECK(loaded.metrics.progress == config::Progress::plain);
  CHECK(loaded.metrics.prometheus_port == 9100);
  REQUIRE(loaded.faults.size() == 2);
  CHECK(loaded.faults[0].kind == config::FaultKind::kill);
  CHECK(loaded.faults[0].node == 1);
  CHECK(loaded.faults[0].step == 4);
  CHECK(loaded.faults[0].after_seconds == -1);
  CHECK(loaded.faults[1].kind == config::FaultKind::crash_actor);
  CHECK(loaded.faults[1].after_seconds == 2.5);
  CHECK(loaded.faults[1].actor == "worker");
}

TEST_CASE("config: an unknown key names file, line, column and key", "[config]") {
  auto message = load_error("[model]\ndim = 64\n  dimm = 3\n");
  CHECK_THAT(message, Contains("x.toml:3:3"));
  CHECK_THAT(message, Contains("model.dimm: unknown key"));
  CHECK_THAT(message, Contains("did you mean model.dim?"));
}

TEST_CASE("config: an unknown section is an error", "[config]") {
  auto message = load_error("[model]\ndim = 64\n\n[modle]\nheads = 2\n");
  CHECK_THAT(message, Contains("x.toml:4:"));
  CHECK_THAT(message, Contains("[modle]: unknown section"));
  CHECK_THAT(load_error("model = 3\n"), Contains("model: expected a table"));
}

TEST_CASE("config: a value of the wrong type is an error", "[config]") {
  CHECK_THAT(load_error("[model]\n\ndim = \"abc\"\n"),
             Equals("x.toml:3:7: model.dim: expected an integer, got string \"abc\""));
  CHECK_THAT(load_error("[train]\nprecision = 16\n"),
             Contains("train.precision: expected one of fp32, bf16, fp8, got integer 16"));
  CHECK_THAT(load_error("[data]\ndir = true\n"),
             Contains("data.dir: expected a string, got boolean true"));
}

TEST_CASE("config: a value out of range is an error", "[config]") {
  CHECK_THAT(load_error("[model]\nheads = 0\n"),
             Equals("x.toml:2:9: model.heads: must be >= 1, got 0"));
  CHECK_THAT(load_error("[train]\nbeta2 = 1.0\n"), Contains("train.beta2: must be >= 0 and < 1"));
  CHECK_THAT(load_error("[train]\nlr = 0\n"), Contains("train.lr: must be > 0, got 0.0"));
  CHECK_THAT(load_error("[train]\nlr = nan\n"), Contains("train.lr: expected a finite number"));
  CHECK_THAT(load_error("[metrics]\nprometheus_port = 70000\n"),
             Contains("metrics.prometheus_port: must be >= 0 and <= 65535"));
  CHECK_THAT(load_error("[comm]\ncompression = \"zip\"\n"),
             Contains("comm.compression: expected one of none, topk, int8, topk+int8, got \"zip\""));
}

TEST_CASE("config: a float for an integer key is rejected", "[config]") {
  CHECK_THAT(load_error("[train]\nsteps = 10.0\n"),
             Equals("x.toml:2:9: train.steps: expected an integer, got float 10.0"));
}

TEST_CASE("config: an integer for a float key is accepted", "[config]") {
  auto loaded = config::load_config_text("[train]\nlr = 1\nmin_lr = 0\n", "x.toml");
  CHECK(loaded.train.lr == 1.0);
  CHECK(loaded.train.min_lr == 0.0);
}

TEST_CASE("config: a TOML syntax error names file, line and column", "[config]") {
  CHECK_THAT(load_error("[model]\ndim = = 3\n"), Contains("x.toml:2:"));
}

TEST_CASE("config: a missing file is an error naming it", "[config]") {
  dseek::testing::ScratchDir scratch("config-missing");
  auto path = scratch / "nope.toml";
  CHECK_THAT(error_of([&] { config::load_config(path); }), Contains(path.string()));
}

TEST_CASE("config: a file on disk loads and names its source", "[config]") {
  dseek::testing::ScratchDir scratch("config-file");
  auto path = scratch / "job.toml";
  std::ofstream(path) << "[model]\ndim = 32\nheads = 2\n";
  auto loaded = config::load_config(path, {"model.layers=1"});
  CHECK(loaded.source == path.string());
  CHECK(loaded.model.dim == 32);
  CHECK(loaded.model.layers == 1);
  std::ofstream(path) << "[model]\ndim = 3.5\n";
  CHECK_THAT(error_of([&] { config::load_config(path); }), Contains(path.string() + ":2:7:"));
}

TEST_CASE("config: --set overrides a key and is validated", "[config]") {
  auto loaded = config::load_config_text("[model]\ndim = 64\n", "x.toml",
                                         {"model.dim=128", "train.lr = 0.5", "model.heads=8"});
  CHECK(loaded.model.dim == 128);
  CHECK(loaded.model.heads == 8);
  CHECK(loaded.train.lr == 0.5);
  CHECK_THAT(load_error("", {"model.dim=abc"}),
             Equals("--set model.dim=abc: model.dim: expected an integer, got string \"abc\""));
  CHECK_THAT(load_error("", {"model.dim=0"}),
             Equals("--set model.dim=0: model.dim: must be >= 1, got 0"));
  CHECK_THAT(load_error("", {"train.steps=1.5"}), Contains("expected an integer, got float 1.5"));
  CHECK_THAT(load_error("", {"model.dim"}), Contains("expected section.key=value"));
  // Overrides go through validate() like the file does.
  CHECK_THAT(load_error("", {"model.dim=100", "model.heads=3"}), Contains("model.heads"));
}

TEST_CASE("config: --set of an unknown key is an error", "[config]") {
  CHECK_THAT(load_error("", {"model.dimm=3"}),
             Equals("--set model.dimm=3: model.dimm: unknown key (did you mean model.dim?)"));
  CHECK_THAT(load_error("", {"nothing.here=3"}), Contains("nothing.here: unknown key"));
}

TEST_CASE("config: --set takes a bare word as a string", "[config]") {
  auto loaded = config::load_config_text(
      "", "x.toml",
      {"data.dir=data/my corpus", "metrics.progress=plain", "train.run_dir=2024",
       "checkpoint.dir=\"quoted dir\"", "train.precision=fp32"});
  CHECK(loaded.data.dir == "data/my corpus");
  CHECK(loaded.metrics.progress == config::Progress::plain);
  CHECK(loaded.train.run_dir == "2024");
  CHECK(loaded.checkpoint.dir == "quoted dir");
  CHECK_THAT(load_error("", {"metrics.progress=fancy"}),
             Contains("metrics.progress: expected one of auto, bar, plain, off, got \"fancy\""));
}

TEST_CASE("config: --set faults replaces the fault list", "[config]") {
  auto loaded = config::load_config_text(
      "[cluster]\nnodes = 2\n", "x.toml",
      {"faults=[{kind = \"hang\", node = 1, step = 3, seconds = 2}]"});
  REQUIRE(loaded.faults.size() == 1);
  CHECK(loaded.faults[0].kind == config::FaultKind::hang);
  CHECK(loaded.faults[0].seconds == 2.0);
  CHECK_THAT(load_error("", {"faults=3"}), Contains("faults: expected an array of tables"));
}

TEST_CASE("config: faults entries are checked", "[config]") {
  CHECK_THAT(load_error("[[faults]]\nkind = \"explode\"\nstep = 1\n"),
             Contains("x.toml:2:8: faults[0].kind: expected one of kill, hang"));
  CHECK_THAT(load_error("[[faults]]\nstep = 1\n"), Contains("faults[0].kind: missing"));
  CHECK_THAT(load_error("[[faults]]\nkind = \"kill\"\nstep = 1\nnod = 0\n"),
             Contains("x.toml:4:1: faults[0].nod: unknown key"));
  CHECK_THAT(load_error("[[faults]]\nkind = \"kill\"\n"),
             Contains("faults[0]: set step or after_seconds"));
  CHECK_THAT(load_error("[[faults]]\nkind = \"kill\"\nstep = 1\nnode = 1\n"),
             Contains("faults[0].node (1) must be < cluster.nodes (1)"));
  CHECK_THAT(load_error("[faults]\nkind = \"kill\"\n"),
             Contains("faults: expected an array of tables"));
}

TEST_CASE("config: model.dim must be divisible by model.heads", "[config]") {
  auto message = load_error("[model]\ndim = 100\nheads = 3\n");
  CHECK_THAT(message, Contains("x.toml: "));
  CHECK_THAT(message, Contains("model.dim (100)"));
  CHECK_THAT(message, Contains("model.heads (3)"));
  CHECK_NOTHROW(config::load_config_text("[model]\ndim = 96\nheads = 3\n", "x.toml"));
}

TEST_CASE("config: the other relations between keys are checked", "[config]") {
  CHECK_THAT(load_error("[train]\nbatch_size = 10\nmicro_batch_size = 4\n"),
             Contains("train.batch_size (10) must be divisible by train.micro_batch_size (4)"));
  CHECK_THAT(load_error("[train]\nlr = 0.001\nmin_lr = 0.01\n"),
             Contains("train.min_lr (0.01) must be <= train.lr (0.001)"));
  CHECK_THAT(load_error("[cluster]\nnodes = 2\nnode_id = 2\n"),
             Contains("cluster.node_id (2) must be < cluster.nodes (2)"));
  for (const char* endpoint : {"localhost", "host:0", "host:70000", ":80", "host:8x", "host:"}) {
    INFO(endpoint);
    CHECK_THAT(load_error("[cluster]\ncoordinator = \"" + std::string(endpoint) + "\"\n"),
               Contains("cluster.coordinator: expected host:port"));
  }
  // validate() also catches a config built in code, which never met the loader.
  auto job = config::default_config();
  job.model.layers = 0;
  CHECK_THAT(error_of([&] { config::validate(job); }),
             Equals("defaults: model.layers: must be >= 1, got 0"));
}

TEST_CASE("config: cluster.backup_coordinators is a list of NODE@HOST:PORT in order",
          "[config][failover]") {
  const auto backups = config::parse_backup_coordinators(" 1@10.0.0.2:7420, 2@[::1]:7421 ");
  REQUIRE(backups.size() == 2);
  CHECK(backups[0].node_id == 1);
  CHECK(backups[0].address == "10.0.0.2:7420");
  CHECK(backups[1].node_id == 2);
  CHECK(backups[1].address == "[::1]:7421");
  CHECK(config::parse_backup_coordinators("").empty());
  const std::string nodes3 = "[train]\nbatch_size = 24\n[cluster]\nnodes = 3\nbackup_coordinators = ";
  CHECK_THAT(load_error(nodes3 + "\"1-10.0.0.2:7420\"\n"),
             Contains("cluster.backup_coordinators: entry \"1-10.0.0.2:7420\" is not "
                      "NODE@HOST:PORT: no '@'"));
  CHECK_THAT(load_error(nodes3 + "\"x@h:1\"\n"), Contains("the node id is not a number"));
  CHECK_THAT(load_error(nodes3 + "\"1@h:0\"\n"), Contains("the port is not 1 .. 65535"));
  CHECK_THAT(load_error(nodes3 + "\"1@h\"\n"), Contains("no host:port after the '@'"));
  CHECK_THAT(load_error(nodes3 + "\"1@h:1 1@g:2\"\n"), Contains("node 1 is listed twice"));
  CHECK_THAT(load_error(nodes3 + "\"0@h:1\"\n"),
             Contains("cluster.backup_coordinators: node 0 must be another node than "
                      "cluster.coordinator_node (0) and < cluster.nodes (3)"));
  CHECK_THAT(load_error(nodes3 + "\"3@h:1\"\n"), Contains("node 3 must be another node"));
  CHECK_NOTHROW(config::load_config_text(nodes3 + "\"1@h:1 2@g:2\"\n", "x.toml", {}));
}

TEST_CASE("config: check_supported rejects features this build lacks", "[config]") {
  // Data parallelism over the nodes, ZeRO and compression run.
  auto multi_node = config::load_config_text(
      "[cluster]\nnodes = 2\n[parallel]\ndata = 2\nzero = 1\n[comm]\ncompression = \"int8\"\n",
      "x.toml");
  CHECK_NOTHROW(config::check_supported(multi_node));
  CHECK_THAT(error_of([&] { config::load_config_text("[parallel]\ndata = 2\n", "x.toml"); }),
             Contains("parallel.data (2) x parallel.tensor (1) x parallel.pipeline (1) must "
                      "equal cluster.nodes (1)"));
  CHECK_THAT(error_of([&] {
               config::load_config_text("[model]\nheads = 4\n[parallel]\ntensor = 3\n", "x.toml");
             }),
             Contains("model.heads (4) must be divisible by parallel.tensor (3)"));
  CHECK_THAT(error_of([&] {
               config::load_config_text("[model]\nheads = 4\nvocab = 255\n[parallel]\ntensor = 2\n",
                                        "x.toml");
             }),
             Contains("model.vocab (255) must be divisible by parallel.tensor (2)"));
  // Node K of a job serves /metrics on metrics.prometheus_port + K.
  CHECK_NOTHROW(config::check_supported(
      config::load_config_text("", "x.toml", {"metrics.prometheus_port=9100"})));
  CHECK_THAT(error_of([&] {
               config::load_config_text("[metrics]\nprometheus_port = 65535\n[cluster]\nnodes = 2\n"
                                        "[parallel]\ndata = 2\n", "x.toml");
             }),
             Contains("metrics.prometheus_port (65535) + cluster.nodes - 1 must be <= 65535"));
  for (const char* setting : {"comm.backend=nccl"}) {
    INFO(setting);
    auto job = config::load_config_text("", "x.toml", {setting});
    CHECK_THAT(error_of([&] { config::check_supported(job); }),
               Contains("this job cannot run") && Contains("train.device = \"cuda\""));
  }
  auto slow = config::load_config_text("[[faults]]\nkind = \"slow\"\nstep = 1\nms = 5\n", "x");
  CHECK_NOTHROW(config::check_supported(slow));
  auto faulty = config::load_config_text(
      "[[faults]]\nkind = \"corrupt_gradient\"\nstep = 1\n", "x");
  CHECK_THAT(error_of([&] { config::check_supported(faulty); }), Contains("[[faults]]"));
}

TEST_CASE("config: train.offload says where AdamW runs, auto by the device, and the "
          "combinations that cannot run are refused by name",
          "[config]") {
  const auto job = [](std::vector<std::string> settings,
                       const std::vector<std::string>& more = {}) {
    settings.insert(settings.end(), more.begin(), more.end());
    return config::load_config_text("", "x.toml", settings);
  };
  const std::string cuda = "train.device=\"cuda\"";
  // auto: the gradient_shard actors on the CPU; the device's own AdamW on a GPU (also
  // with NCCL and with compressed gradients' given second moment).
  CHECK(config::optimizer_offloaded(config::default_config()));
  CHECK_FALSE(config::optimizer_offloaded(job({cuda})));
  CHECK_FALSE(config::optimizer_offloaded(job({"train.device=\"scrambled-cpu-for-tests\""})));
  const std::vector<std::string> compressed = {cuda, "cluster.nodes=2", "parallel.data=2",
                                               "comm.compression=\"topk\""};
  CHECK_FALSE(config::optimizer_offloaded(job(compressed)));
  CHECK(config::optimizer_offloaded(job(compressed, {"train.offload=\"optimizer\""})));
  CHECK_FALSE(config::optimizer_offloaded(job({cuda, "comm.backend=\"nccl\""})));
  // Chosen: as asked.
  CHECK(config::optimizer_offloaded(job({cuda, "train.offload=\"optimizer\""})));
  CHECK_FALSE(config::optimizer_offloaded(job({"train.offload=\"none\""})));
  CHECK_NOTHROW(config::check_supported(job({"train.offload=\"none\""})));
  CHECK_THAT(error_of([&] { job({"train.offload=\"gpu\""}); }),
             Contains("train.offload") && Contains("gpu"));
  // NCCL reduces and updates on the GPU.
  CHECK_THAT(error_of([&] {
               config::check_supported(job({cuda, "comm.backend=\"nccl\"", "train.offload=\"optimizer\""}));
             }),
             Contains("this job cannot run") && Contains("train.offload = \"optimizer\""));
  CHECK_NOTHROW(config::check_supported(job(compressed, {"train.offload=\"none\""})));
  // No gradient_shard actor to crash where AdamW runs on the device.
  const std::string crash = "faults=[{kind = \"crash_actor\", actor = \"gradient_shard\", step = 2}]";
  CHECK_THAT(error_of([&] { config::check_supported(job({cuda, crash})); }),
             Contains("[[faults]]") && Contains("gradient_shard"));
  CHECK_NOTHROW(config::check_supported(job({cuda, crash, "train.offload=\"optimizer\""})));
  CHECK_NOTHROW(config::check_supported(job({crash})));
}

TEST_CASE("config: mixed precision runs where it is wired in, else is refused by name",
          "[config][precision]") {
  for (const char* precision : {"train.precision=bf16", "train.precision=fp8"}) {
    INFO(precision);
    // One node, data, tensor and pipeline parallelism and all three together, on the
    // CPU and on device backends (the loss scaler unscales through the backend).
    const std::vector<std::vector<std::string>> layouts{
        {},
        {"cluster.nodes=2", "parallel.data=2"},
        {"cluster.nodes=2", "parallel.tensor=2"},
        {"cluster.nodes=2", "parallel.pipeline=2"},
        {"cluster.nodes=8", "parallel.data=2", "parallel.pipeline=2", "parallel.tensor=2"},
        {"train.device=\"scrambled-cpu-for-tests\""},
        {"train.device=\"cuda\"", "cluster.nodes=2", "parallel.data=2"}};
    for (auto settings : layouts) {
      settings.push_back(precision);
      INFO(settings.front());
      CHECK_NOTHROW(config::check_supported(config::load_config_text("", "x.toml", settings)));
    }
  }
  // fp8 with gradient compression runs where compression runs: the data group of every
  // layout, on the CPU and on device backends, and with the NCCL data plane too (the
  // compressed gradients then travel over UCX, dist/reducer_settings.cpp).
  for (const char* codec : {"topk", "int8", "topk+int8"}) {
    INFO(codec);
    const std::string compression = std::string("comm.compression=\"") + codec + "\"";
    for (auto settings : std::vector<std::vector<std::string>>{
             {"cluster.nodes=2", "parallel.data=2"},
             {"cluster.nodes=2", "parallel.data=2", "train.device=\"scrambled-cpu-for-tests\""},
             {"cluster.nodes=4", "parallel.data=2", "parallel.pipeline=2"},
             {"cluster.nodes=4", "parallel.data=2", "parallel.tensor=2", "parallel.zero=1"},
             {"cluster.nodes=2", "parallel.data=2", "train.device=\"cuda\"",
              "comm.backend=\"nccl\""}}) {
      settings.insert(settings.end(), {"train.precision=fp8", compression});
      CHECK_NOTHROW(config::check_supported(config::load_config_text("", "x.toml", settings)));
    }
  }
  CHECK_THAT(error_of([&] {
               config::load_config_text("", "x.toml", {"train.loss_scale_init=1000"});
             }),
             Contains("train.loss_scale_init") && Contains("power of two"));
}

TEST_CASE("config: pipeline parallelism runs one stage per node, with replicas too", "[config][pipeline]") {
  auto pipeline = config::load_config_text("", "x.toml", {"cluster.nodes=2", "parallel.pipeline=2",
                                                         "parallel.schedule=\"gpipe\""});
  CHECK_NOTHROW(config::check_supported(pipeline));
  CHECK_THAT(error_of([&] { config::load_config_text("", "x.toml", {"parallel.pipeline=2"}); }),
             Contains("parallel.pipeline (2) must equal cluster.nodes (1)"));
  // The data group of a pipeline compresses its gradients as a data-parallel job does.
  CHECK_NOTHROW(config::check_supported(config::load_config_text(
      "", "x.toml", {"cluster.nodes=4", "parallel.pipeline=2", "parallel.data=2",
                     "parallel.zero=2", "comm.compression=\"topk+int8\""})));
  // Checkpoints are gathered to rank 0 and resumed across layouts, replicas too; ZeRO
  // shards the optimizer over the data group.
  for (const char* setting : {"checkpoint.every_steps=5", "checkpoint.resume=\"latest\"",
                              "parallel.zero=1", "parallel.zero=2"}) {
    INFO(setting);
    auto job = config::load_config_text(
        "", "x.toml", {"cluster.nodes=4", "parallel.pipeline=2", "parallel.data=2", setting});
    CHECK_NOTHROW(config::check_supported(job));
  }
  // Replicas of the pipeline run (parallel.data x parallel.pipeline = cluster.nodes).
  auto with_data = config::load_config_text(
      "", "x.toml", {"cluster.nodes=4", "parallel.pipeline=2", "parallel.data=2"});
  CHECK_NOTHROW(config::check_supported(with_data));
  auto with_fault = config::load_config_text(
      "[[faults]]\nkind = \"corrupt_gradient\"\nnode = 1\nstep = 1\n", "x",
      {"cluster.nodes=2", "parallel.pipeline=2"});
  CHECK_THAT(error_of([&] { config::check_supported(with_fault); }),
             Contains("corrupt_gradient is caught by comparing replicas") &&
                 Contains("this job cannot run"));
  // A slow node is allowed: it sleeps as each step starts and the others wait for it.
  auto with_slow = config::load_config_text("[[faults]]\nkind = \"slow\"\nstep = 1\nms = 5\n", "x",
                                            {"cluster.nodes=2", "parallel.pipeline=2"});
  CHECK_NOTHROW(config::check_supported(with_slow));
  // A kill in the gradient reduction needs the data group that reduces: none without
  // replicas; with them it fires in their reducer.
  const std::string in_reduction =
      "[[faults]]\nkind = \"kill\"\nnode = 1\nstep = 3\nduring = \"reduction\"\n";
  CHECK_THAT(error_of([&] {
               config::check_supported(config::load_config_text(
                   in_reduction, "x", {"cluster.nodes=2", "parallel.pipeline=2"}));
             }),
             Contains("during = \"reduction\" fires in the data group") &&
                 Contains("this job cannot run"));
  CHECK_NOTHROW(config::check_supported(config::load_config_text(
      in_reduction, "x", {"cluster.nodes=4", "parallel.pipeline=2", "parallel.data=2"})));
  // A kill is allowed: the survivors re-plan and resume from the newest checkpoint.
  auto with_kill = config::load_config_text("[[faults]]\nkind = \"kill\"\nnode = 1\nstep = 3\n",
                                            "x", {"cluster.nodes=2", "parallel.pipeline=2"});
  CHECK_NOTHROW(config::check_supported(with_kill));
  // A failed checkpoint write too: the gathered checkpoint fails, training goes on.
  auto with_failed_write = config::load_config_text(
      "[[faults]]\nkind = \"fail_checkpoint_write\"\nstep = 4\n", "x",
      {"cluster.nodes=2", "parallel.pipeline=2", "checkpoint.every_steps=4"});
  CHECK_NOTHROW(config::check_supported(with_failed_write));
  // A crash of the pipeline_stage actor or of a gradient_shard (which runs the stage's
  // optimizer updates): its worker group restarts and the job recovers as from a lost
  // node, in pipeline and in tensor-parallel jobs (both run the stage trainer in their
  // pipeline_stage actor). So does every other actor's (the worker's too); only the
  // stage's crash in a job that has no pipeline_stage is refused.
  const std::string crash = "[[faults]]\nkind = \"crash_actor\"\nnode = 1\nstep = 3\nactor = ";
  CHECK_NOTHROW(config::check_supported(config::load_config_text(
      crash + "\"pipeline_stage\"\n", "x", {"cluster.nodes=2", "parallel.pipeline=2"})));
  CHECK_NOTHROW(config::check_supported(config::load_config_text(
      crash + "\"gradient_shard\"\n", "x", {"cluster.nodes=2", "parallel.pipeline=2"})));
  for (const char* actor : {"worker", "data_prefetcher", "health_monitor", "metrics_exporter"})
    CHECK_NOTHROW(config::check_supported(config::load_config_text(
        crash + "\"" + actor + "\"\n", "x", {"cluster.nodes=2", "parallel.pipeline=2"})));
  CHECK_NOTHROW(config::check_supported(config::load_config_text(
      crash + "\"pipeline_stage\"\n", "x", {"cluster.nodes=2", "parallel.tensor=2"})));
  CHECK_NOTHROW(config::check_supported(config::load_config_text(
      crash + "\"gradient_shard\"\n", "x", {"cluster.nodes=2", "parallel.tensor=2"})));
  CHECK_NOTHROW(config::check_supported(config::load_config_text(
      crash + "\"worker\"\n", "x", {"cluster.nodes=2", "parallel.tensor=2"})));
  CHECK_THAT(error_of([&] {
               config::check_supported(config::load_config_text(
                   crash + "\"pipeline_stage\"\n", "x", {"cluster.nodes=2", "parallel.data=2"}));
             }),
             Contains("only a pipeline or tensor-parallel job (parallel.pipeline or "
                      "parallel.tensor > 1) has that actor"));
  // The schedule keys mean nothing without a pipeline: refused rather than ignored.
  auto stray = config::load_config_text("", "x.toml", {"parallel.virtual_stages=2"});
  CHECK_THAT(error_of([&] { config::check_supported(stray); }),
             Contains("apply to pipeline-parallel jobs"));
}

TEST_CASE("config: tensor parallelism runs one rank per node, with replicas too", "[config][tp]") {
  auto tensor = config::load_config_text("", "x.toml", {"cluster.nodes=2", "parallel.tensor=2"});
  CHECK_NOTHROW(config::check_supported(tensor));
  CHECK_THAT(error_of([&] { config::load_config_text("", "x.toml", {"parallel.tensor=2"}); }),
             Contains("parallel.tensor (2) must equal cluster.nodes (1)"));
  // So does the data group of a tensor-parallel group.
  CHECK_NOTHROW(config::check_supported(config::load_config_text(
      "", "x.toml", {"cluster.nodes=4", "parallel.tensor=2", "parallel.data=2",
                     "parallel.zero=1", "comm.compression=\"int8\""})));
  // Checkpoints are gathered to rank 0 and resumed across layouts, replicas too; ZeRO
  // shards the optimizer over the data group.
  for (const char* setting : {"checkpoint.every_steps=5", "checkpoint.resume=\"latest\"",
                              "parallel.zero=1", "parallel.zero=2"}) {
    INFO(setting);
    auto job = config::load_config_text(
        "", "x.toml", {"cluster.nodes=4", "parallel.tensor=2", "parallel.data=2", setting});
    CHECK_NOTHROW(config::check_supported(job));
  }
  // Pipeline x tensor: one tensor rank of one stage per node, checkpoints too.
  auto with_pipeline = config::load_config_text(
      "", "x.toml", {"cluster.nodes=4", "parallel.tensor=2", "parallel.pipeline=2"});
  CHECK_NOTHROW(config::check_supported(with_pipeline));
  CHECK_THAT(error_of([&] {
               config::load_config_text("", "x.toml", {"cluster.nodes=2", "parallel.tensor=2",
                                                       "parallel.pipeline=2"});
             }),
             Contains("parallel.pipeline (2) x parallel.tensor (2) must equal cluster.nodes (2)"));
  for (const char* setting : {"checkpoint.every_steps=5", "checkpoint.resume=\"latest\""}) {
    INFO(setting);
    auto job = config::load_config_text(
        "", "x.toml", {"cluster.nodes=4", "parallel.tensor=2", "parallel.pipeline=2", setting});
    CHECK_NOTHROW(config::check_supported(job));
  }
  // Replicas of the group run (parallel.data x parallel.tensor = cluster.nodes), each on
  // an equal slice of the batch.
  auto with_data = config::load_config_text(
      "", "x.toml", {"cluster.nodes=4", "parallel.tensor=2", "parallel.data=2"});
  CHECK_NOTHROW(config::check_supported(with_data));
  CHECK_THAT(error_of([&] {
               config::load_config_text("", "x.toml", {"cluster.nodes=4", "parallel.tensor=2",
                                                       "parallel.data=2", "train.batch_size=6",
                                                       "train.micro_batch_size=2"});
             }),
             Contains("train.micro_batch_size (2) must divide each replica's slice"));
  auto with_fault = config::load_config_text(
      "[[faults]]\nkind = \"corrupt_gradient\"\nnode = 1\nstep = 1\n", "x",
      {"cluster.nodes=2", "parallel.tensor=2"});
  CHECK_THAT(error_of([&] { config::check_supported(with_fault); }),
             Contains("corrupt_gradient is caught by comparing replicas"));
  // With replicas of the group their checksums catch it: allowed.
  auto replicated_fault = config::load_config_text(
      "[[faults]]\nkind = \"corrupt_gradient\"\nnode = 1\nstep = 1\n", "x",
      {"cluster.nodes=4", "parallel.tensor=2", "parallel.data=2"});
  CHECK_NOTHROW(config::check_supported(replicated_fault));
  // A slow node is allowed: it sleeps as each step starts and the others wait for it.
  auto with_slow = config::load_config_text("[[faults]]\nkind = \"slow\"\nstep = 1\nms = 5\n", "x",
                                            {"cluster.nodes=2", "parallel.tensor=2"});
  CHECK_NOTHROW(config::check_supported(with_slow));
  auto with_kill = config::load_config_text("[[faults]]\nkind = \"kill\"\nnode = 1\nstep = 3\n",
                                            "x", {"cluster.nodes=2", "parallel.tensor=2"});
  CHECK_NOTHROW(config::check_supported(with_kill));
}

TEST_CASE("config: to_toml round-trips", "[config]") {
  auto full = config::load_config_text(kFullConfig, "full.toml");
  auto text = config::to_toml(full);
  auto again = config::load_config_text(text, "again.toml");
  CHECK(config::to_toml(again) == text);
  CHECK(again.train.run_dir == full.train.run_dir);
  CHECK(again.train.lr == full.train.lr);
  CHECK(again.faults.size() == 2);

  // Awkward floats and strings survive too.
  auto job = config::default_config();
  job.train.lr = 0.1 + 0.2;
  job.train.eps = 1e-300;
  job.model.init_std = 1e20;
  job.data.dir = "tab\there\nnewline \x01 \xc3\xa9";
  auto reread = config::load_config_text(config::to_toml(job), "x");
  CHECK(reread.train.lr == job.train.lr);
  CHECK(reread.train.eps == job.train.eps);
  CHECK(reread.model.init_std == job.model.init_std);
  CHECK(reread.data.dir == job.data.dir);
  CHECK(config::to_toml(reread) == config::to_toml(job));
}

TEST_CASE("config: describe_markdown lists every key", "[config]") {
  auto reference = config::describe_markdown();
  auto defaults = config::to_toml(config::default_config());
  std::istringstream lines(defaults);
  std::string section;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("[", 0) == 0) section = line.substr(1, line.size() - 2);
    auto equals = line.find(" = ");
    if (equals == std::string::npos) continue;
    std::string row = "| `" + section + "." + line.substr(0, equals) + "` |";
    INFO(row);
    CHECK_THAT(reference, Contains(row));
  }
  CHECK_THAT(reference, Contains("| `faults.kind` | enum | *required* |"));
  CHECK_THAT(reference, Contains("| `model.dim` | int | `256` | >= 1 |"));
}

TEST_CASE("config: config/REFERENCE.md is describe_markdown()", "[config]") {
  auto path = dseek::testing::source_dir() / "config" / "REFERENCE.md";
  REQUIRE(std::filesystem::exists(path));
  INFO("regenerate it: dseek config --describe > config/REFERENCE.md");
  CHECK(read_file(path) == config::describe_markdown());
}

TEST_CASE("config: every config/*.toml of the source tree is valid", "[config]") {
  auto dir = dseek::testing::source_dir() / "config";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    INFO(entry.path().string());
    CHECK_NOTHROW(config::validate(config::load_config(entry.path())));
  }
}

TEST_CASE("config: relative paths in a file are read against the file's folder", "[config]") {
  dseek::testing::ScratchDir dir("config-paths");
  std::filesystem::create_directories(dir / "jobs");
  std::ofstream(dir / "jobs/job.toml")
      << "[train]\nrun_dir = \"runs/a\"\n[data]\ndir = \"../data/x\"\n"
         "[checkpoint]\ndir = \"/abs/ck\"\nresume = \"latest\"\n"
         "[cluster]\ntls_ca = \"pki/ca.pem\"\ntls_cert = \"pki/n.pem\"\ntls_key = \"/k.pem\"\n";
  const auto job = config::load_config(dir / "jobs/job.toml");
  CHECK(job.train.run_dir == (dir / "jobs/runs/a").string());
  CHECK(job.data.dir == (dir / "data/x").string());
  CHECK(job.checkpoint.dir == "/abs/ck");      // absolute: as written
  CHECK(job.checkpoint.resume == "latest");    // not a path
  CHECK(job.cluster.tls_ca == (dir / "jobs/pki/ca.pem").string());
  // An override's path is the command line's: relative to the current directory.
  const auto overridden = config::load_config(dir / "jobs/job.toml", {"data.dir=here"});
  CHECK(overridden.data.dir == "here");
  // ... until a program makes every path absolute, against the current directory.
  auto absolute = overridden;
  config::make_paths_absolute(absolute);
  CHECK(absolute.data.dir == (std::filesystem::current_path() / "here").string());
  CHECK(absolute.train.run_dir == overridden.train.run_dir);  // already absolute
  CHECK(absolute.checkpoint.resume == "latest");
  // Text that is not a file keeps its paths as written.
  CHECK(config::load_config_text("[data]\ndir = \"rel\"\n", "x.toml").data.dir == "rel");
  // Every path key is a string key of the table.
  for (const auto name : config::path_keys()) CHECK(config::is_path_key(name));
  CHECK_FALSE(config::is_path_key("model.dim"));
}

TEST_CASE("config: a missing file is named with its absolute path", "[config]") {
  const auto cwd = std::filesystem::current_path();
  CHECK_THROWS_WITH(config::load_config("no/such.toml"),
                    Contains((cwd / "no/such.toml").string() + "): no such file"));
}

// Issue 28, finding 7: an empty file was reported as unreadable; data.prefetch = 1e8 was
// accepted and grew the prefetcher to 4.2 GB before it failed.
TEST_CASE("config: an empty file is reported as empty, data.prefetch is bounded", "[config]") {
  dseek::testing::ScratchDir dir("config-empty");
  for (const char* text : {"", "\n  \n"}) {
    std::ofstream(dir / "empty.toml") << text;
    try {
      config::load_config(dir / "empty.toml");
      FAIL("an empty config was accepted");
    } catch (const config::ConfigError& error) {
      CHECK_THAT(error.what(), Contains("empty.toml") && Contains("the file is empty"));
      CHECK_THAT(error.what(), !Contains("cannot read"));
    }
  }
  CHECK(config::load_config_text("[data]\nprefetch = 1024\n", "x.toml").data.prefetch == 1024);
  CHECK_THROWS_WITH(config::load_config_text("[data]\nprefetch = 100000000\n", "x.toml"),
                    Contains("data.prefetch") && Contains("1024"));
}

// Issue 28, finding 7: absurd sizes ended in a bare std::bad_alloc. The bound counts the
// GPT's parameters exactly (checked against the tiny layout's count) and refuses a model
// that cannot fit before anything is allocated.
TEST_CASE("config: a model too large for this machine is refused before allocating",
          "[config]") {
  config::ModelConfig tiny;
  tiny.dim = 16, tiny.layers = 2, tiny.heads = 2, tiny.context = 8, tiny.vocab = 32;
  // 32*16 + 8*16 + 2*(12*256 + 13*16) + 2*16 = 512 + 128 + 6560 + 32
  CHECK(config::parameter_count(tiny) == 7232);
  try {
    config::load_config_text("[model]\ndim = 1000000\nheads = 1\n", "huge.toml");
    FAIL("a model of 1e13 parameters was accepted");
  } catch (const config::ConfigError& error) {
    CHECK_THAT(error.what(), Contains("huge.toml") && Contains("model.dim 1000000") &&
                                 Contains("needs at least") && Contains("this machine has"));
  }
  auto job = config::default_config();
  CHECK_FALSE(config::memory_shortfall(job, config::physical_memory_bytes()));
  CHECK(config::memory_shortfall(job, 1000.0));  // 1 kB: named, not allocated
}
