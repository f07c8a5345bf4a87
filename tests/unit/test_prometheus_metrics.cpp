// The node's Prometheus metrics without a node: the event fields they read
// (util/json_fields.hpp), the counters and gauges folded from a given set of events and
// their exact text exposition (HELP/TYPE lines, label escaping, value formatting), the
// HTTP answers of the endpoint, and its server on a loopback socket (GET, 404, a bad
// request, a stalled client, a port in use, rebinding after a restart).
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>

#include "runtime/config/load.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/metrics_endpoint.hpp"
#include "runtime/metrics/metrics_http_server.hpp"
#include "runtime/metrics/prometheus_text.hpp"
#include "runtime/metrics/training_metrics.hpp"
#include "runtime/util/json_fields.hpp"
#include "support/http_get.hpp"
#include "support/test_paths.hpp"

using namespace dseek;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE("json fields: top-level numbers and strings of an event", "[metrics][prometheus]") {
  const std::string fields =
      R"({"plan":{"loss":1,"x":[{"loss":2}]},"name":"a \"q\" \\ b\n","loss":3.5,)"
      R"("bad":null,"flag":true,"tail":"},{"})";
  CHECK(util::json_number_field(fields, "loss") == 3.5);  // not the nested ones
  CHECK(std::isnan(*util::json_number_field(fields, "bad")));
  CHECK_FALSE(util::json_number_field(fields, "flag"));
  CHECK_FALSE(util::json_number_field(fields, "name"));
  CHECK_FALSE(util::json_number_field(fields, "absent"));
  CHECK_FALSE(util::json_number_field("not json", "loss"));
  CHECK(util::json_string_field(fields, "name") == std::string("a \"q\" \\ b\n"));
  CHECK(util::json_string_field(fields, "tail") == std::string("},{"));
  CHECK_FALSE(util::json_string_field(fields, "loss"));
  CHECK(util::json_number_field("{}", "loss") == std::nullopt);
  CHECK(util::json_number_field(R"({"n":-1.5e-3})", "n") == -1.5e-3);
}

