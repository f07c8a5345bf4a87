// Implementation of html_report.hpp. The charts are drawn here as SVG (no library: a
// line chart, a stacked bar per node and a timeline are a few loops), so that the page
// needs nothing but itself; its script only shows the value under the pointer.
#include "runtime/metrics/html_report.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <vector>

#include "runtime/util/json_fields.hpp"

namespace dseek::metrics {

namespace {


std::string escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Exact (round-trips to the same double); "null" for a non-finite value, as events.jsonl.
std::string exact(double value) {
  if (!std::isfinite(value)) return "null";
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

// A short human form: 3 significant digits with k/M/G/T.
std::string human(double value) {
  if (!std::isfinite(value)) return "n/a";
  const char* units[] = {"", "k", "M", "G", "T", "P"};
  int unit = 0;
  double v = value;
  while (std::fabs(v) >= 1000 && unit < 5) {
    v /= 1000;
    ++unit;
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.3g%s", v, units[unit]);
  return text;
}

std::string percent(double ratio) { return std::isfinite(ratio) ? fixed(100 * ratio, 1) + "%" : "n/a"; }

std::optional<double> median(std::vector<double> values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }),
               values.end());
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::vector<double> field_of(const NodeRecord& node, const std::string& key) {
  std::vector<double> out;
  for (const auto& step : node.steps)
    if (const auto value = step.get(key)) out.push_back(*value);
  return out;
}

std::optional<double> median_over_nodes(const RunRecord& run, const std::string& key) {
  std::vector<double> all;
  for (const auto& node : run.nodes) {
    const auto values = field_of(node, key);
    all.insert(all.end(), values.begin(), values.end());
  }
  return median(all);
}

const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
const char* color_of(size_t i) { return kPalette[i % (sizeof kPalette / sizeof *kPalette)]; }

struct Series {
  std::string label;
  int64_t node = 0;
  std::string field;  // the event field plotted
  std::vector<double> x, y;
  bool dashed = false;
};

// A line chart of `series` over x (steps), with axes and a legend.
std::string line_chart(const std::string& id, const std::string& title, const std::string& unit,
                       const std::vector<Series>& series) {
  constexpr double W = 760, H = 260, L = 64, R = 170, T = 28, B = 36;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : series)
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y[i]);
      y1 = std::max(y1, s.y[i]);
    }
  std::string out = "<figure class=\"chart\" id=\"" + id + "\"><svg class=\"plot\" viewBox=\"0 0 " +
                    fixed(W, 0) + " " + fixed(H, 0) + "\" width=\"" + fixed(W, 0) +
                    "\" height=\"" + fixed(H, 0) + "\" data-chart=\"" + id + "\">";
  out += "<text x=\"" + fixed(L, 0) + "\" y=\"18\" class=\"title\">" + escape(title) + "</text>";
  if (!std::isfinite(x0)) {
    out += "<text x=\"" + fixed(W / 2, 0) + "\" y=\"" + fixed(H / 2, 0) +
           "\" class=\"empty\">no data in the events</text></svg></figure>";
    return out;
  }
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) {
    y0 -= std::fabs(y0) * 0.05 + 1e-12;
    y1 += std::fabs(y1) * 0.05 + 1e-12;
  }
  const auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  const auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  out += "<g class=\"axis\"><line x1=\"" + fixed(L, 0) + "\" y1=\"" + fixed(H - B, 0) +
         "\" x2=\"" + fixed(W - R, 0) + "\" y2=\"" + fixed(H - B, 0) + "\"/><line x1=\"" +
         fixed(L, 0) + "\" y1=\"" + fixed(T, 0) + "\" x2=\"" + fixed(L, 0) + "\" y2=\"" +
         fixed(H - B, 0) + "\"/>";
  for (int tick = 0; tick <= 4; ++tick) {
    const double y = y0 + (y1 - y0) * tick / 4, x = x0 + (x1 - x0) * tick / 4;
    out += "<text x=\"" + fixed(L - 4, 0) + "\" y=\"" + fixed(py(y) + 4, 1) +
           "\" text-anchor=\"end\">" + escape(human(y)) + "</text>";
    out += "<text x=\"" + fixed(px(x), 1) + "\" y=\"" + fixed(H - B + 16, 0) +
           "\" text-anchor=\"middle\">" + escape(human(x)) + "</text>";
  }
  out += "<text x=\"" + fixed(W - R, 0) + "\" y=\"" + fixed(H - 4, 0) +
         "\" text-anchor=\"end\">step</text><text x=\"4\" y=\"" + fixed(T - 8, 0) + "\">" +
         escape(unit) + "</text></g>";
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    std::string points, xs, ys;
    for (size_t i = 0; i < s.x.size(); ++i) {
      xs += (i ? " " : "") + exact(s.x[i]);
      ys += (i ? " " : "") + exact(s.y[i]);
      if (std::isfinite(s.y[i])) points += fixed(px(s.x[i]), 2) + "," + fixed(py(s.y[i]), 2) + " ";
    }
    out += "<polyline class=\"series\" fill=\"none\" stroke=\"" + std::string(color_of(k)) +
           "\" stroke-width=\"1.5\"" + (s.dashed ? " stroke-dasharray=\"4 3\"" : "") +
           " data-node=\"" + std::to_string(s.node) + "\" data-field=\"" + escape(s.field) +
           "\" data-label=\"" + escape(s.label) + "\" data-x=\"" + xs + "\" data-y=\"" + ys +
           "\" points=\"" + points + "\"/>";
    out += "<text class=\"legend\" x=\"" + fixed(W - R + 12, 0) + "\" y=\"" +
           fixed(T + 14 * static_cast<double>(k), 0) + "\" fill=\"" + color_of(k) + "\">" +
           escape(s.label) + "</text>";
  }
  out += "</svg><figcaption class=\"readout\"></figcaption></figure>\n";
  return out;
}

