// The spans measured inside a step, wherever they happen (the trainers' forward and
// backward, every collective of the data plane: dist/trace_collectives.hpp), and the
// clock every node trace is written in. Each node has its own TraceRecorder (made by
// its trace, node_trace.hpp, and handed to what measures): two nodes in one process
// keep apart. With no listener a span costs one atomic load.
//
// The trace clock is the system clock in Unix microseconds. For the tests of `dseek
// trace merge` it can be shifted on one node: DSEEK_TEST_TRACE_CLOCK_SHIFT="NODE:US"
// moves node NODE's trace clock by US microseconds (the clock offsets measured at join,
// actors/cluster/node_agent.hpp, must then find -US). Test-only: nothing else reads it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runtime/metrics/chrome_trace.hpp"

namespace dseek::metrics {

// Lanes ("tid") of a node trace.
enum class TraceLane : int64_t { steps = 0, step_parts = 1, checkpoints = 2, events = 3,
                                 compute = 4, comm = 5 };

// Where spans go. The listener runs on the thread that measured the span (training,
// data-plane progress) and must be thread-safe.
using SpanListener = std::function<void(TraceSpan span)>;

// Unix microseconds of the system clock (a trace clock of no node).
double system_clock_us();

class TraceRecorder {
 public:
  // The trace clock of node `node_id` (-1: of no node): the system clock, shifted where
  // DSEEK_TEST_TRACE_CLOCK_SHIFT names this node. Throws std::runtime_error naming the
  // variable when its value is not "NODE:US".
  explicit TraceRecorder(int64_t node_id = -1);
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  double now_us() const { return system_clock_us() + shift_us_; }

  // The offset of this node's trace clock to the coordinator's (microseconds to add), as
  // last measured at join: the node's trace sets it from the clock_offset event; 0 until
  // then, and on a node alone. The pipeline's stage trace (RUN_DIR/trace.json) is
  // written on the coordinator's clock with it.
  void set_coordinator_offset(double offset_us) {
    coordinator_offset_us_.store(offset_us, std::memory_order_relaxed);
  }
  double coordinator_offset_us() const {
    return coordinator_offset_us_.load(std::memory_order_relaxed);
  }

  // Null stops recording.
  void set_listener(std::shared_ptr<const SpanListener> listener) { listener_.store(std::move(listener)); }
  bool spans_wanted() const { return listener_.load(std::memory_order_relaxed) != nullptr; }
  // A span on `lane` of this node's trace; `args` is a JSON object's members ("" or
  // "\"bytes\": 12") shown with it.
  void record(std::string name, std::string category, TraceLane lane, double start_us,
              double duration_us, std::string args = {}) const;

 private:
  double shift_us_ = 0;
  std::atomic<double> coordinator_offset_us_{0.0};
  std::atomic<std::shared_ptr<const SpanListener>> listener_;
};

// Now on `trace`'s clock; the system clock without one (null).
inline double trace_now_us(const TraceRecorder* trace) {
  return trace != nullptr ? trace->now_us() : system_clock_us();
}

}  // namespace dseek::metrics
