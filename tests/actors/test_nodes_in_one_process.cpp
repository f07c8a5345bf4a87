// Two nodes of one job in one process, each in its own actor system (an embedding
// application may run several): they share no process-wide state. Each node's trace
// gets its own spans (a second node used to take over the first's span listener), its
// own trace clock (DSEEK_TEST_TRACE_CLOCK_SHIFT shifts node 1 only, so node 1 measures
// its offset to the coordinator on node 0 as -5 s), and its own crash policy (node 0's
// config injects a crash_actor fault and its health monitor is restarted by it; node 1's
// does not, and a crash request sent to its health monitor is ignored).
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "actors/faults/crash_request.hpp"
#include "actors/node/embedded_node.hpp"
#include "actors/node/node_registry.hpp"
#include "runtime/config/load.hpp"
#include "support/node_runs.hpp"
#include "support/test_paths.hpp"

using namespace dseek;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

class node_system_config : public caf::actor_system_config {
 public:
  explicit node_system_config(const config::ClusterConfig& cluster) {
    actors::register_node_types(*this, cluster);
  }
};

std::string slurp(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The clock offset a node trace recorded (its "clock_offset" metadata), or NaN.
double clock_offset_of(const std::string& trace) {
  static const std::regex offset(R"("name": "clock_offset".*?"offset_us": (-?[0-9.]+))");
  std::smatch match;
  if (!std::regex_search(trace, match, offset)) return std::nan("");
  return std::stod(match[1].str());
}

// Node `node_id` of the tiny 2-node job on loopback (coordinator on node 0 at `port`).
config::JobConfig member(int port, int node_id, int steps, const std::string& faults) {
  std::vector<std::string> overrides = {
      "data.dir=\"" + testing::prepared_text().string() + "\"", "checkpoint.every_steps=0",
      "model.dim=64", "model.layers=2", "model.heads=4", "model.context=64",
      "train.batch_size=12", "train.steps=" + std::to_string(steps), "train.warmup_steps=5",
      "train.eval_every=0", "train.threads=1", "metrics.progress=\"plain\"",
      "cluster.nodes=2", "cluster.coordinator=\"127.0.0.1:" + std::to_string(port) + "\"",
      "cluster.node_id=" + std::to_string(node_id), "cluster.secret=\"one-process-test\""};
  if (!faults.empty()) overrides.push_back("faults=" + faults);
  return config::load_config(testing::source_dir() / "config/single.toml", overrides);
}

}  // namespace

TEST_CASE("two nodes of a job in one process keep their own trace, clock and crash policy",
          "[embed][actors]") {
  constexpr int steps = 12;
  testing::ScratchDir run("nodes-in-one-process");
  const int port = testing::free_port();
  ::setenv("DSEEK_TEST_TRACE_CLOCK_SHIFT", "1:5000000", 1);  // node 1's clock 5 s ahead
  // Node 0 injects a crash of its health monitor at step 3; node 1 injects nothing.
  const auto job0 = member(port, 0, steps,
                           R"([{kind="crash_actor", actor="health_monitor", node=0, step=3}])");
  const auto job1 = member(port, 1, steps, "");
  REQUIRE(actors::crash_requests_of(job0) == actors::crash_requests::obeyed);
  REQUIRE(actors::crash_requests_of(job1) == actors::crash_requests::ignored);

  std::vector<actors::node_result> results(2);
  {
    node_system_config cfg0{job0.cluster}, cfg1{job1.cluster};
    caf::actor_system sys0{cfg0}, sys1{cfg1};
    caf::scoped_actor watch0{sys0}, watch1{sys1};
    actors::node_options options;
    options.run_dir = run.path();
    options.subscribers = {caf::actor_cast<caf::actor>(watch0)};
    auto node0 = actors::spawn_node(sys0, job0, options);
    options.subscribers = {caf::actor_cast<caf::actor>(watch1)};
    auto node1 = actors::spawn_node(sys1, job1, options);
    ::unsetenv("DSEEK_TEST_TRACE_CLOCK_SHIFT");  // each node read it at its start

    // A crash request to node 1's health monitor (once it runs) is ignored.
    caf::actor monitor1;
    for (int i = 0; i < 1000 && !monitor1; ++i) {
      monitor1 = actors::names::lookup(sys1, actors::names::health_monitor);
      if (!monitor1) std::this_thread::sleep_for(10ms);
    }
    REQUIRE(monitor1);
    caf::anon_send(monitor1, actors::crash_atom::value);

    auto result_of = [](caf::scoped_actor& watch, actors::node_result& out) {
      bool done = false;
      watch->receive_while([&] { return !done; })(
          [&](const actors::node_event&) {}, [&](const actors::node_result& r) { out = r; done = true; },
          caf::after(180s) >> [&] { done = true; out.exit_code = -1; out.reason = "no result in 180 s"; });
    };
    result_of(watch1, results[1]);
    result_of(watch0, results[0]);
    // Node 1's health monitor is the one it started with (nothing restarted it).
    CHECK(actors::names::lookup(sys1, actors::names::health_monitor) == monitor1);
    caf::anon_send_exit(node0, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(node1, caf::exit_reason::user_shutdown);
  }
  ::unsetenv("DSEEK_TEST_TRACE_CLOCK_SHIFT");
  for (int node = 0; node < 2; ++node) {
    INFO("node " << node << ": " << results[node].reason);
    REQUIRE(results[node].exit_code == 0);
    CHECK(results[node].steps == steps);
  }
  CHECK(results[0].params_sha256 == results[1].params_sha256);

  // Crash policy: node 0's fault restarted its health monitor; nothing restarted node 1's.
  const auto restarts0 = testing::node_events(run.path(), 0, "actor_restarted");
  const auto restarts1 = testing::node_events(run.path(), 1, "actor_restarted");
  CHECK(restarts0.size() == 1);
  CHECK(restarts1.empty());

  // Traces: each node's forward spans are its own steps' (as many on both, at least one
  // a step); one node's listener taking both nodes' spans would leave the other none.
  const std::string trace0 = slurp(run / "node-0/trace.json");
  const std::string trace1 = slurp(run / "node-1/trace.json");
  const size_t forwards0 = count_of(trace0, "\"name\": \"forward\"");
  CHECK(forwards0 >= static_cast<size_t>(steps));
  CHECK(count_of(trace1, "\"name\": \"forward\"") == forwards0);
  CHECK(count_of(trace0, "\"name\": \"all_reduce\"") > 0);
  CHECK(count_of(trace1, "\"name\": \"all_reduce\"") > 0);
  // Clocks: node 1's is 5 s ahead of the coordinator's (node 0's), node 0's is not.
  const double offset1 = clock_offset_of(trace1);
  INFO("node 1's clock offset " << offset1 << " us");
  CHECK(std::abs(offset1 + 5e6) < 0.5e6);
  const double offset0 = clock_offset_of(trace0);
  if (!std::isnan(offset0)) CHECK(std::abs(offset0) < 0.5e6);
}
