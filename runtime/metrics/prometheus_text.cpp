// Implementation of prometheus_text.hpp.
#include "runtime/metrics/prometheus_text.hpp"

#include <charconv>
#include <cmath>

namespace dseek::metrics {

namespace {

// HELP text escapes only \ and newline (the format's rule for docstrings).
std::string escape_help(std::string_view help) {
  std::string out;
  for (const char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string label_text(const MetricLabels& labels) {
  if (labels.empty()) return "";
  std::string text = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) text += ',';
    text += labels[i].first;
    text += "=\"";
    text += escape_label_value(labels[i].second);
    text += '"';
  }
  text += '}';
  return text;
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_sample_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Plain digits where a person reads them easily (counts of bytes and tokens, rates,
  // learning rates), else whatever is shortest; both read back as the same double.
  const double magnitude = std::fabs(value);
  const bool plain = value == 0 || (magnitude >= 1e-4 && magnitude < 1e15);
  char text[400];  // fixed notation of up to 1e15 with 17 significant digits fits
  const auto result =
      plain ? std::to_chars(text, text + sizeof text, value, std::chars_format::fixed)
            : std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

std::string render_prometheus(const std::vector<MetricSample>& samples,
                              const MetricLabels& labels) {
  const std::string label_set = label_text(labels);
  std::string text;
  for (const auto& sample : samples) {
    text += "# HELP ";
    text += sample.name;
    text += ' ';
    text += escape_help(sample.help);
    text += "\n# TYPE ";
    text += sample.name;
    text += sample.type == MetricType::counter ? " counter\n" : " gauge\n";
    text += sample.name;
    text += label_set;
    text += ' ';
    text += format_sample_value(sample.value);
    text += '\n';
  }
  return text;
}

}  // namespace dseek::metrics