TEST_CASE("prometheus text: the metrics of a set of events, exactly", "[metrics][prometheus]") {
  metrics::TrainingMetrics folded(768);  // 12 sequences of 64 tokens a step
  folded.observe("node_started", R"({"pid":7,"nodes":2})");
  folded.observe("epoch_started",
                 R"({"epoch":1,"world_size":2,"members":"0,1","plan":"node0:worker/rank0"})");
  folded.observe("step", R"({"step":1,"loss":5.5,"lr":0.0003,"grad_norm":1.25,)"
                         R"("tokens_per_s":4000,"step_ms":250,"compute_ms":200,"comm_ms":30,)"
                         R"("data_wait_ms":20,"peak_memory_bytes":1048576,)"
                         R"("comm_bytes_sent":1000,"comm_bytes_received":900})");
  folded.observe("step", R"({"step":2,"loss":5.25,"lr":0.0006,"grad_norm":1,)"
                         R"("tokens_per_s":5000,"step_ms":200,"compute_ms":150,"comm_ms":25,)"
                         R"("data_wait_ms":5,"peak_memory_bytes":2097152,)"
                         R"("comm_bytes_sent":1500,"comm_bytes_received":1400})");
  folded.observe("eval", R"({"step":2,"val_loss":5.375})");
  folded.observe("checkpoint_committed", R"({"step":2,"dir":"ckpt"})");
  folded.observe("checkpoint_failed", R"({"step":2,"error":"disk full"})");
  folded.observe("node_lost", R"({"lost_node":1,"reason":"down","epoch":1})");
  folded.observe("epoch_started", R"({"epoch":2,"world_size":1,"members":"0","plan":""})");
  folded.observe("recovered", R"({"from_step":2,"source":"peer","recovery_ms":12})");
  folded.observe("actor_restarted", R"({"supervisor":"node_supervisor","actor":"x"})");

  const std::string expected =
      "# HELP dseek_steps_total Training steps this node completed.\n"
      "# TYPE dseek_steps_total counter\n"
      "dseek_steps_total{node=\"1\",run=\"r\"} 2\n"
      "# HELP dseek_tokens_total Tokens of the global batches of the steps this node took "
      "part in.\n"
      "# TYPE dseek_tokens_total counter\n"
      "dseek_tokens_total{node=\"1\",run=\"r\"} 1536\n"
      "# HELP dseek_checkpoints_written_total Checkpoints this node wrote and committed.\n"
      "# TYPE dseek_checkpoints_written_total counter\n"
      "dseek_checkpoints_written_total{node=\"1\",run=\"r\"} 1\n"
      "# HELP dseek_checkpoint_failures_total Checkpoint writes of this node that failed.\n"
      "# TYPE dseek_checkpoint_failures_total counter\n"
      "dseek_checkpoint_failures_total{node=\"1\",run=\"r\"} 1\n"
      "# HELP dseek_nodes_lost_total Nodes this node saw leave the job.\n"
      "# TYPE dseek_nodes_lost_total counter\n"
      "dseek_nodes_lost_total{node=\"1\",run=\"r\"} 1\n"
      "# HELP dseek_recoveries_total Recoveries of the training state after a change of the "
      "world.\n"
      "# TYPE dseek_recoveries_total counter\n"
      "dseek_recoveries_total{node=\"1\",run=\"r\"} 1\n"
      "# HELP dseek_actor_restarts_total Actors of this node restarted by their supervisor.\n"
      "# TYPE dseek_actor_restarts_total counter\n"
      "dseek_actor_restarts_total{node=\"1\",run=\"r\"} 1\n"
      "# HELP dseek_gradient_sent_bytes_total Bytes this node sent in the gradient "
      "reductions.\n"
      "# TYPE dseek_gradient_sent_bytes_total counter\n"
      "dseek_gradient_sent_bytes_total{node=\"1\",run=\"r\"} 2500\n"
      "# HELP dseek_gradient_received_bytes_total Bytes this node received in the gradient "
      "reductions.\n"
      "# TYPE dseek_gradient_received_bytes_total counter\n"
      "dseek_gradient_received_bytes_total{node=\"1\",run=\"r\"} 2300\n"
      "# HELP dseek_skipped_steps_total Steps whose update the loss scaler skipped "
      "(non-finite gradients).\n"
      "# TYPE dseek_skipped_steps_total counter\n"
      "dseek_skipped_steps_total{node=\"1\",run=\"r\"} 0\n"
      "# HELP dseek_sdc_detections_total Silent data corruptions this node's replica checks or SDC audits "
      "detected.\n"
      "# TYPE dseek_sdc_detections_total counter\n"
      "dseek_sdc_detections_total{node=\"1\",run=\"r\"} 0\n"
      "# HELP dseek_step Number of the newest completed step.\n"
      "# TYPE dseek_step gauge\n"
      "dseek_step{node=\"1\",run=\"r\"} 2\n"
      "# HELP dseek_loss Training loss of the newest step.\n"
      "# TYPE dseek_loss gauge\n"
      "dseek_loss{node=\"1\",run=\"r\"} 5.25\n"
      "# HELP dseek_learning_rate Learning rate of the newest step.\n"
      "# TYPE dseek_learning_rate gauge\n"
      "dseek_learning_rate{node=\"1\",run=\"r\"} 0.0006\n"
      "# HELP dseek_grad_norm Global gradient norm of the newest step, before clipping.\n"
      "# TYPE dseek_grad_norm gauge\n"
      "dseek_grad_norm{node=\"1\",run=\"r\"} 1\n"
      "# HELP dseek_tokens_per_second Tokens per second of the newest step (global batch).\n"
      "# TYPE dseek_tokens_per_second gauge\n"
      "dseek_tokens_per_second{node=\"1\",run=\"r\"} 5000\n"
      "# HELP dseek_step_seconds Wall time of the newest step.\n"
      "# TYPE dseek_step_seconds gauge\n"
      "dseek_step_seconds{node=\"1\",run=\"r\"} 0.2\n"
      "# HELP dseek_step_compute_seconds Compute time of the newest step.\n"
      "# TYPE dseek_step_compute_seconds gauge\n"
      "dseek_step_compute_seconds{node=\"1\",run=\"r\"} 0.15\n"
      "# HELP dseek_step_exposed_comm_seconds Communication time of the newest step not "
      "hidden behind compute.\n"
      "# TYPE dseek_step_exposed_comm_seconds gauge\n"
      "dseek_step_exposed_comm_seconds{node=\"1\",run=\"r\"} 0.025\n"
      "# HELP dseek_data_wait_seconds Time the newest step waited for its batch.\n"
      "# TYPE dseek_data_wait_seconds gauge\n"
      "dseek_data_wait_seconds{node=\"1\",run=\"r\"} 0.005\n"
      "# HELP dseek_peak_memory_bytes Most memory of the compute backend held at once so "
      "far.\n"
      "# TYPE dseek_peak_memory_bytes gauge\n"
      "dseek_peak_memory_bytes{node=\"1\",run=\"r\"} 2097152\n"
      "# HELP dseek_validation_loss Validation loss of the newest evaluation.\n"
      "# TYPE dseek_validation_loss gauge\n"
      "dseek_validation_loss{node=\"1\",run=\"r\"} 5.375\n"
      "# HELP dseek_world_size Nodes in the current world epoch.\n"
      "# TYPE dseek_world_size gauge\n"
      "dseek_world_size{node=\"1\",run=\"r\"} 1\n"
      "# HELP dseek_epoch Current world epoch (a new one at every change of membership).\n"
      "# TYPE dseek_epoch gauge\n"
      "dseek_epoch{node=\"1\",run=\"r\"} 2\n"
      "# HELP dseek_last_step_timestamp_seconds Unix time at which the newest step was "
      "logged.\n"
      "# TYPE dseek_last_step_timestamp_seconds gauge\n"
      "dseek_last_step_timestamp_seconds{node=\"1\",run=\"r\"} T\n"
      "# HELP dseek_training_finished 1 once the node's training ended (done or stopped), "
      "else 0.\n"
      "# TYPE dseek_training_finished gauge\n"
      "dseek_training_finished{node=\"1\",run=\"r\"} 0\n";
  const double before = std::chrono::duration<double>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
  std::string text = metrics::render_prometheus(folded.snapshot(), {{"node", "1"}, {"run", "r"}});
  // The step's timestamp is the time it was observed (this test's last few seconds).
  const std::string stamp = "dseek_last_step_timestamp_seconds{node=\"1\",run=\"r\"} ";
  const size_t at = text.find(stamp);
  REQUIRE(at != std::string::npos);
  const size_t value_at = at + stamp.size(), end = text.find('\n', value_at);
  const double stamped = std::strtod(text.c_str() + value_at, nullptr);
  CHECK(stamped <= before);
  CHECK(stamped > before - 60);
  text = text.substr(0, value_at) + "T" + text.substr(end);
  CHECK(text == expected);
  folded.observe("train_done", R"({"step":2})");
  CHECK_THAT(metrics::render_prometheus(folded.snapshot(), {}),
             Contains("\ndseek_training_finished 1\n"));
}

