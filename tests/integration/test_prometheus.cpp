// The Prometheus endpoint of a real dseek-node (metrics.prometheus_port): scraped while
// a short job trains and again after it ended (metrics.prometheus_linger_seconds keeps
// it up), its counters and gauges must equal what the node's events.jsonl says; its
// metrics_exporter, crashed by a fault, comes back listening on the same port; other
// paths get 404; the endpoint goes with the node; a port in use fails the start with a
// message naming the key and the port.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/spawned_process.hpp"
#include "support/http_get.hpp"
#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using dseek::test::SpawnedProcess;

namespace {

// The settings that turn the endpoint on at `port` of loopback, lingering `linger` s.
std::vector<std::string> prometheus_on(int port, int linger) {
  return {"--set", "metrics.prometheus_port=" + std::to_string(port),
          "--set", "metrics.prometheus_host=\"127.0.0.1\"",
          "--set", "metrics.prometheus_linger_seconds=" + std::to_string(linger)};
}

// The value of the one sample of `name` in an exposition text; nullopt if absent.
std::optional<double> sample(const std::string& text, const std::string& name) {
  const std::string start = name + "{";
  size_t at = text.rfind("\n" + start);
  if (at == std::string::npos) {
    if (text.rfind(start, 0) != 0) return std::nullopt;
    at = 0;
  } else {
    ++at;
  }
  const size_t end = text.find('\n', at);
  const std::string line = text.substr(at, end - at);
  return std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
}

std::string read_file(const std::filesystem::path& file) {
  std::string text;
  for (const auto& line : read_lines(file)) text += line + "\n";
  return text;
}

}  // namespace

