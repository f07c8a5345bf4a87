// Every node's trace from its events (runtime/metrics/node_trace.hpp): a step's span and
// its measured parts laid end to end from its start, checkpoints and recoveries before
// the event that reports them, the file rewritten every N steps and at the end; and the
// merge of several nodes' traces with the pipeline's (its pids moved past the nodes'); the
// spans measured inside a step (trace_spans.hpp), and the clock offset the merge adds.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "runtime/metrics/chrome_trace.hpp"
#include "runtime/metrics/node_trace.hpp"
#include "runtime/metrics/trace_spans.hpp"
#include "support/test_paths.hpp"

using namespace dseek;
using Catch::Matchers::Contains;

namespace {

std::string slurp(const std::filesystem::path& file) {
  std::ifstream in(file);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("node trace: spans of steps, checkpoints and recoveries, flushed every N steps",
          "[metrics][trace]") {
  testing::ScratchDir dir("node-trace");
  std::filesystem::create_directories(dir / "node-2");
  const auto file = dir / "node-2" / "trace.json";
  metrics::NodeTrace trace(file, 2, 2);
  trace.observe("step", R"({"step":7,"step_ms":10,"data_wait_ms":1,"compute_ms":6,"comm_ms":2})",
                1e9);
  CHECK_FALSE(std::filesystem::exists(file));  // not yet: every 2 steps
  const auto spans = trace.spans();
  REQUIRE(spans.size() == 4);
  CHECK(spans[0].name == "step 7");
  CHECK(spans[0].start_us == 1e9 - 10000);
  CHECK(spans[0].duration_us == 10000);
  CHECK(spans[1].name == "data wait 7");
  CHECK(spans[1].start_us == 1e9 - 10000);
  CHECK(spans[2].name == "compute 7");
  CHECK(spans[2].start_us == 1e9 - 9000);
  CHECK(spans[2].duration_us == 6000);
  CHECK(spans[3].name == "exposed comm 7");
  CHECK(spans[3].start_us == 1e9 - 3000);
  for (const auto& span : spans) CHECK(span.process == 2);

  trace.observe("checkpoint_committed", R"({"step":7,"snapshot_ms":3,"write_ms":5})", 2e9);
  trace.observe("recovered", R"({"from_step":7,"recovery_ms":4})", 3e9);
  trace.observe("node_lost", R"({"lost_node":1})", 3e9);
  trace.observe("step", R"({"step":8,"step_ms":10,"compute_ms":10})", 4e9);
  const auto all = trace.spans();
  REQUIRE(all.size() == 10);
  CHECK(all[4].name == "checkpoint write 7");
  CHECK(all[4].start_us == 2e9 - 5000);
  CHECK(all[5].name == "checkpoint snapshot 7");
  CHECK(all[5].start_us == 2e9 - 8000);
  CHECK(all[6].name == "recovery");
  CHECK(all[6].duration_us == 4000);
  CHECK(all[7].name == "node_lost");
  const std::string text = slurp(file);  // written at the second step
  CHECK_THAT(text, Contains("\"name\": \"node 2\""));
  CHECK_THAT(text, Contains("\"name\": \"compute 8\""));
}

TEST_CASE("node trace: merge puts every node and the pipeline on one timeline",
          "[metrics][trace]") {
  testing::ScratchDir dir("trace-merge");
  CHECK_THROWS_WITH(metrics::merge_traces(dir.path(), dir / "m.json"), Contains("no node-*/trace.json"));
  for (int node = 0; node < 2; ++node) {
    std::filesystem::create_directories(dir / ("node-" + std::to_string(node)));
    metrics::NodeTrace trace(dir / ("node-" + std::to_string(node)) / "trace.json", node);
    trace.observe("step", R"({"step":1,"step_ms":5,"compute_ms":5})", 1e9 + node);
  }
  metrics::write_chrome_trace(dir / "trace.json", {{1, 0, "forward mb 0", "forward", 5.0, 2.0}},
                              {"stage 0", "stage 1"});
  const auto merged = metrics::merge_traces(dir.path(), dir / "m.json");
  CHECK(merged.nodes == 2);
  CHECK(merged.pipeline);
  CHECK(merged.spans == 5);  // 2 per node, 1 of the pipeline
  const std::string text = slurp(dir / "m.json");
  CHECK_THAT(text, Contains("\"name\": \"node 0\""));
  CHECK_THAT(text, Contains("\"name\": \"node 1\""));
  CHECK_THAT(text, Contains("\"pid\": 1001, \"tid\": 0, \"ts\": 5.000"));
  CHECK_THAT(text, Contains("\"pid\": 1000, \"tid\": 0, \"args\": {\"name\": \"stage 0\"}"));

  std::ofstream(dir / "node-1" / "trace.json") << "garbage\n";
  CHECK_THROWS_WITH(metrics::merge_traces(dir.path(), dir / "m.json"),
                    Contains("node-1/trace.json:1: not a trace"));
}

TEST_CASE("node trace: the spans measured inside a step, and the clock offset the merge adds",
          "[metrics][trace]") {
  testing::ScratchDir dir("trace-offset");
  // A span goes to its recorder's listener, on its lane, on the recorder's trace clock;
  // another recorder (another node in the same process) does not see it.
  std::vector<metrics::TraceSpan> seen, other_seen;
  metrics::TraceRecorder recorder(0), other(1);
  recorder.set_listener(std::make_shared<const metrics::SpanListener>(
      [&seen](metrics::TraceSpan span) { seen.push_back(std::move(span)); }));
  other.set_listener(std::make_shared<const metrics::SpanListener>(
      [&other_seen](metrics::TraceSpan span) { other_seen.push_back(std::move(span)); }));
  const double before = recorder.now_us();
  recorder.record("forward", "forward", metrics::TraceLane::compute, before, recorder.now_us() - before);
  recorder.record("all_reduce", "comm", metrics::TraceLane::comm, before, 7, "\"bytes_sent\": 64");
  CHECK(recorder.spans_wanted());
  recorder.set_listener(nullptr);
  CHECK_FALSE(recorder.spans_wanted());
  recorder.record("backward", "backward", metrics::TraceLane::compute, before, 1);  // nobody listens
  CHECK(other_seen.empty());
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].name == "forward");
  CHECK(seen[0].thread == static_cast<int64_t>(metrics::TraceLane::compute));
  CHECK(seen[0].start_us >= before);
  CHECK(seen[0].start_us + seen[0].duration_us <= recorder.now_us());
  CHECK(seen[1].thread == static_cast<int64_t>(metrics::TraceLane::comm));

