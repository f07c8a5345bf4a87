// Implementation of step_measures.hpp.
#include "runtime/metrics/step_measures.hpp"

#include <cblas.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "runtime/config/load.hpp"
#include "runtime/model/param_layout.hpp"
#include "runtime/util/json_fields.hpp"

namespace dseek::metrics {

double model_flops_per_token(const config::ModelConfig& m) {
  const model::ParamLayout layout(model::GptShape{m.dim, m.layers, m.heads, m.context, m.vocab});
  return 6.0 * static_cast<double>(layout.total()) +
         6.0 * static_cast<double>(m.layers) * static_cast<double>(m.dim) *
             static_cast<double>(m.context);
}

double measure_cpu_gemm_flops() {
  constexpr int n = 1024;
  std::vector<float> a(size_t(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size(), 0.0f);
  double best = 0;
  for (int run = 0; run < 3; ++run) {
    const auto start = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n,
                b.data(), n, 0.0f, c.data(), n);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * n * n * n / std::max(seconds, 1e-9));
  }
  return best;
}

double baseline_tokens_per_s(const std::filesystem::path& run_dir) {
  std::vector<double> rates;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, error)) {
    const auto name = entry.path().filename().string();
    if (name.rfind("node-", 0) != 0) continue;
    std::ifstream in(entry.path() / "events.jsonl");
    for (std::string line; std::getline(in, line);) {
      if (util::json_string_field(line, "event") != "step") continue;
      if (const auto rate = util::json_number_field(line, "tokens_per_s"); rate && std::isfinite(*rate))
        rates.push_back(*rate);
    }
  }
  if (error)
    throw std::runtime_error("metrics.baseline_run: cannot read " + run_dir.string() + ": " +
                             error.message());
  if (rates.empty())
    throw std::runtime_error("metrics.baseline_run: " + run_dir.string() +
                             " has no step event with tokens_per_s in node-*/events.jsonl");
  std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
  return rates[rates.size() / 2];
}

MeasureBasis measure_basis(const config::JobConfig& config) {
  const auto& m = config.metrics;
  const bool cpu = config.train.device != config::Device::cuda;
  MeasureBasis basis;
  basis.flops_per_token = model_flops_per_token(config.model);
  basis.groups_per_node = std::max<int64_t>(1, config.cluster.gpus_per_node);
  basis.world_size = std::max<int64_t>(1, config.cluster.nodes);
  if (m.peak_flops > 0) {
    basis.peak_flops = m.peak_flops;
    basis.peak_source = "configured";
  } else if (cpu) {
    basis.peak_flops = measure_cpu_gemm_flops();
    basis.peak_source = "measured (fp32 GEMM)";
  } else {
    basis.peak_source = "none";
  }
  if (m.device_memory_bytes > 0) {
    basis.device_memory_bytes = m.device_memory_bytes;
    basis.memory_source = "configured";
  } else if (cpu) {
    basis.device_memory_bytes =
        static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
    basis.memory_source = "host memory";
  } else {
    basis.memory_source = "none";
  }
  if (m.baseline_tokens_per_s > 0) {
    basis.baseline_tokens_per_s = m.baseline_tokens_per_s;
    basis.baseline_source = "configured";
  } else if (!m.baseline_run.empty()) {
    basis.baseline_tokens_per_s = baseline_tokens_per_s(m.baseline_run);
    basis.baseline_source = m.baseline_run;
  } else if (basis.world_size == 1) {
    basis.baseline_source = "none (one node: its own steps)";
  } else {
    basis.baseline_source = "none";
  }
  return basis;
}

namespace {

double host_peak_bytes() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;  // Linux: kibibytes
}

}  // namespace

void StepMeasures::enrich(std::string_view event, std::string& fields) {
  std::lock_guard lock(mutex_);
  if (event == "epoch_started") {
    if (const auto world = util::json_number_field(fields, "world_size"); world && *world >= 1)
      basis_.world_size = static_cast<int64_t>(*world);
    return;
  }
  if (event != "step") return;
  const auto number = [&fields](std::string_view key) {
    const auto value = util::json_number_field(fields, key);
    return value && std::isfinite(*value) ? *value : 0.0;
  };
  const double tokens_per_s = number("tokens_per_s"), step_ms = number("step_ms");
  const double world = static_cast<double>(basis_.world_size);
  util::JsonLine more;
  more.add("world_size", basis_.world_size);
  const double model_flops = tokens_per_s * basis_.flops_per_token;
  more.add("model_flops_per_s", model_flops);
  if (basis_.peak_flops > 0)
    more.add("mfu", model_flops / (world * static_cast<double>(basis_.groups_per_node) *
                                   basis_.peak_flops));
  if (step_ms > 0) {
    more.add("comm_share", number("comm_ms") / step_ms);
    more.add("data_wait_share", number("data_wait_ms") / step_ms);
  }
  // One-stage layouts have no pipeline: no bubble.
  if (!util::json_number_field(fields, "bubble")) more.add("bubble", 0.0);
  more.add("host_peak_memory_bytes", host_peak_bytes());
  if (basis_.device_memory_bytes > 0)
    more.add("memory_fraction", number("peak_memory_bytes") / basis_.device_memory_bytes);
  const double per_node = tokens_per_s / world;
  more.add("tokens_per_s_per_node", per_node);
  if (basis_.baseline_tokens_per_s > 0)
    more.add("scaling_efficiency", per_node / basis_.baseline_tokens_per_s);
  const std::string extra = more.str();
  if (fields.size() < 2 || fields.back() != '}') return;
  fields.pop_back();
  if (fields.size() > 1) fields += ',';
  fields.append(extra, 1, std::string::npos);
}

util::JsonLine StepMeasures::basis_fields() const {
  util::JsonLine fields;
  fields.add("flops_per_token", basis_.flops_per_token).add("peak_flops", basis_.peak_flops)
      .add("peak_source", basis_.peak_source)
      .add("device_memory_bytes", basis_.device_memory_bytes)
      .add("memory_source", basis_.memory_source)
      .add("baseline_tokens_per_s", basis_.baseline_tokens_per_s)
      .add("baseline_source", basis_.baseline_source)
      .add("groups_per_node", basis_.groups_per_node).add("world_size", basis_.world_size);
  return fields;
}

void attach_step_measures(EventLog& events, const config::JobConfig& config) {
  auto measures = std::make_shared<StepMeasures>(measure_basis(config));
  // With the job's resolved config (no secret: to_toml leaves it out), so that a run's
  // events say what ran (`dseek report` shows it).
  events.emit("measures", measures->basis_fields().add("config", config::to_toml(config)));
  events.set_enricher([measures](std::string_view event, std::string& fields) {
    measures->enrich(event, fields);
  });
}

}  // namespace dseek::metrics
