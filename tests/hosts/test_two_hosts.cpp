// Jobs across network-separated hosts on the namespace test bed (scripts/hosts/testbed.sh):
// each host its own network, hostname and /dev/shm, so ranks on one host reduce through
// shared memory and ranks on different hosts can reach each other only over TCP through
// the bridge. Root only (label: hosts); every test removes its test bed, also on failure.
//
// Data parallelism on 2 hosts x 2 ranks (cluster.gpus_per_node = 2), TLS between the
// nodes: the world of 4 ranks has 2 hosts, so the all-reduce is the hierarchical one
// (inside each host, then between the hosts), where the same job on one host adds all
// four in one shared-memory reduction. Same data, same seed, another summation order:
// float32 rounding, ~1e-7 relative per step, grown by AdamW over 12 steps; bound 1e-4
// relative on every step's loss (a rank left out, or a gradient counted twice, moves
// the loss by far more), the same final parameters on every rank of a run.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/test_pki.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string testbed() { return (source_dir() / "scripts/hosts/testbed.sh").string(); }

// A test bed of `hosts` hosts for the life of the object; removed when it goes.
class TestBed {
 public:
  explicit TestBed(int hosts) : id_("t" + std::to_string(::getpid() % 100000)) {
    const auto check = run_process({testbed(), "check"}, 30s);
    INFO(check.output);
    REQUIRE(check.exit_code == 0);
    run_process({testbed(), "down", id_}, 60s);  // a leftover of an earlier crash
    const auto up = run_process({testbed(), "up", id_, std::to_string(hosts)}, 60s);
    INFO(up.output);
    REQUIRE(up.exit_code == 0);
    std::istringstream lines(up.output);
    for (std::string name, address; lines >> name >> address;) addresses_.push_back(address);
    REQUIRE(static_cast<int>(addresses_.size()) == hosts);
  }
  ~TestBed() { run_process({testbed(), "down", id_}, 60s); }
  TestBed(const TestBed&) = delete;
  TestBed& operator=(const TestBed&) = delete;

  const std::string& address(int host) const { return addresses_.at(static_cast<size_t>(host)); }
  // `argv` run as host `host`.
  std::vector<std::string> as_host(int host, const std::vector<std::string>& argv) const {
    std::vector<std::string> full = {testbed(), "exec", id_, std::to_string(host)};
    full.insert(full.end(), argv.begin(), argv.end());
    return full;
  }
  // Bytes host `host` sent onto the bridge (its link's root-side end received them).
  uint64_t bytes_sent(int host) const {
    std::ifstream in("/sys/class/net/dsk" + id_ + "v" + std::to_string(host) + "/statistics/rx_bytes");
    uint64_t bytes = 0;
    in >> bytes;
    return bytes;
  }

 private:
  std::string id_;
  std::vector<std::string> addresses_;
};

// The job both runs train: the tiny job, 12 steps, one thread per rank, 2 ranks a node.
const std::vector<std::string> kJob = {"--set", "train.threads=1", "--set", "train.eval_every=0",
                                       "--set", "cluster.gpus_per_node=2"};
constexpr int kSteps = 12;

std::vector<double> losses_of(const fs::path& run, int node) {
  std::vector<double> losses;
  for (const auto& step : node_events(run, node, "step")) losses.push_back(number_field(step, "loss"));
  return losses;
}

}  // namespace

TEST_CASE("hosts: data parallel on 2 hosts x 2 ranks over TCP and TLS trains as on one host",
          "[hosts]") {
  ScratchDir one_host("hosts-one"), two_hosts("hosts-two"), keys("hosts-keys");
  // The reference: both nodes on this host's loopback.
  const auto reference = run_process(tiny_launch(one_host.path(), 2, kSteps, kJob), 300s, launch_env());
  INFO(reference.output);
  REQUIRE(reference.exit_code == 0);

  TestPki pki(keys.path());
  pki.make_ca("cluster-ca");
  pki.make_node("cluster-ca", "node0", 10);
  pki.make_node("cluster-ca", "node1", 11);
  TestBed bed(2);
  const std::string coordinator = bed.address(0) + ":29500";
  std::vector<ProcessResult> results(2);
  std::vector<std::thread> nodes;
  for (int node = 0; node < 2; ++node) {
    const auto argv = bed.as_host(
        node, tiny_job(two_hosts.path(), kSteps,
                       kJob + std::vector<std::string>{
                                  "--node-id", std::to_string(node), "--coordinator", coordinator,
                                  "--set", "cluster.nodes=2",
                                  "--set", "cluster.advertise_host=\"" + bed.address(node) + "\""} +
                           pki.settings("cluster-ca", "node" + std::to_string(node))));
    nodes.emplace_back([&results, node, argv] {
      results[static_cast<size_t>(node)] =
          run_process(argv, 300s, {"DSEEK_CLUSTER_SECRET=hosts-test-secret"});
    });
  }
  for (auto& thread : nodes) thread.join();
  for (int node = 0; node < 2; ++node) {
    INFO("node " << node << ":\n" << results[static_cast<size_t>(node)].output);
    REQUIRE(results[static_cast<size_t>(node)].exit_code == 0);
  }

  // TLS on, 4 ranks on 2 hosts, every step trained.
  for (int node = 0; node < 2; ++node) {
    INFO("node " << node);
    const auto started = node_events(two_hosts.path(), node, "node_started");
    REQUIRE_FALSE(started.empty());
    CHECK(started.back().find("\"tls\":true") != std::string::npos);
    CHECK_FALSE(event_with(two_hosts.path(), node, "worker_started", "ranks", 4).empty());
  }
  const std::vector<double> expected = losses_of(one_host.path(), 0);
  REQUIRE(expected.size() == static_cast<size_t>(kSteps));
  for (int node = 0; node < 2; ++node) {
    const std::vector<double> losses = losses_of(two_hosts.path(), node);
    REQUIRE(losses.size() == expected.size());
    for (size_t s = 0; s < losses.size(); ++s) {
      INFO("node " << node << " step " << s + 1 << ": " << losses[s] << " vs " << expected[s]);
      CHECK(std::abs(losses[s] - expected[s]) <= 1e-4 * expected[s]);
    }
  }
  CHECK(final_params_sha256(two_hosts.path(), 0, kSteps) ==
        final_params_sha256(two_hosts.path(), 1, kSteps));
  // The gradients crossed the bridge: each host sent at least one model's worth of
  // gradient bytes per step (dim 64, 2 layers: ~0.1M floats) over its link.
  const uint64_t model_bytes = 100'000 * sizeof(float);
  for (int host = 0; host < 2; ++host) {
    INFO("host " << host << " sent " << bed.bytes_sent(host) << " bytes");
    CHECK(bed.bytes_sent(host) >= model_bytes * kSteps / 2);
  }
}