  // Node 1 measured its clock 5 s ahead of the coordinator's: the merge moves its spans
  // (and only its) by the offset, exactly.
  for (int node = 0; node < 2; ++node) {
    std::filesystem::create_directories(dir / ("node-" + std::to_string(node)));
    metrics::NodeTrace trace(dir / ("node-" + std::to_string(node)) / "trace.json", node);
    if (node == 1)
      trace.observe("clock_offset", R"({"offset_us":-5000000,"rtt_us":80,"rounds":8})", 1e9);
    trace.add_span(seen[1]);
    trace.observe("step", R"({"step":1,"step_ms":5,"compute_ms":5})", 2e9 + 5e6 * node);
  }
  const std::string node1 = slurp(dir / "node-1" / "trace.json");
  CHECK_THAT(node1, Contains("\"name\": \"clock_offset\", \"pid\": 1, \"tid\": 0, \"args\": "
                             "{\"offset_us\": -5000000.000000, \"rtt_us\": 80.000000}"));
  CHECK_THAT(node1, Contains("\"args\": {\"bytes_sent\": 64}"));
  const auto merged = metrics::merge_traces(dir.path(), dir / "m.json");
  CHECK(merged.nodes == 2);
  CHECK(merged.aligned == 1);
  const std::string text = slurp(dir / "m.json");
  // Both steps end at 2e9 us on the coordinator's clock.
  CHECK_THAT(text, Contains("\"name\": \"step 1\", \"cat\": \"step\", \"pid\": 0, \"tid\": 0, "
                            "\"ts\": 1999995000.000"));
  CHECK_THAT(text, Contains("\"name\": \"step 1\", \"cat\": \"step\", \"pid\": 1, \"tid\": 0, "
                            "\"ts\": 1999995000.000"));
}

TEST_CASE("node trace: DSEEK_TEST_TRACE_CLOCK_SHIFT moves the named node's clock only",
          "[metrics][trace]") {
  ::setenv("DSEEK_TEST_TRACE_CLOCK_SHIFT", "3:2000000", 1);
  const metrics::TraceRecorder node2(2), node3(3);  // node 2: another node, no shift
  const double unshifted = node2.now_us();
  const double shifted = node3.now_us();
  CHECK(shifted - unshifted >= 2e6);
  CHECK(shifted - unshifted < 2e6 + 1e6);  // the two reads are well within a second
  // Node 2's clock is the system clock still (node 3's shift is its own).
  CHECK(std::abs(node2.now_us() - metrics::system_clock_us()) < 1e6);
  ::setenv("DSEEK_TEST_TRACE_CLOCK_SHIFT", "three", 1);
  CHECK_THROWS_WITH(metrics::TraceRecorder(3),
                    Contains("DSEEK_TEST_TRACE_CLOCK_SHIFT=three: not NODE:MICROSECONDS"));
  ::unsetenv("DSEEK_TEST_TRACE_CLOCK_SHIFT");
}
