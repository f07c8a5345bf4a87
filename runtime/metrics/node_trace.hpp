// A Chrome/Perfetto trace of every node, in every layout, from the node's own events:
// RUN_DIR/node-<id>/trace.json, one process per node (pid = node id), with per step a
// "step N" span and, on a second lane, its measured parts (data wait, offload wait,
// compute, exposed communication: the step event's durations, laid end to end from the
// step's start in that order), and the checkpoint snapshot and write, the recoveries
// and the faults, node losses and epochs as short marks; and the spans measured inside
// the step (trace_spans.hpp) in every layout: each forward and backward on the compute
// lane, each collective and point-to-point operation of the data plane with its bytes on
// the comm lane. Timestamps are microseconds of the node's trace clock (Unix time,
// trace_spans.hpp); the "clock_offset" event (the offset to the coordinator's clock
// measured at join, actors/cluster/node_agent.hpp) is kept as a "clock_offset" metadata
// event, and `dseek trace merge` adds it to every timestamp of the node, so the spans of
// all nodes line up on the coordinator's clock (merge_traces). The pipeline's own stage
// trace (forward, backward, send, recv, idle per micro-batch) stays in RUN_DIR/trace.json,
// written on the coordinator's clock (TraceRecorder::coordinator_offset_us, which this
// trace sets).
// At most kMaxSpans spans are kept (later ones are counted in the "spans_dropped"
// metadata). The file is rewritten every `flush_every` steps and when training ends, so a
// killed node leaves the trace up to its last flush.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/metrics/chrome_trace.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/trace_spans.hpp"

namespace dseek::metrics {

class NodeTrace {
 public:
  NodeTrace(std::filesystem::path file, int64_t node_id, int64_t flush_every = 20);
  ~NodeTrace();  // writes what it has
  NodeTrace(const NodeTrace&) = delete;
  NodeTrace& operator=(const NodeTrace&) = delete;

  static constexpr size_t kMaxSpans = 200000;  // about 40 MB of trace.json

  // EventLog's listener: `now_us` is the event's time (trace clock microseconds).
  void observe(std::string_view event, std::string_view fields, double now_us);
  // A span measured inside a step (trace_spans.hpp's listener).
  void add_span(TraceSpan span);
  void flush();
  std::vector<TraceSpan> spans() const;

 private:
  void add(std::string name, std::string category, TraceLane lane, double start_us,
           double duration_us);
  void keep(TraceSpan span);  // under mutex_
  std::filesystem::path file_;
  int64_t node_;
  int64_t flush_every_;
  int64_t steps_since_flush_ = 0;
  mutable std::mutex mutex_;
  std::vector<TraceSpan> spans_;
  uint64_t dropped_ = 0;
  bool has_offset_ = false;
  double offset_us_ = 0, offset_rtt_us_ = 0;  // the latest clock_offset event's
};

// Has `events` feed a NodeTrace writing RUN_DIR/node-<node_id>/trace.json, and returns
// node `node_id`'s TraceRecorder, whose spans go to that trace: what the node hands to
// whatever measures spans (its trainer, its data plane, its clock-offset measurement).
std::shared_ptr<TraceRecorder> attach_node_trace(EventLog& events,
                                                 const std::filesystem::path& run_dir,
                                                 int64_t node_id);

struct MergedTrace {
  size_t nodes = 0;            // node traces merged
  size_t aligned = 0;          // of them, moved by their measured clock offset
  size_t spans = 0;            // their spans, plus the pipeline's
  bool pipeline = false;       // RUN_DIR/trace.json was merged too (pids 1000 + stage)
};
// Writes one trace of every node-*/trace.json of `run_dir` (and the pipeline's stage
// trace, RUN_DIR/trace.json, if there is one) to `output`, each node's timestamps plus
// its clock_offset (so on the coordinator's clock). Throws std::runtime_error
// naming the directory when it has no node trace, and naming a file that is not a trace.
MergedTrace merge_traces(const std::filesystem::path& run_dir, const std::filesystem::path& output);

}  // namespace dseek::metrics
