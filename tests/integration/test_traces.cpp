// Every node's trace.json in every layout (runtime/metrics/node_trace.hpp): a 2-node
// data-parallel, pipeline and tensor-parallel `dseek launch` job each write forward,
// backward and all-reduce spans (the collectives with their bytes) on every node, and
// the data-parallel step events carry the prefetch queue depth; and the clock offsets measured at join:
// with node 1's trace clock shifted by 5 s (DSEEK_TEST_TRACE_CLOCK_SHIFT), the offset it
// measures is -5 s within half its round trip, `dseek trace merge` lines the two
// nodes' steps up again, and a pipeline's stage trace (RUN_DIR/trace.json) is written on
// the coordinator's clock.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

// The trace's event lines (write_chrome_trace writes one event a line).
std::vector<std::string> trace_lines(const std::filesystem::path& file) {
  std::vector<std::string> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("{\"ph\"", 0) == 0) lines.push_back(line);
  return lines;
}

std::optional<double> member(const std::string& line, const std::string& key) {
  const auto at = line.find("\"" + key + "\": ");
  if (at == std::string::npos) return std::nullopt;
  return std::strtod(line.c_str() + at + key.size() + 4, nullptr);
}

// The spans named `name` (of process `pid`, or any when -1).
std::vector<std::string> spans_named(const std::vector<std::string>& lines, const std::string& name,
                                     int pid = -1) {
  std::vector<std::string> out;
  for (const auto& line : lines) {
    if (line.find("\"ph\": \"X\"") == std::string::npos) continue;
    if (line.find("\"name\": \"" + name + "\"") == std::string::npos) continue;
    if (pid >= 0 && member(line, "pid") != static_cast<double>(pid)) continue;
    out.push_back(line);
  }
  return out;
}

double span_end(const std::string& span) { return *member(span, "ts") + *member(span, "dur"); }

}  // namespace

TEST_CASE("traces: a data-parallel, a pipeline and a tensor-parallel job write forward, "
          "backward and all-reduce spans on every node",
          "[traces][launch]") {
  struct Layout {
    const char* name;
    std::vector<std::string> settings;
  };
  const std::vector<Layout> layouts = {
      {"data parallel", {}},
      {"pipeline", {"--set", "parallel.pipeline=2", "--set", "train.micro_batch_size=4"}},
      {"tensor parallel", {"--set", "parallel.tensor=2"}},
  };
  for (const Layout& layout : layouts) {
    INFO(layout.name);
    std::string slug = layout.name;
    for (char& c : slug) c = c == ' ' ? '-' : c;
    ScratchDir run("traces-" + slug);
    const auto launched = run_process(tiny_launch(run.path(), 2, 6, layout.settings), 300s, launch_env());
    INFO(launched.output);
    REQUIRE(launched.exit_code == 0);
    for (int node = 0; node < 2; ++node) {
      INFO("node " << node);
      const auto lines = trace_lines(run / ("node-" + std::to_string(node)) / "trace.json");
      const auto steps = spans_named(lines, "step 6");
      REQUIRE(steps.size() == 1);
      // At least one forward and one backward per step (micro-batches: more).
      CHECK(spans_named(lines, "forward").size() >= 6);
      CHECK(spans_named(lines, "backward").size() >= 6);
      // Every layout all-reduces (the gradients, the tensor group's activations, the
      // stop vote and the norm over the stages): with the bytes it moved.
      const auto reduces = spans_named(lines, "all_reduce");
      REQUIRE(!reduces.empty());
      double bytes = 0;
      for (const auto& span : reduces) bytes += member(span, "bytes_sent").value_or(0);
      CHECK(bytes > 0);
      CHECK_THAT(reduces.front(), Contains("\"op\": \"all_reduce("));
      // The last step's forward and backward lie between the ends of steps 5 and 6: the
      // same clock as the step events (whose time is when the step was logged, after the
      // step's own bookkeeping). Evaluation's forwards follow.
      const auto previous = spans_named(lines, "step 5");
      REQUIRE(previous.size() == 1);
      for (const char* name : {"forward", "backward"}) {
        INFO(name);
        int inside = 0;
        for (const auto& span : spans_named(lines, name))
          inside += *member(span, "ts") >= span_end(previous[0]) && span_end(span) <= span_end(steps[0]);
        CHECK(inside >= 1);
      }
      // The step events carry the prefetcher's queue depth (data.prefetch = 3 by default;
      // the data-parallel trainer prefetches, the stage trainer reads on demand).
      const auto step_events = node_events(run.path(), node, "step");
      REQUIRE(step_events.size() == 6);
      if (!layout.settings.empty()) continue;
      for (const auto& event : step_events) {
        const double depth = number_field(event, "prefetch_queue_depth");
        CHECK(depth >= 0);
        CHECK(depth <= 3);
      }
    }
  }
}