std::vector<Series> per_node(const RunRecord& run, const std::string& field,
                             const std::string& label) {
  std::vector<Series> out;
  for (const auto& node : run.nodes) {
    Series s{label + " node " + std::to_string(node.node), node.node, field, {}, {}};
    for (const auto& step : node.steps)
      if (const auto value = step.get(field)) {
        s.x.push_back(step.step);
        s.y.push_back(*value);
      }
    if (!s.x.empty()) out.push_back(std::move(s));
  }
  return out;
}

// The stacked bar of each node's median step: compute, exposed communication, data
// wait, offload wait, bubble (of the pipeline phase), the rest.
std::string breakdown_chart(const RunRecord& run) {
  struct Part { const char* name; const char* color; };
  const Part parts[] = {{"compute", "#1f77b4"}, {"exposed comm", "#d62728"},
                        {"data wait", "#2ca02c"}, {"offload wait", "#9467bd"},
                        {"bubble", "#ff7f0e"}, {"other", "#bbbbbb"}};
  constexpr double W = 640, row = 26, L = 70, R = 90;
  const double H = 40 + row * static_cast<double>(run.nodes.size()) + 24;
  std::vector<std::array<double, 6>> bars;
  double widest = 0;
  for (const auto& node : run.nodes) {
    const auto m = [&](const char* key) { return median(field_of(node, key)).value_or(0.0); };
    const double step = m("step_ms"), compute = m("compute_ms"), comm = m("comm_ms"),
                 data = m("data_wait_ms"), offload = m("offload_wait_ms"),
                 bubble = m("bubble") * m("pipeline_ms");
    const double other = std::max(0.0, step - compute - comm - data - offload - bubble);
    bars.push_back({compute, comm, data, offload, bubble, other});
    widest = std::max(widest, compute + comm + data + offload + bubble + other);
  }
  std::string out = "<figure class=\"chart\" id=\"breakdown\"><svg viewBox=\"0 0 " + fixed(W, 0) +
                    " " + fixed(H, 0) + "\" width=\"" + fixed(W, 0) + "\" height=\"" +
                    fixed(H, 0) + "\"><text x=\"" + fixed(L, 0) +
                    "\" y=\"18\" class=\"title\">Step time breakdown (median ms per node)</text>";
  if (widest <= 0) widest = 1;
  for (size_t n = 0; n < run.nodes.size(); ++n) {
    const double y = 30 + row * static_cast<double>(n);
    double x = L;
    out += "<text x=\"" + fixed(L - 6, 0) + "\" y=\"" + fixed(y + 15, 0) +
           "\" text-anchor=\"end\">node " + std::to_string(run.nodes[n].node) + "</text>";
    double total = 0;
    for (size_t p = 0; p < 6; ++p) {
      const double w = bars[n][p] / widest * (W - L - R);
      out += "<rect class=\"part\" x=\"" + fixed(x, 2) + "\" y=\"" + fixed(y, 0) + "\" width=\"" +
             fixed(w, 2) + "\" height=\"20\" fill=\"" + parts[p].color + "\" data-node=\"" +
             std::to_string(run.nodes[n].node) + "\" data-part=\"" + parts[p].name +
             "\" data-ms=\"" + exact(bars[n][p]) + "\"><title>" + parts[p].name + ": " +
             fixed(bars[n][p], 2) + " ms</title></rect>";
      x += w;
      total += bars[n][p];
    }
    out += "<text x=\"" + fixed(x + 4, 1) + "\" y=\"" + fixed(y + 15, 0) + "\">" +
           fixed(total, 1) + " ms</text>";
  }
  double lx = L;
  for (const auto& part : parts) {
    out += "<rect x=\"" + fixed(lx, 0) + "\" y=\"" + fixed(H - 16, 0) +
           "\" width=\"10\" height=\"10\" fill=\"" + part.color + "\"/><text x=\"" +
           fixed(lx + 14, 0) + "\" y=\"" + fixed(H - 7, 0) + "\">" + part.name + "</text>";
    lx += 105;
  }
  return out + "</svg></figure>\n";
}