TEST_CASE("prometheus text: counters before any event, no gauge without a value",
          "[metrics][prometheus]") {
  metrics::TrainingMetrics fresh(100);
  const auto samples = fresh.snapshot();
  REQUIRE(samples.size() == 11);  // the counters only
  for (const auto& sample : samples) {
    CHECK(sample.type == metrics::MetricType::counter);
    CHECK(sample.value == 0);
  }
  // A non-finite loss is written as null; its gauge says NaN.
  fresh.observe("step", R"({"step":1,"loss":null})");
  const std::string text = metrics::render_prometheus(fresh.snapshot(), {});
  CHECK_THAT(text, Contains("\ndseek_loss NaN\n"));
  CHECK_THAT(text, Contains("\ndseek_tokens_total 100\n"));
}

TEST_CASE("prometheus text: label values and help are escaped, values round-trip",
          "[metrics][prometheus]") {
  const std::vector<metrics::MetricSample> samples = {
      {"dseek_x_total", metrics::MetricType::counter, "A \\ help\nline.", 3},
      {"dseek_y", metrics::MetricType::gauge, "Y.", 0.1},
  };
  CHECK(metrics::render_prometheus(samples, {{"node", "0"}, {"run", "a\"b\\c\nd"}}) ==
        "# HELP dseek_x_total A \\\\ help\\nline.\n"
        "# TYPE dseek_x_total counter\n"
        "dseek_x_total{node=\"0\",run=\"a\\\"b\\\\c\\nd\"} 3\n"
        "# HELP dseek_y Y.\n"
        "# TYPE dseek_y gauge\n"
        "dseek_y{node=\"0\",run=\"a\\\"b\\\\c\\nd\"} 0.1\n");
  CHECK(metrics::format_sample_value(1.0 / 3.0) == "0.3333333333333333");
  CHECK(std::stod(metrics::format_sample_value(1.0 / 3.0)) == 1.0 / 3.0);
  CHECK(metrics::format_sample_value(12345678901234.0) == "12345678901234");
  CHECK(metrics::format_sample_value(0.0006) == "0.0006");
  CHECK(metrics::format_sample_value(2e21) == "2e+21");
  CHECK(metrics::format_sample_value(std::nan("")) == "NaN");
  CHECK(metrics::format_sample_value(INFINITY) == "+Inf");
  CHECK(metrics::format_sample_value(-INFINITY) == "-Inf");
}

