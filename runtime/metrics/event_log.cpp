// Implementation of event_log.hpp.
#include "runtime/metrics/event_log.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>

namespace dseek::metrics {

EventLog::EventLog(const std::filesystem::path& run_dir, int64_t node_id)
    : path_(run_dir / ("node-" + std::to_string(node_id)) / "events.jsonl"), node_id_(node_id) {
  std::error_code error;
  std::filesystem::create_directories(path_.parent_path(), error);
  if (error)
    throw std::runtime_error("cannot create " + path_.parent_path().string() + ": " +
                             error.message());
  file_ = std::fopen(path_.c_str(), "a");
  if (file_ == nullptr)
    throw std::runtime_error("cannot open " + path_.string() + ": " + std::strerror(errno));
}

EventLog::~EventLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void EventLog::emit(std::string_view event, const util::JsonLine& fields) {
  emit_raw(event, fields.str());
}

void EventLog::emit_raw(std::string_view event, const std::string& fields) {
  Enricher enricher;
  {
    std::lock_guard lock(mutex_);
    enricher = enricher_;
  }
  std::string rest = fields;
  if (enricher) enricher(event, rest);
  const double now = std::chrono::duration<double>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  util::JsonLine head;
  head.add("ts", now).add("node", node_id_).add("event", event);
  std::string line = head.str();
  if (rest.size() > 2) {  // not "{}": splice the fields into the same object
    line.pop_back();
    line += ',';
    line.append(rest, 1, std::string::npos);
  }
  line += '\n';
  std::lock_guard lock(mutex_);
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
  // Under the lock: whoever reads the listener's state never sees an event the file
  // does not have yet.
  for (const auto& listener : listeners_) listener(event, rest);
}

void EventLog::set_enricher(Enricher enricher) {
  std::lock_guard lock(mutex_);
  enricher_ = std::move(enricher);
}

void EventLog::add_listener(Listener listener) {
  std::lock_guard lock(mutex_);
  listeners_.push_back(std::move(listener));
}

}  // namespace dseek::metrics