const char* event_color(const std::string& event) {
  if (event == "node_lost" || event == "node_failed" || event == "fault_injected" ||
      event == "sdc_detected" || event == "checkpoint_failed" || event == "training_interrupted")
    return "#d62728";
  if (event == "recovered" || event == "resumed" || event == "actor_restarted") return "#2ca02c";
  if (event == "checkpoint_committed") return "#1f77b4";
  if (event == "epoch_started") return "#9467bd";
  return "#7f7f7f";
}

std::string timeline_chart(const RunRecord& run) {
  constexpr double W = 900, lane = 30, L = 70, R = 20;
  const double H = 40 + lane * static_cast<double>(run.nodes.size()) + 20;
  double last = run.first_ts;
  for (const auto& node : run.nodes) {
    if (!node.timeline.empty()) last = std::max(last, node.timeline.back().ts);
    if (!node.steps.empty()) last = std::max(last, node.steps.back().ts);
  }
  const double span = std::max(last - run.first_ts, 1e-3);
  const auto px = [&](double ts) { return L + (ts - run.first_ts) / span * (W - L - R); };
  std::string out = "<figure class=\"chart\" id=\"timeline\"><svg viewBox=\"0 0 " + fixed(W, 0) +
                    " " + fixed(H, 0) + "\" width=\"" + fixed(W, 0) + "\" height=\"" +
                    fixed(H, 0) + "\"><text x=\"" + fixed(L, 0) +
                    "\" y=\"18\" class=\"title\">Timeline (seconds since the first event; "
                    "hover a mark)</text>";
  for (size_t n = 0; n < run.nodes.size(); ++n) {
    const auto& node = run.nodes[n];
    const double y = 40 + lane * static_cast<double>(n);
    out += "<text x=\"" + fixed(L - 6, 0) + "\" y=\"" + fixed(y + 4, 0) +
           "\" text-anchor=\"end\">node " + std::to_string(node.node) + "</text>";
    if (!node.steps.empty())
      out += "<line class=\"training\" x1=\"" + fixed(px(node.steps.front().ts), 2) + "\" y1=\"" +
             fixed(y, 0) + "\" x2=\"" + fixed(px(node.steps.back().ts), 2) + "\" y2=\"" +
             fixed(y, 0) + "\" stroke=\"#cccccc\" stroke-width=\"6\"/>";
    for (const auto& e : node.timeline) {
      const double t = e.ts - run.first_ts;
      out += "<circle class=\"event\" cx=\"" + fixed(px(e.ts), 2) + "\" cy=\"" + fixed(y, 0) +
             "\" r=\"5\" fill=\"" + event_color(e.event) + "\" data-node=\"" +
             std::to_string(node.node) + "\" data-event=\"" + escape(e.event) + "\" data-t=\"" +
             exact(t) + "\"><title>" + escape(e.event) + " at " + fixed(t, 2) + " s: " +
             escape(e.detail) + "</title></circle>";
    }
  }
  out += "<text x=\"" + fixed(L, 0) + "\" y=\"" + fixed(H - 4, 0) + "\">0 s</text><text x=\"" +
         fixed(W - R, 0) + "\" y=\"" + fixed(H - 4, 0) + "\" text-anchor=\"end\">" +
         fixed(span, 1) + " s</text>";
  return out + "</svg></figure>\n";
}