TEST_CASE("metrics http: the answers to GET /metrics and everything else",
          "[metrics][prometheus]") {
  const metrics::MetricsHttpServer::Render render = [] { return std::string("m 1\n"); };
  auto answer = [&](const std::string& head) {
    return testing::parse_http_reply(metrics::answer_http_request(head, render));
  };
  for (const char* version : {"HTTP/1.0", "HTTP/1.1"}) {
    const auto ok = answer(std::string("GET /metrics ") + version + "\r\nHost: x\r\n\r\n");
    CHECK(ok.status == 200);
    CHECK_THAT(ok.headers, Contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"));
    CHECK_THAT(ok.headers, Contains("Content-Length: 4"));
    CHECK_THAT(ok.headers, Contains("Connection: close"));
    CHECK(ok.body == "m 1\n");
  }
  CHECK(answer("GET /metrics?name[]=x HTTP/1.1\r\n\r\n").status == 200);
  const auto head = answer("HEAD /metrics HTTP/1.1\r\n\r\n");
  CHECK(head.status == 200);
  CHECK(head.body.empty());
  CHECK(answer("GET / HTTP/1.1\r\n\r\n").status == 404);
  CHECK(answer("GET /metricsx HTTP/1.1\r\n\r\n").status == 404);
  const auto post = answer("POST /metrics HTTP/1.1\r\n\r\n");
  CHECK(post.status == 405);
  CHECK_THAT(post.headers, Contains("Allow: GET, HEAD"));
  for (const char* bad : {"", "\r\n\r\n", "GET /metrics\r\n\r\n", "GET metrics HTTP/1.1\r\n\r\n",
                          "GET /metrics HTTP/2.0\r\n\r\n", "\x16\x03\x01\x02\x00\x01\x00"}) {
    INFO(bad);
    CHECK(answer(bad).status == 400);
  }
  const auto failing = testing::parse_http_reply(metrics::answer_http_request(
      "GET /metrics HTTP/1.1\r\n\r\n", [] () -> std::string { throw std::runtime_error("x"); }));
  CHECK(failing.status == 500);
}

namespace {

// A socket listening on 127.0.0.1 at a free port, as another program would hold it.
struct TakenPort {
  int fd = -1;
  int port = 0;
  TakenPort() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(fd, 1) == 0);
    socklen_t length = sizeof address;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    port = ntohs(address.sin_port);
  }
  ~TakenPort() { ::close(fd); }
};

// A connected socket that sends nothing: a stalled client.
int connect_silently(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  return fd;
}

}  // namespace

TEST_CASE("metrics http: a server on loopback answers, survives bad clients, stops at once",
          "[metrics][prometheus]") {
  int scrapes = 0;
  auto server = std::make_unique<metrics::MetricsHttpServer>("127.0.0.1", 0, [&scrapes] {
    return "dseek_scrapes " + std::to_string(++scrapes) + "\n";
  });
  const int port = server->port();
  REQUIRE(port > 0);
  auto ok = testing::http_get("127.0.0.1", port, "/metrics");
  CHECK(ok.status == 200);
  CHECK(ok.body == "dseek_scrapes 1\n");
  CHECK(testing::http_get("127.0.0.1", port, "/").status == 404);
  // Garbage, an oversized head, a client that closes at once: answered or dropped.
  const auto garbage = testing::http_exchange("127.0.0.1", port, "\x01\x02garbage\r\n\r\n", 10s);
  REQUIRE(garbage);
  CHECK(testing::parse_http_reply(*garbage).status == 400);
  const auto huge = testing::http_exchange(
      "127.0.0.1", port, "GET /" + std::string(20000, 'a') + " HTTP/1.1\r\n\r\n", 10s);
  REQUIRE(huge);
  CHECK(testing::parse_http_reply(*huge).status == 400);
  ::close(connect_silently(port));
  CHECK(testing::http_get("127.0.0.1", port, "/metrics").body == "dseek_scrapes 2\n");

  // A stalled client holds the one serving thread until it gives up on it, and does not
  // keep the server from stopping.
  const int stalled = connect_silently(port);
  const auto stop_start = std::chrono::steady_clock::now();
  server.reset();
  CHECK(std::chrono::steady_clock::now() - stop_start < 1s);
  ::close(stalled);
  CHECK_FALSE(testing::http_exchange("127.0.0.1", port, "GET /metrics HTTP/1.1\r\n\r\n", 2s));
}

