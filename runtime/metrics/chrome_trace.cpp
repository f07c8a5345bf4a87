// Implementation of chrome_trace.hpp.
#include "runtime/metrics/chrome_trace.hpp"

#include <cstdio>
#include <stdexcept>

#include "runtime/util/json_line.hpp"


namespace dseek::metrics {

namespace {
std::string number(double value) {
  char text[40];
  std::snprintf(text, sizeof text, "%.3f", value);
  return text;
}
}  // namespace

void write_chrome_trace(const std::filesystem::path& path, const std::vector<TraceSpan>& spans,
                        const std::vector<std::string>& process_names,
                        const std::vector<std::string>& metadata) {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  auto separate = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (size_t pid = 0; pid < process_names.size(); ++pid) {
    if (process_names[pid].empty()) continue;  // a pid without a process here
    separate();
    out += "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " + std::to_string(pid) +
           ", \"tid\": 0, \"args\": {\"name\": " + util::json_quote(process_names[pid]) + "}}";
  }
  for (const std::string& line : metadata) {
    separate();
    out += line;
  }
  for (const TraceSpan& span : spans) {
    separate();
    out += "{\"ph\": \"X\", \"name\": " + util::json_quote(span.name) +
           ", \"cat\": " + util::json_quote(span.category) + ", \"pid\": " +
           std::to_string(span.process) + ", \"tid\": " + std::to_string(span.thread) +
           ", \"ts\": " + number(span.start_us) + ", \"dur\": " + number(span.duration_us);
    if (!span.args.empty()) out += ", \"args\": {" + span.args + "}";
    out += "}";
  }
  out += "\n]}\n";
  // Whole to a temporary name, then renamed: a reader (or a crash) never sees half a file.
  const std::string temporary = path.string() + ".tmp";
  std::FILE* file = std::fopen(temporary.c_str(), "w");
  if (file == nullptr) throw std::runtime_error("cannot write the trace " + path.string());
  const bool ok = std::fwrite(out.data(), 1, out.size(), file) == out.size();
  if (std::fclose(file) != 0 || !ok || std::rename(temporary.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot write the trace " + path.string());
}

}  // namespace dseek::metrics