std::string measure_card(const char* key, const char* title, std::optional<double> value,
                         const std::string& shown, const std::string& note) {
  return std::string("<div class=\"measure\" data-measure=\"") + key + "\" data-value=\"" +
         (value ? exact(*value) : std::string("null")) + "\"><div class=\"name\">" + title +
         "</div><div class=\"value\">" + escape(value ? shown : std::string("n/a")) +
         "</div><div class=\"note\">" + escape(note) + "</div></div>";
}

std::string basis_note(const RunRecord& run, const char* key, const char* fallback) {
  for (const auto& node : run.nodes)
    if (!node.measures_line.empty())
      if (const auto source = util::json_string_field(node.measures_line, key)) return *source;
  return fallback;
}

const char* kStyle = R"(
body{font-family:sans-serif;margin:24px;color:#222;max-width:1000px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
.measures{display:flex;gap:12px;flex-wrap:wrap}
.measure{border:1px solid #ccc;border-radius:6px;padding:10px 14px;min-width:150px}
.measure .name{font-size:12px;color:#555}.measure .value{font-size:24px;font-weight:bold}
.measure .note{font-size:11px;color:#777}
svg text{font-size:11px;fill:#333}svg .title{font-size:13px;font-weight:bold}
.axis line{stroke:#888}.charts{display:flex;flex-wrap:wrap;gap:8px}figure{margin:0}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:4px 8px;text-align:right}
figcaption.readout{font-size:11px;color:#444;min-height:14px;max-width:760px}
pre{background:#f6f6f6;padding:10px;font-size:12px;overflow:auto}
)";

// The value under the pointer in each line chart.
const char* kScript = R"(
document.querySelectorAll('svg.plot').forEach(function (svg) {
  var readout = svg.parentNode.querySelector('.readout');
  var lines = Array.prototype.slice.call(svg.querySelectorAll('polyline.series'));
  svg.addEventListener('mousemove', function (event) {
    var box = svg.getBoundingClientRect();
    var fx = (event.clientX - box.left) / box.width;
    var parts = [];
    lines.forEach(function (line) {
      var xs = line.dataset.x.split(' ').map(Number), ys = line.dataset.y.split(' ');
      if (!xs.length) return;
      var i = Math.min(xs.length - 1, Math.max(0, Math.round(fx * (xs.length - 1))));
      parts.push(line.dataset.label + ' at step ' + xs[i] + ': ' + Number(ys[i]).toPrecision(5));
    });
    readout.textContent = parts.join(' | ');
  });
  svg.addEventListener('mouseleave', function () { readout.textContent = ''; });
});
)";

}  // namespace

RunMeasures run_measures(const RunRecord& run) {
  RunMeasures m;
  m.mfu = median_over_nodes(run, "mfu");
  m.comm_share = median_over_nodes(run, "comm_share");
  m.scaling_efficiency = median_over_nodes(run, "scaling_efficiency");
  m.tokens_per_s_per_node = median_over_nodes(run, "tokens_per_s_per_node");
  m.bubble = median_over_nodes(run, "bubble");
  for (const auto& node : run.nodes) {
    m.steps = std::max<int64_t>(m.steps, static_cast<int64_t>(node.steps.size()));
    for (const auto& step : node.steps) {
      if (const auto f = step.get("memory_fraction"); f && std::isfinite(*f))
        m.memory_fraction = std::max(m.memory_fraction.value_or(0.0), *f);
      if (const auto b = step.get("peak_memory_bytes"); b && std::isfinite(*b))
        m.peak_memory_bytes = std::max(m.peak_memory_bytes.value_or(0.0), *b);
    }
  }
  // Convergence: of the node with the most steps (every node reports the global loss).
  const NodeRecord* longest = nullptr;
  for (const auto& node : run.nodes)
    if (longest == nullptr || node.steps.size() > longest->steps.size()) longest = &node;
  if (longest != nullptr && !longest->steps.empty()) {
    m.first_loss = longest->steps.front().get("loss");
    m.final_loss = longest->steps.back().get("loss");
  }
  for (const auto& node : run.nodes)
    if (!node.evals.empty()) m.final_val_loss = node.evals.back().second;
  return m;
}

std::string render_html_report(const RunRecord& run) {
  const RunMeasures m = run_measures(run);
  const std::string name = run.run_dir.filename().string();
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                     "<title>dseek report: " + escape(name) + "</title><style>" + kStyle +
                     "</style></head><body>\n";
  html += "<h1>dseek run " + escape(name) + "</h1><p>" + escape(run.run_dir.string()) + ": " +
          std::to_string(run.nodes.size()) + " node(s), " + std::to_string(m.steps) +
          " steps.</p>\n";

  html += "<h2>The five measures</h2><div class=\"measures\">";
  html += measure_card("mfu", "Compute utilization (MFU)", m.mfu, m.mfu ? percent(*m.mfu) : "",
                       "median; peak: " + basis_note(run, "peak_source", "none"));
  html += measure_card("comm_share", "Communication share", m.comm_share,
                       m.comm_share ? percent(*m.comm_share) : "", "median exposed comm / step");
  html += measure_card("memory_fraction", "Memory use", m.memory_fraction,
                       m.memory_fraction ? percent(*m.memory_fraction) : "",
                       "peak " + (m.peak_memory_bytes ? human(*m.peak_memory_bytes) + "B" : std::string("n/a")) +
                           " of " + basis_note(run, "memory_source", "none"));
  std::string convergence;
  if (m.final_loss) convergence = fixed(*m.final_loss, 4);
  html += measure_card("final_loss", "Convergence (final loss)", m.final_loss, convergence,
                       (m.first_loss ? "from " + fixed(*m.first_loss, 4) : std::string()) +
                           (m.final_val_loss ? ", val " + fixed(*m.final_val_loss, 4) : std::string()));
  html += measure_card("scaling_efficiency", "Scaling efficiency", m.scaling_efficiency,
                       m.scaling_efficiency ? percent(*m.scaling_efficiency) : "",
                       (m.tokens_per_s_per_node ? human(*m.tokens_per_s_per_node) + " tokens/s per node; "
                                                : std::string()) +
                           "baseline: " + basis_note(run, "baseline_source", "none"));
  html += "</div>\n";

  html += "<h2>Curves</h2><div class=\"charts\">";
  auto loss = per_node(run, "loss", "loss");
  for (const auto& node : run.nodes) {
    if (node.evals.empty()) continue;
    Series val{"val loss node " + std::to_string(node.node), node.node, "val_loss", {}, {}, true};
    for (const auto& [step, value] : node.evals) {
      val.x.push_back(step);
      val.y.push_back(value);
    }
    loss.push_back(std::move(val));
  }
  html += line_chart("loss", "Loss and validation loss", "nats", loss);
  html += line_chart("tokens_per_s", "Tokens/s per node", "tokens/s",
                     per_node(run, "tokens_per_s_per_node", "tokens/s"));
  html += line_chart("mfu", "MFU", "ratio", per_node(run, "mfu", "MFU"));
  html += line_chart("comm_share", "Exposed communication share", "ratio",
                     per_node(run, "comm_share", "comm share"));
  html += "</div>\n<h2>Step time</h2>" + breakdown_chart(run);

  html += "<h2>Nodes</h2><table id=\"nodes\"><tr><th>node</th><th>steps</th><th>median step ms</th>"
          "<th>median tokens/s per node</th><th>median MFU</th><th>median comm share</th>"
          "<th>median data wait ms</th><th>peak memory</th><th>faults</th><th>end</th></tr>";
  for (const auto& node : run.nodes) {
    const auto cell = [&](const char* key, auto&& format) {
      const auto v = median(field_of(node, key));
      return "<td data-field=\"" + std::string(key) + "\" data-value=\"" + (v ? exact(*v) : "null") +
             "\">" + (v ? format(*v) : std::string("n/a")) + "</td>";
    };
    size_t faults = 0;
    for (const auto& e : node.timeline)
      faults += e.event == "fault_injected" || e.event == "node_lost" || e.event == "sdc_detected";
    double peak = 0;
    for (const auto v : field_of(node, "peak_memory_bytes")) peak = std::max(peak, v);
    std::string end = "running or killed";
    if (!node.end_line.empty()) end = util::json_string_field(node.end_line, "event").value_or("");
    html += "<tr data-node=\"" + std::to_string(node.node) + "\"><td>" + std::to_string(node.node) +
            "</td><td>" + std::to_string(node.steps.size()) + "</td>" +
            cell("step_ms", [](double v) { return fixed(v, 1); }) +
            cell("tokens_per_s_per_node", [](double v) { return human(v); }) +
            cell("mfu", [](double v) { return percent(v); }) +
            cell("comm_share", [](double v) { return percent(v); }) +
            cell("data_wait_ms", [](double v) { return fixed(v, 2); }) + "<td>" + human(peak) +
            "B</td><td>" + std::to_string(faults) + "</td><td>" + escape(end) + "</td></tr>";
  }
  html += "</table>\n<h2>Faults, recoveries, epochs, checkpoints</h2>" + timeline_chart(run);
  html += "<table id=\"events\"><tr><th>t (s)</th><th>node</th><th>event</th><th>detail</th></tr>";
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& node : run.nodes)
    for (const auto& e : node.timeline)
      rows.emplace_back(e.ts, "<tr><td>" + fixed(e.ts - run.first_ts, 2) + "</td><td>" +
                                  std::to_string(node.node) + "</td><td>" + escape(e.event) +
                                  "</td><td style=\"text-align:left\">" + escape(e.detail) +
                                  "</td></tr>");
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& row : rows) html += row.second;
  html += "</table>\n<h2>Config</h2>";
  std::string config;
  for (const auto& node : run.nodes)
    if (!node.measures_line.empty())
      if (const auto text = util::json_string_field(node.measures_line, "config")) {
        config = *text;
        break;
      }
  html += "<pre id=\"config\">" + escape(config.empty() ? "(no measures event with the config)" : config) +
          "</pre>";
  for (const auto& node : run.nodes)
    if (!node.run_started_line.empty()) {
      html += "<p>node " + std::to_string(node.node) + " run_started:</p><pre>" +
              escape(node.run_started_line) + "</pre>";
      break;
    }
  html += "<script>" + std::string(kScript) + "</script>\n</body></html>\n";
  return html;
}

std::string render_text_summary(const RunRecord& run) {
  const RunMeasures m = run_measures(run);
  const auto opt = [](const std::optional<double>& v, auto&& format) {
    return v ? format(*v) : std::string("n/a");
  };
  std::string out = "run " + run.run_dir.string() + ": " + std::to_string(run.nodes.size()) +
                    " node(s), " + std::to_string(m.steps) + " steps\n";
  out += "  compute utilization (MFU, median)  " + opt(m.mfu, percent) + "\n";
  out += "  communication share (median)       " + opt(m.comm_share, percent) + "\n";
  out += "  memory (peak fraction, bytes)      " + opt(m.memory_fraction, percent) + ", " +
         opt(m.peak_memory_bytes, [](double v) { return human(v) + "B"; }) + "\n";
  out += "  convergence (loss first -> final)  " +
         opt(m.first_loss, [](double v) { return fixed(v, 4); }) + " -> " +
         opt(m.final_loss, [](double v) { return fixed(v, 4); }) + ", val " +
         opt(m.final_val_loss, [](double v) { return fixed(v, 4); }) + "\n";
  out += "  scaling efficiency (median)        " + opt(m.scaling_efficiency, percent) + " (" +
         opt(m.tokens_per_s_per_node, human) + " tokens/s per node)\n";
  for (const auto& node : run.nodes) {
    size_t lost = 0, recovered = 0, checkpoints = 0, faults = 0;
    for (const auto& e : node.timeline) {
      lost += e.event == "node_lost";
      recovered += e.event == "recovered";
      checkpoints += e.event == "checkpoint_committed";
      faults += e.event == "fault_injected";
    }
    out += "  node " + std::to_string(node.node) + ": " + std::to_string(node.steps.size()) +
           " steps, median " + opt(median(field_of(node, "step_ms")), [](double v) { return fixed(v, 1); }) +
           " ms/step, " + std::to_string(faults) + " faults, " + std::to_string(lost) +
           " nodes lost, " + std::to_string(recovered) + " recoveries, " +
           std::to_string(checkpoints) + " checkpoints" +
           (node.end_line.empty() ? ", did not finish" : "") + "\n";
  }
  return out;
}

}  // namespace dseek::metrics
