// Prometheus's text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): what a node's /metrics
// endpoint answers. One family per sample: "# HELP", "# TYPE", then the sample with the
// endpoint's labels.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/metrics/training_metrics.hpp"

namespace dseek::metrics {

// The Content-Type of this format.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// `samples` in the exposition format, every sample with `labels` (names must be valid
// label names; values are escaped).
std::string render_prometheus(const std::vector<MetricSample>& samples,
                              const MetricLabels& labels);

// A label value as the format writes it between quotes: \ " and newline escaped.
std::string escape_label_value(std::string_view value);

// A sample value: the shortest text that reads back as the same double, in plain digits
// from 1e-4 to 1e15 (0.0006, 2097152), else in exponent form (2e+21); NaN, +Inf, -Inf.
std::string format_sample_value(double value);

}  // namespace dseek::metrics