TEST_CASE("dseek-node serves /metrics that agree with its events.jsonl",
          "[node][prometheus]") {
  ScratchDir run("prometheus-node");
  const int port = free_port();
  constexpr int kSteps = 40;
  const std::vector<std::string> extra = {
      "--set", "train.batch_size=12", "--set", "model.context=64",  // 768 tokens a step
      "--set", "checkpoint.every_steps=10"};
  auto job = tiny_job(run.path(), kSteps, extra) + prometheus_on(port, 120) +
             faults(R"({kind = "crash_actor", actor = "metrics_exporter", step = 15})");
  SpawnedProcess node = SpawnedProcess::start(job, (run / "node.log").string());

  // While it trains.
  std::optional<double> steps_while_training;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (!steps_while_training && std::chrono::steady_clock::now() < deadline && node.running()) {
    const auto reply = http_get("127.0.0.1", port, "/metrics", 5s);
    if (reply.status == 200 && sample(reply.body, "dseek_step")) {
      steps_while_training = sample(reply.body, "dseek_steps_total");
      CHECK_THAT(reply.headers, Contains("Content-Type: text/plain; version=0.0.4"));
    } else {
      std::this_thread::sleep_for(50ms);
    }
  }
  INFO(read_file(run / "node.log"));
  REQUIRE(steps_while_training);
  CHECK(*steps_while_training >= 1);

  // After it trained: the node lingers (its log says so once training ended).
  const auto done = wait_for_event(run.path(), 0, "train_done", 240s);
  REQUIRE_FALSE(done.empty());
  const auto linger_deadline = std::chrono::steady_clock::now() + 60s;
  while (read_file(run / "node.log").find("serving /metrics on 127.0.0.1:") == std::string::npos &&
         std::chrono::steady_clock::now() < linger_deadline)
    std::this_thread::sleep_for(50ms);
  const auto reply = http_get("127.0.0.1", port, "/metrics");
  REQUIRE(reply.status == 200);
  const std::string& text = reply.body;
  INFO(text);

  const auto lines = read_lines(run / "node-0/events.jsonl");
  const auto steps = events_named(lines, "step");
  REQUIRE(steps.size() == kSteps);
  // The exporter crashed by the fault was restarted and listens again.
  REQUIRE(events_named(lines, "fault_injected").size() == 1);
  CHECK(sample(text, "dseek_steps_total") == static_cast<double>(steps.size()));
  CHECK(sample(text, "dseek_tokens_total") == 768.0 * static_cast<double>(steps.size()));
  CHECK(sample(text, "dseek_checkpoints_written_total") ==
        static_cast<double>(events_named(lines, "checkpoint_committed").size()));
  // Every 10 steps and at the end, less any skipped while the previous write ran.
  CHECK(events_named(lines, "checkpoint_committed").size() >= 2);
  CHECK(sample(text, "dseek_nodes_lost_total") ==
        static_cast<double>(events_named(lines, "node_lost").size()));
  CHECK(sample(text, "dseek_recoveries_total") ==
        static_cast<double>(events_named(lines, "recovered").size()));
  CHECK(sample(text, "dseek_actor_restarts_total") ==
        static_cast<double>(events_named(lines, "actor_restarted").size()));
  CHECK(sample(text, "dseek_gradient_sent_bytes_total") == 0);  // one node reduces nothing
  const auto& last = steps.back();
  CHECK(sample(text, "dseek_step") == number_field(last, "step"));
  CHECK(sample(text, "dseek_loss") == number_field(last, "loss"));
  CHECK(sample(text, "dseek_learning_rate") == number_field(last, "lr"));
  CHECK(sample(text, "dseek_grad_norm") == number_field(last, "grad_norm"));
  CHECK(sample(text, "dseek_tokens_per_second") == number_field(last, "tokens_per_s"));
  CHECK(sample(text, "dseek_step_compute_seconds") == number_field(last, "compute_ms") / 1000);
  CHECK(sample(text, "dseek_step_exposed_comm_seconds") == number_field(last, "comm_ms") / 1000);
  CHECK(sample(text, "dseek_data_wait_seconds") == number_field(last, "data_wait_ms") / 1000);
  CHECK(sample(text, "dseek_data_prefetch_queue_depth") == number_field(last, "prefetch_queue_depth"));
  CHECK(sample(text, "dseek_peak_memory_bytes") == number_field(last, "peak_memory_bytes"));
  CHECK(sample(text, "dseek_validation_loss") ==
        number_field(events_named(lines, "eval").back(), "val_loss"));
  const auto epochs = events_named(lines, "epoch_started");
  REQUIRE_FALSE(epochs.empty());
  CHECK(sample(text, "dseek_epoch") == number_field(epochs.back(), "epoch"));
  CHECK(sample(text, "dseek_world_size") == 1);
  for (const char* counter : {"dseek_steps_total", "dseek_tokens_total",
                              "dseek_checkpoints_written_total", "dseek_nodes_lost_total",
                              "dseek_recoveries_total"})
    CHECK_THAT(text, Contains(std::string("# TYPE ") + counter + " counter\n"));
  CHECK_THAT(text, Contains("# TYPE dseek_loss gauge\n"));
  CHECK_THAT(text, Contains("# HELP dseek_loss "));
  CHECK_THAT(text, Contains("dseek_steps_total{node=\"0\",run=\"" +
                            run.path().filename().string() + "\"} 40\n"));

  CHECK(http_get("127.0.0.1", port, "/").status == 404);
  CHECK(http_get("127.0.0.1", port, "/metric").status == 404);

  // A signal ends the lingering; the endpoint goes with the node.
  node.signal(SIGTERM);
  const auto code = node.wait_for(60s);
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK(http_get("127.0.0.1", port, "/metrics", 2s).status == 0);
}

