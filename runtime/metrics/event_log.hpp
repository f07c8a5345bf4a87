// Structured events of a node: RUN_DIR/node-<id>/events.jsonl, one JSON object a line
// with "ts" (Unix seconds), "node" and "event" first, then the event's fields. Tests,
// `dseek report` and people with jq read it; every line is flushed as it is written so a
// killed node leaves every event it emitted.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/util/json_line.hpp"

namespace dseek::metrics {

class EventLog {
 public:
  // Opens (appends to) run_dir/node-<node_id>/events.jsonl, creating the directories.
  EventLog(const std::filesystem::path& run_dir, int64_t node_id);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  void emit(std::string_view event, const util::JsonLine& fields = {});
  // The same with the fields already rendered as a JSON object ("{...}").
  void emit_raw(std::string_view event, const std::string& fields_json);
  const std::filesystem::path& path() const { return path_; }

  // Every event written from now on also goes to `listener`, one at a time and in the
  // file's order (the node's Prometheus metrics fold them: training_metrics.hpp; the
  // node's console lines on recovery: actors/node/embedded_node.cpp).
  using Listener = std::function<void(std::string_view event, std::string_view fields_json)>;
  void add_listener(Listener listener);

  // Runs on every event before it is written, and may append fields to its rendered
  // fields object (the step measures: step_measures.hpp). One at most; set it before
  // the events it should see.
  using Enricher = std::function<void(std::string_view event, std::string& fields_json)>;
  void set_enricher(Enricher enricher);

 private:
  std::filesystem::path path_;
  int64_t node_id_;
  std::FILE* file_ = nullptr;
  std::mutex mutex_;
  std::vector<Listener> listeners_;
  Enricher enricher_;
};

}  // namespace dseek::metrics
