// A Chrome/Perfetto trace of every node, in every layout, from the node's own events:
// RUN_DIR/node-<id>/trace.json, one process per node (pid = node id), with per step a
// "step N" span and, on a second lane, its measured parts (data wait, offload wait,
// compute, exposed communication: the step event's durations, laid end to end from the
// step's start in that order), and the checkpoint snapshot and write, the recoveries
// and the faults, node losses and epochs as short marks. Timestamps are Unix
// microseconds, as the pipeline's stage trace (chrome_trace.hpp), so the nodes of one
// host line up; `dseek trace merge` puts them on one timeline (merge_traces). The
// finer spans of the pipeline (forward, backward, send, recv per micro-batch) stay in
// RUN_DIR/trace.json. The file is rewritten every `flush_every` steps and when training
// ends, so a killed node leaves the trace up to its last flush.
#pragma once

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/metrics/chrome_trace.hpp"
#include "runtime/metrics/event_log.hpp"

namespace dseek::metrics {

class NodeTrace {
 public:
  NodeTrace(std::filesystem::path file, int64_t node_id, int64_t flush_every = 20);
  ~NodeTrace();  // writes what it has
  NodeTrace(const NodeTrace&) = delete;
  NodeTrace& operator=(const NodeTrace&) = delete;

  // EventLog's listener: `now_us` is the event's time (Unix microseconds).
  void observe(std::string_view event, std::string_view fields, double now_us);
  void flush();
  std::vector<TraceSpan> spans() const;

 private:
  void add(std::string name, std::string category, int64_t lane, double start_us, double duration_us);
  std::filesystem::path file_;
  int64_t node_;
  int64_t flush_every_;
  int64_t steps_since_flush_ = 0;
  mutable std::mutex mutex_;
  std::vector<TraceSpan> spans_;
};

// Has `events` feed a NodeTrace writing RUN_DIR/node-<node_id>/trace.json.
void attach_node_trace(EventLog& events, const std::filesystem::path& run_dir, int64_t node_id);

struct MergedTrace {
  size_t nodes = 0;            // node traces merged
  size_t spans = 0;            // their spans, plus the pipeline's
  bool pipeline = false;       // RUN_DIR/trace.json was merged too (pids 1000 + stage)
};
// Writes one trace of every node-*/trace.json of `run_dir` (and the pipeline's stage
// trace, RUN_DIR/trace.json, if there is one) to `output`. Throws std::runtime_error
// naming the directory when it has no node trace, and naming a file that is not a trace.
MergedTrace merge_traces(const std::filesystem::path& run_dir, const std::filesystem::path& output);

}  // namespace dseek::metrics