TEST_CASE("each node of a launched job serves /metrics on the base port + its node id",
          "[launch][prometheus]") {
  ScratchDir run("prometheus-launch");
  const int port = free_port_pair();
  const auto job = tiny_launch(run.path(), 2, 10) + prometheus_on(port, 120);
  SpawnedProcess launcher =
      SpawnedProcess::start(job, (run / "launch.log").string(), launch_env());
  const auto deadline = std::chrono::steady_clock::now() + 240s;
  auto lingering = [&](int node) {
    return read_file(run / "launch.log")
               .find("[node " + std::to_string(node) + "] dseek-node: serving /metrics") !=
           std::string::npos;
  };
  while (!(lingering(0) && lingering(1)) && std::chrono::steady_clock::now() < deadline &&
         launcher.running())
    std::this_thread::sleep_for(50ms);
  INFO(read_file(run / "launch.log"));
  REQUIRE((lingering(0) && lingering(1)));

  for (int node = 0; node < 2; ++node) {
    INFO("node " << node);
    const auto reply = http_get("127.0.0.1", port + node, "/metrics");
    REQUIRE(reply.status == 200);
    INFO(reply.body);
    const auto steps = node_events(run.path(), node, "step");
    REQUIRE(steps.size() == 10);
    double sent = 0, received = 0;
    for (const auto& step : steps) {
      sent += number_field(step, "comm_bytes_sent");
      received += number_field(step, "comm_bytes_received");
    }
    CHECK(sent > 0);
    CHECK(sample(reply.body, "dseek_steps_total") == 10);
    CHECK(sample(reply.body, "dseek_gradient_sent_bytes_total") == sent);
    CHECK(sample(reply.body, "dseek_gradient_received_bytes_total") == received);
    CHECK(sample(reply.body, "dseek_loss") == number_field(steps.back(), "loss"));
    CHECK(sample(reply.body, "dseek_world_size") == 2);
    CHECK_THAT(reply.body, Contains("dseek_steps_total{node=\"" + std::to_string(node) + "\","));
  }

  // The launcher passes SIGTERM on; the lingering nodes stop orderly (the launcher was
  // stopped by the signal: 143).
  launcher.signal(SIGTERM);
  const auto code = launcher.wait_for(60s);
  REQUIRE(code);
  CHECK(*code == 143);
  require_no_node_left(run.path(), 2);
}

TEST_CASE("dseek-node refuses to start when its /metrics port is in use",
          "[node][prometheus]") {
  ScratchDir run("prometheus-busy");
  // Another program holds the port.
  const int holder = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(holder, 1) == 0);
  socklen_t length = sizeof address;
  ::getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length);
  const int port = ntohs(address.sin_port);

  const auto result = run_process(tiny_job(run.path(), 5) + prometheus_on(port, 0), 120s);
  ::close(holder);
  INFO(result.output);
  CHECK(result.exit_code == 3);  // a config error: restarts would not free the port
  CHECK_FALSE(result.timed_out);
  CHECK_THAT(result.output, Contains("metrics.prometheus_port"));
  CHECK_THAT(result.output, Contains("127.0.0.1:" + std::to_string(port) +
                                     ": Address already in use"));
  CHECK(node_events(run.path(), "step").empty());
}

// Issue 28, finding 4: with node 1's port taken, node 1 failed in its node supervisor,
// was restarted and given up, and the launcher trained on node 0 alone and exited 0.
TEST_CASE("a launched node whose /metrics port is in use stops the job with exit 3",
          "[launch][prometheus]") {
  ScratchDir run("prometheus-launch-busy");
  const int port = free_port_pair();
  const int holder = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port + 1));
  REQUIRE(::bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(holder, 1) == 0);
  const auto result =
      run_process(tiny_launch(run.path(), 2, 10) + prometheus_on(port, 0), 180s, launch_env());
  ::close(holder);
  INFO(result.output);
  CHECK_FALSE(result.timed_out);
  CHECK(result.exit_code == 3);
  CHECK_THAT(result.output, Contains("127.0.0.1:" + std::to_string(port + 1) +
                                     ": Address already in use"));
  CHECK_THAT(result.output, Contains("no restart can cure it"));
  CHECK_THAT(result.output, Contains("exit 3"));
  CHECK(node_events(run.path(), 0, "train_done").empty());
  require_no_node_left(run.path(), 2);
}