// Issue 28, finding 7: connections were served one at a time, each up to its 5 s
// deadline: 20 slow clients held a scrape up for 89 s.
TEST_CASE("metrics http: a scrape is answered while 20 clients stall", "[metrics][prometheus]") {
  metrics::MetricsHttpServer server("127.0.0.1", 0, [] { return std::string("dseek_up 1\n"); });
  std::vector<int> stalled;
  for (int i = 0; i < 20; ++i) stalled.push_back(connect_silently(server.port()));
  // Half of them sent half a request.
  for (size_t i = 0; i < stalled.size(); i += 2)
    REQUIRE(::send(stalled[i], "GET /metr", 9, MSG_NOSIGNAL) == 9);
  const auto reply = testing::http_get("127.0.0.1", server.port(), "/metrics", 3s);
  CHECK(reply.status == 200);
  CHECK(reply.body == "dseek_up 1\n");
  for (int fd : stalled) ::close(fd);
}

TEST_CASE("metrics http: a port in use is an error that names the address",
          "[metrics][prometheus]") {
  TakenPort taken;
  try {
    metrics::MetricsHttpServer server("127.0.0.1", static_cast<uint16_t>(taken.port),
                                      [] { return std::string(); });
    FAIL("listened on a port in use");
  } catch (const std::runtime_error& error) {
    CHECK_THAT(error.what(), Contains("cannot listen on 127.0.0.1:" + std::to_string(taken.port) +
                                      ": Address already in use"));
  }
}

TEST_CASE("metrics endpoint: node K on port + K (or port), restarts rebind, the counters go on",
          "[metrics][prometheus]") {
  testing::ScratchDir run("prometheus-endpoint");
  TakenPort probe;  // a free port: released below, then ours at base + node 1
  const int base = probe.port - 1;
  ::close(probe.fd);
  probe.fd = -1;
  auto config = config::load_config_text(
      "", "x.toml",
      {"metrics.prometheus_port=" + std::to_string(base), "metrics.prometheus_host=\"127.0.0.1\"",
       "cluster.node_id=1", "cluster.nodes=2", "parallel.data=2", "train.batch_size=4",
       "model.context=8"});
  auto events = std::make_shared<metrics::EventLog>(run.path(), 1);
  auto endpoint = metrics::open_metrics_endpoint(config, run.path(), *events);
  REQUIRE(endpoint);
  CHECK(endpoint->port() == base + 1);
  // One node per pod (Kubernetes): every node on the port itself.
  auto per_pod = config;
  per_pod.metrics.prometheus_port_per_node = false;
  CHECK(metrics::MetricsEndpoint(per_pod, run.path(), *std::make_shared<metrics::EventLog>(
                                                          run.path(), 1)).port() == base);
  const uint64_t first = endpoint->open();
  events->emit_raw("step", R"({"step":1,"loss":2.5})");
  auto scraped = testing::http_get("127.0.0.1", base + 1, "/metrics");
  CHECK(scraped.status == 200);
  const std::string labels =
      "{node=\"1\",run=\"" + run.path().filename().string() + "\"}";  // the run dir's name
  CHECK_THAT(scraped.body, Contains("dseek_steps_total" + labels + " 1\n"));
  CHECK_THAT(scraped.body, Contains("dseek_tokens_total" + labels + " 32\n"));

  // The exporter's successor opens before its predecessor's exit closed: the old server
  // goes, the new one stays when the late close() arrives.
  const uint64_t second = endpoint->open();
  endpoint->close(first);
  events->emit_raw("step", R"({"step":2,"loss":2.25})");
  scraped = testing::http_get("127.0.0.1", base + 1, "/metrics");
  CHECK_THAT(scraped.body, Contains("dseek_steps_total" + labels + " 2\n"));
  CHECK_THAT(scraped.body, Contains("dseek_loss" + labels + " 2.25\n"));
  endpoint->close(second);
  CHECK(testing::http_get("127.0.0.1", base + 1, "/metrics", 2s).status == 0);

  TakenPort taken;
  auto busy = config::load_config_text(
      "", "x.toml", {"metrics.prometheus_port=" + std::to_string(taken.port),
                     "metrics.prometheus_host=\"127.0.0.1\""});
  auto busy_endpoint = metrics::open_metrics_endpoint(busy, run.path(), *events);
  try {
    busy_endpoint->open();
    FAIL("listened on a port in use");
  } catch (const std::runtime_error& error) {
    CHECK_THAT(error.what(), Contains("metrics.prometheus_port"));
    CHECK_THAT(error.what(), Contains("127.0.0.1:" + std::to_string(taken.port) +
                                      ": Address already in use"));
  }
  auto off = config::load_config_text("", "x.toml");
  CHECK(metrics::open_metrics_endpoint(off, run.path(), *events) == nullptr);
}
