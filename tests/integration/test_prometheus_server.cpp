// A real Prometheus server (Debian's prometheus) scraping a `dseek launch --nodes 2` job
// on loopback: a scrape config generated for the job's two /metrics ports, the alert
// rules of deploy/prometheus/alerts.yml, a temporary storage folder, free ports. The
// test reads both nodes' step counters through Prometheus's HTTP API, kills node 1, and
// sees DseekNodeUnreachable (its target is down) go pending or firing and DseekNodeLost
// (node 0 counted the loss) fire. Every wait is bounded; the server and the job are
// stopped on every path (SpawnedProcess kills its process group when it goes).
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "actors/spawned_process.hpp"
#include "support/http_get.hpp"
#include "support/node_runs.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
using dseek::test::SpawnedProcess;

namespace {

constexpr const char* kPrometheus = "/usr/bin/prometheus";

// GET over HTTP/1.0, so that Prometheus (Go) answers without chunks and closes.
std::string api_get(int port, const std::string& path) {
  const auto raw = http_exchange("127.0.0.1", port,
                                 "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", 5s);
  if (!raw) return "";
  const auto reply = parse_http_reply(*raw);
  return reply.status == 200 ? reply.body : "";
}

// The string value of label or field `key` in `object` ("key":"value"); "" if absent.
std::string quoted_after(const std::string& object, const std::string& key) {
  const std::string start = "\"" + key + "\":\"";
  const size_t at = object.find(start);
  if (at == std::string::npos) return "";
  const size_t from = at + start.size();
  return object.substr(from, object.find('"', from) - from);
}

// The pieces of a JSON answer that start with `marker` (one result or alert each).
std::vector<std::string> pieces(const std::string& body, const std::string& marker) {
  std::vector<std::string> out;
  size_t at = body.find(marker);
  while (at != std::string::npos) {
    const size_t next = body.find(marker, at + marker.size());
    out.push_back(body.substr(at, next == std::string::npos ? std::string::npos : next - at));
    at = next;
  }
  return out;
}

// node label -> value of an instant query's vector result.
std::map<std::string, double> by_node(const std::string& body) {
  std::map<std::string, double> out;
  for (const auto& result : pieces(body, "{\"metric\":")) {
    const size_t value = result.find("\"value\":[");
    if (value == std::string::npos) continue;
    const size_t quote = result.find('"', result.find(',', value));
    out[quoted_after(result, "node")] = std::strtod(result.c_str() + quote + 1, nullptr);
  }
  return out;
}

// The state ("pending", "firing") of alert `name` whose label `label` is `value`; "".
std::string alert_state(const std::string& body, const std::string& name,
                        const std::string& label, const std::string& value) {
  for (const auto& alert : pieces(body, "{\"labels\":"))
    if (quoted_after(alert, "alertname") == name && quoted_after(alert, label) == value)
      return quoted_after(alert, "state");
  return "";
}

}  // namespace

TEST_CASE("a real Prometheus scrapes both nodes of a launched job and sees a node lost",
          "[prometheus-server][launch]") {
  if (!std::filesystem::exists(kPrometheus))
    FAIL("no " << kPrometheus << ": scripts/install-deps.sh test installs Debian's prometheus");
  ScratchDir run("prometheus-server");
  const int metrics_port = free_port_pair();
  int server_port = free_port();
  while (server_port == metrics_port || server_port == metrics_port + 1) server_port = free_port();
  const std::string target0 = "127.0.0.1:" + std::to_string(metrics_port);
  const std::string target1 = "127.0.0.1:" + std::to_string(metrics_port + 1);
  const auto config = run / "prometheus.yml";
  // A scrape of node 0 that missed its timeout would make its target's alert pending:
  // the timeout is long enough for a loaded 2-core machine (one compute thread a node).
  std::ofstream(config) << "global:\n  scrape_interval: 2s\n  scrape_timeout: 1900ms\n"
                           "  evaluation_interval: 1s\n"
                           "rule_files:\n  - " << (source_dir() / "deploy/prometheus/alerts.yml").string() << "\n"
                           "scrape_configs:\n  - job_name: dseek\n    static_configs:\n"
                           "      - targets: [\"" << target0 << "\", \"" << target1 << "\"]\n";
  SpawnedProcess server = SpawnedProcess::start(
      {kPrometheus, "--config.file=" + config.string(),
       "--storage.tsdb.path=" + (run / "tsdb").string(),
       "--web.listen-address=127.0.0.1:" + std::to_string(server_port), "--log.level=warn"},
      (run / "prometheus.log").string());

  // A job that trains until the test stops it; a killed node is not restarted.
  const auto job = tiny_launch(run.path(), 2, 100000,
                               {"--set", "metrics.prometheus_port=" + std::to_string(metrics_port),
                                "--set", "metrics.prometheus_host=\"127.0.0.1\"",
                                "--set", "cluster.max_restarts=0",
                                "--set", "elastic.rejoin_seconds=1", "--set", "train.threads=1"});
  SpawnedProcess launcher = SpawnedProcess::start(job, (run / "launch.log").string(), launch_env());
  INFO(read_lines(run / "prometheus.log").size() << " lines of prometheus.log");

  // Both nodes' step counters through the HTTP API.
  std::map<std::string, double> steps;
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  while (std::chrono::steady_clock::now() < deadline && server.running() && launcher.running()) {
    steps = by_node(api_get(server_port, "/api/v1/query?query=dseek_steps_total"));
    if (steps["0"] > 0 && steps["1"] > 0) break;
    std::this_thread::sleep_for(500ms);
  }
  INFO("prometheus: " << api_get(server_port, "/api/v1/targets"));
  REQUIRE(server.running());
  REQUIRE(steps["0"] > 0);
  REQUIRE(steps["1"] > 0);
  // They follow the nodes' own counts: at most what the events say by now.
  CHECK(steps["1"] <= static_cast<double>(node_events(run.path(), 1, "step").size()));
  const auto mfu = by_node(api_get(server_port, "/api/v1/query?query=dseek_mfu"));
  CHECK(mfu.count("0") == 1);

  // Kill node 1: its target goes down, node 0 counts the loss.
  const auto pids = node_pids(run.path(), 1);
  REQUIRE(pids.size() == 1);
  REQUIRE(::kill(pids.front(), SIGKILL) == 0);
  std::string unreachable, lost, alerts;
  const auto alert_deadline = std::chrono::steady_clock::now() + 90s;
  while (std::chrono::steady_clock::now() < alert_deadline && server.running()) {
    alerts = api_get(server_port, "/api/v1/alerts");
    unreachable = alert_state(alerts, "DseekNodeUnreachable", "instance", target1);
    lost = alert_state(alerts, "DseekNodeLost", "node", "0");
    if (!unreachable.empty() && lost == "firing") break;
    std::this_thread::sleep_for(500ms);
  }
  INFO("alerts: " << alerts);
  CHECK((unreachable == "pending" || unreachable == "firing"));
  CHECK(lost == "firing");
  CHECK(alert_state(alerts, "DseekNodeUnreachable", "instance", target0).empty());

  launcher.signal(SIGTERM);
  CHECK(launcher.wait_for(60s));
  server.signal(SIGTERM);
  CHECK(server.wait_for(30s));
  require_no_node_left(run.path(), 2);
}
