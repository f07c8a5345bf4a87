// The spans measured inside a step, wherever they happen (the trainers' forward and
// backward, every collective of the data plane: dist/trace_collectives.hpp), and the
// clock every node trace is written in. A node's trace (node_trace.hpp) listens here;
// with no listener a span costs one atomic load.
//
// The trace clock is the system clock in Unix microseconds. For the tests of `dseek
// trace merge` it can be shifted on one node: DSEEK_TEST_TRACE_CLOCK_SHIFT="NODE:US"
// moves node NODE's trace clock by US microseconds (the clock offsets measured at join,
// actors/cluster/node_agent.hpp, must then find -US). Test-only: nothing else reads it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runtime/metrics/chrome_trace.hpp"

namespace dseek::metrics {

// Unix microseconds of this process's trace clock.
double trace_clock_us();
// This process is node `node_id`: applies DSEEK_TEST_TRACE_CLOCK_SHIFT when it names it.
// Throws std::runtime_error naming the variable when its value is not "NODE:US".
void set_trace_clock_node(int64_t node_id);

// The offset of this process's trace clock to the coordinator's (microseconds to add),
// as last measured at join: the node's trace (node_trace.hpp) sets it from the
// clock_offset event; 0 until then, and on a node alone. The pipeline's stage trace
// (RUN_DIR/trace.json) is written on the coordinator's clock with it.
void set_coordinator_clock_offset(double offset_us);
double coordinator_clock_offset_us();

// Lanes ("tid") of a node trace.
enum class TraceLane : int64_t { steps = 0, step_parts = 1, checkpoints = 2, events = 3,
                                 compute = 4, comm = 5 };

// Where spans go; null stops recording. The listener runs on the thread that measured
// the span (training, data-plane progress) and must be thread-safe.
using SpanListener = std::function<void(TraceSpan span)>;
void set_span_listener(std::shared_ptr<const SpanListener> listener);
bool spans_wanted();
// A span on `lane` of this node's trace; `args` is a JSON object's members ("" or
// "\"bytes\": 12") shown with it.
void record_span(std::string name, std::string category, TraceLane lane, double start_us,
                 double duration_us, std::string args = {});

// The span of a scope: from construction to destruction, on the compute lane.
class ScopedSpan {
 public:
  ScopedSpan(const char* name, const char* category);
  ~ScopedSpan();
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  const char* name_;
  const char* category_;
  double start_us_ = -1;  // -1: nobody listened when it started
};

}  // namespace dseek::metrics