TEST_CASE("traces: clock offsets measured at join line up a node whose clock is 5 s off",
          "[traces][launch]") {
  ScratchDir run("traces-clock");
  constexpr double kShiftUs = 5e6;
  const auto launched = run_process(tiny_launch(run.path(), 2, 8), 300s,
                                    {launch_env()[0], "DSEEK_TEST_TRACE_CLOCK_SHIFT=1:5000000"});
  INFO(launched.output);
  REQUIRE(launched.exit_code == 0);
  // The offset to the coordinator's clock: -5 s on node 1, 0 on node 0 (the
  // coordinator's own), each within half the round trip of its best round (the
  // coordinator's answer lies between t0 and t3 of that round).
  const auto offsets1 = node_events(run.path(), 1, "clock_offset");
  const auto offsets0 = node_events(run.path(), 0, "clock_offset");
  REQUIRE(!offsets1.empty());
  REQUIRE(!offsets0.empty());
  const double offset1 = number_field(offsets1.back(), "offset_us");
  const double rtt1 = number_field(offsets1.back(), "rtt_us");
  INFO("node 1: offset " << offset1 << " us, round trip " << rtt1 << " us");
  CHECK(number_field(offsets1.back(), "rounds") == 8);
  CHECK(rtt1 > 0);
  CHECK(rtt1 < 100000);  // 100 ms: loopback, even on a loaded machine
  CHECK(std::abs(offset1 + kShiftUs) <= rtt1 / 2 + 1);
  const double offset0 = number_field(offsets0.back(), "offset_us");
  const double rtt0 = number_field(offsets0.back(), "rtt_us");
  INFO("node 0: offset " << offset0 << " us, round trip " << rtt0 << " us");
  CHECK(std::abs(offset0) <= rtt0 / 2 + 1);

  // Before the merge node 1's steps are 5 s late; after it, each data-parallel step ends
  // on both nodes together (the gradients' all-reduce ends it on both).
  const auto raw0 = trace_lines(run / "node-0" / "trace.json");
  const auto raw1 = trace_lines(run / "node-1" / "trace.json");
  const auto merged = run_process({bin("dseek"), "trace", "merge", run.path().string()}, 60s);
  INFO(merged.output);
  REQUIRE(merged.exit_code == 0);
  CHECK_THAT(merged.output, Contains("merged 2 node traces (2 moved by their measured clock offset)"));
  const auto timeline = trace_lines(run / "trace-merged.json");
  for (const char* step : {"step 4", "step 8"}) {
    INFO(step);
    const auto a = spans_named(raw0, step), b = spans_named(raw1, step);
    REQUIRE(a.size() == 1);
    REQUIRE(b.size() == 1);
    const double raw_gap = span_end(b[0]) - span_end(a[0]);
    const auto m0 = spans_named(timeline, step, 0), m1 = spans_named(timeline, step, 1);
    REQUIRE(m0.size() == 1);
    REQUIRE(m1.size() == 1);
    const double merged_gap = span_end(m1[0]) - span_end(m0[0]);
    INFO("gap before the merge " << raw_gap << " us, after " << merged_gap << " us");
    CHECK(std::abs(raw_gap - kShiftUs) < 1e6);
    CHECK(std::abs(merged_gap) < 5e5);  // within 0.5 s of each other, from 5 s apart
    // The merge moved node 1 by exactly its measured offset.
    CHECK(std::abs((span_end(m1[0]) - span_end(b[0])) - offset1) < 1);
  }
}

TEST_CASE("traces: the pipeline's stage trace is on the coordinator's clock when a stage's "
          "node is 5 s off",
          "[traces][launch]") {
  ScratchDir run("traces-pipeline-clock");
  const auto launched = run_process(
      tiny_launch(run.path(), 2, 4, {"--set", "parallel.pipeline=2", "--set", "train.micro_batch_size=4"}),
      300s, {launch_env()[0], "DSEEK_TEST_TRACE_CLOCK_SHIFT=1:5000000"});
  INFO(launched.output);
  REQUIRE(launched.exit_code == 0);
  // RUN_DIR/trace.json (pid = stage): stage 1 (node 1) runs a micro-batch's forward once
  // stage 0's forward of it has sent its activation, so on one clock it starts after
  // that forward ends (less half a round trip of the offset's error: within 1 ms here,
  // 5 ms allowed for a loaded machine) and not seconds later; on node 1's own clock it
  // would start 5 s late.
  const auto lines = trace_lines(run / "trace.json");
  const auto first_start = [&](int pid, const std::string& name) {
    double best = 1e300;
    for (const auto& span : spans_named(lines, name, pid)) best = std::min(best, *member(span, "ts"));
    return best;
  };
  const auto first_end = [&](int pid, const std::string& name) {
    double best = 1e300;
    for (const auto& span : spans_named(lines, name, pid)) best = std::min(best, span_end(span));
    return best;
  };
  for (const char* name : {"forward mb 0", "forward mb 1"}) {
    INFO(name);
    const double stage0_end = first_end(0, name), stage1_start = first_start(1, name);
    REQUIRE(stage0_end < 1e300);
    REQUIRE(stage1_start < 1e300);
    INFO("stage 0 ends " << stage0_end << ", stage 1 starts " << stage1_start);
    CHECK(stage1_start >= stage0_end - 5000);
    CHECK(stage1_start - stage0_end < 1e6);
  }
  // `dseek trace merge` keeps it there: node 1's own trace, moved by its offset, has its
  // first forward with stage 1's in the stage trace (pid 1001), not 5 s apart.
  const auto merged = run_process({bin("dseek"), "trace", "merge", run.path().string()}, 60s);
  INFO(merged.output);
  REQUIRE(merged.exit_code == 0);
  const auto timeline = trace_lines(run / "trace-merged.json");
  double node1 = 1e300, stage1 = 1e300;
  for (const auto& span : spans_named(timeline, "forward", 1)) node1 = std::min(node1, *member(span, "ts"));
  for (const auto& span : spans_named(timeline, "forward mb 0", 1001)) stage1 = std::min(stage1, *member(span, "ts"));
  REQUIRE(node1 < 1e300);
  REQUIRE(stage1 < 1e300);
  INFO("node 1's first forward " << node1 << ", stage 1's " << stage1);
  CHECK(std::abs(node1 - stage1) < 1e6);
}
