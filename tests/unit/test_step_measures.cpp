// The five measures of a step (runtime/metrics/step_measures.hpp): the model FLOPs per
// token against GPT-2 small's published parameter count, the fields a step event gains
// from a given basis (by hand from the event's own numbers), the world size following
// the epochs, the baseline read from a one-node run's events, and the gauges and
// counters /metrics shows for them.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <string>

#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/prometheus_text.hpp"
#include "runtime/metrics/step_measures.hpp"
#include "runtime/metrics/training_metrics.hpp"
#include "runtime/util/json_fields.hpp"
#include "support/test_paths.hpp"

using namespace dseek;
using Catch::Matchers::Contains;

namespace {

double field(const std::string& fields, std::string_view key) {
  const auto value = util::json_number_field(fields, key);
  REQUIRE(value.has_value());
  return *value;
}

}  // namespace

TEST_CASE("step measures: 6N + 6LCT model FLOPs per token", "[metrics][measures]") {
  // GPT-2 small (tied embeddings): 124,439,808 parameters (Radford et al., HF's count).
  config::ModelConfig gpt2;
  gpt2.vocab = 50257;
  gpt2.context = 1024;
  gpt2.dim = 768;
  gpt2.layers = 12;
  gpt2.heads = 12;
  CHECK(metrics::model_flops_per_token(gpt2) == 6.0 * 124439808 + 6.0 * 12 * 768 * 1024);
}

TEST_CASE("step measures: the fields a step event gains", "[metrics][measures]") {
  metrics::MeasureBasis basis;
  basis.flops_per_token = 1e6;
  basis.peak_flops = 1e10;
  basis.device_memory_bytes = 1 << 30;
  basis.baseline_tokens_per_s = 4000;
  basis.groups_per_node = 1;
  basis.world_size = 2;
  metrics::StepMeasures measures(basis);
  std::string fields = R"({"step":3,"tokens_per_s":6000,"step_ms":200,"comm_ms":40,)"
                       R"("data_wait_ms":10,"peak_memory_bytes":268435456})";
  measures.enrich("step", fields);
  CHECK(field(fields, "step") == 3);  // the event's own fields stay
  CHECK(field(fields, "world_size") == 2);
  CHECK(field(fields, "model_flops_per_s") == Approx(6000 * 1e6));
  CHECK(field(fields, "mfu") == Approx(6e9 / (2 * 1e10)));
  CHECK(field(fields, "comm_share") == Approx(0.2));
  CHECK(field(fields, "data_wait_share") == Approx(0.05));
  CHECK(field(fields, "bubble") == 0);  // no pipeline
  CHECK(field(fields, "memory_fraction") == Approx(0.25));
  CHECK(field(fields, "tokens_per_s_per_node") == Approx(3000));
  CHECK(field(fields, "scaling_efficiency") == Approx(0.75));
  CHECK(field(fields, "host_peak_memory_bytes") > 0);

  // A lost node: the next epoch's world size is the denominator from then on.
  std::string epoch = R"({"epoch":2,"world_size":1})";
  measures.enrich("epoch_started", epoch);
  CHECK(epoch == R"({"epoch":2,"world_size":1})");  // other events are left alone
  std::string next = R"({"step":4,"tokens_per_s":3000,"step_ms":100,"comm_ms":0,)"
                     R"("data_wait_ms":0,"peak_memory_bytes":0,"bubble":0.25})";
  measures.enrich("step", next);
  CHECK(field(next, "mfu") == Approx(3e9 / 1e10));
  CHECK(field(next, "scaling_efficiency") == Approx(0.75));
  CHECK(field(next, "bubble") == 0.25);  // a pipeline's own measurement is kept
  CHECK(next.find("\"bubble\"") == next.rfind("\"bubble\""));
}

TEST_CASE("step measures: without a peak, memory or baseline those fields are absent",
          "[metrics][measures]") {
  metrics::MeasureBasis basis;
  basis.flops_per_token = 10;
  metrics::StepMeasures measures(basis);
  std::string fields = R"({"step":1,"tokens_per_s":5,"step_ms":0})";
  measures.enrich("step", fields);
  CHECK(field(fields, "model_flops_per_s") == 50);
  for (const char* absent : {"mfu", "memory_fraction", "scaling_efficiency", "comm_share"})
    CHECK_FALSE(util::json_number_field(fields, absent));
}

TEST_CASE("step measures: the basis of a config, the baseline from a run's events",
          "[metrics][measures]") {
  testing::ScratchDir dir("measures");
  const auto baseline_run = dir / "one-node";
  {
    metrics::EventLog log(baseline_run, 0);
    for (double rate : {100.0, 300.0, 200.0}) log.emit("step", util::JsonLine().add("tokens_per_s", rate));
    log.emit("train_done", util::JsonLine().add("tokens_per_s", 9999.0));
  }
  CHECK(metrics::baseline_tokens_per_s(baseline_run) == 200);  // the median of the steps
  CHECK_THROWS_WITH(metrics::baseline_tokens_per_s(dir / "none"),
                    Contains("metrics.baseline_run") && Contains("none"));

  config::JobConfig config;
  config.cluster.nodes = 4;
  config.metrics.baseline_run = baseline_run.string();
  config.metrics.peak_flops = 2e12;
  const auto basis = metrics::measure_basis(config);
  CHECK(basis.peak_flops == 2e12);
  CHECK(basis.peak_source == "configured");
  CHECK(basis.baseline_tokens_per_s == 200);
  CHECK(basis.world_size == 4);
  CHECK(basis.device_memory_bytes > 0);  // the host's memory on a CPU job
  CHECK(basis.flops_per_token == metrics::model_flops_per_token(config.model));

  config.metrics.peak_flops = 0;  // measured: a fp32 GEMM runs at some positive rate
  config.metrics.baseline_run.clear();
  const auto measured = metrics::measure_basis(config);
  CHECK(measured.peak_flops > 1e8);
  CHECK(measured.peak_source == "measured (fp32 GEMM)");
  CHECK(measured.baseline_tokens_per_s == 0);
}

TEST_CASE("step measures: an event log enriches its steps and /metrics shows the measures",
          "[metrics][measures][prometheus]") {
  testing::ScratchDir dir("measures-log");
  metrics::EventLog log(dir.path(), 0);
  metrics::TrainingMetrics folded(64);
  log.add_listener([&folded](std::string_view e, std::string_view f) { folded.observe(e, f); });
  config::JobConfig config;
  config.metrics.peak_flops = 1e9;
  config.metrics.device_memory_bytes = 1e6;
  config.metrics.baseline_tokens_per_s = 50;
  metrics::attach_step_measures(log, config);
  log.emit("step", util::JsonLine().add("step", 1).add("tokens_per_s", 100.0)
                       .add("step_ms", 10.0).add("comm_ms", 2.0).add("data_wait_ms", 1.0)
                       .add("peak_memory_bytes", uint64_t(500000)).add("loss_scale", 1024.0));
  log.emit("step_skipped", util::JsonLine().add("step", 1));
  log.emit("sdc_detected", util::JsonLine().add("step", 1));

  std::ifstream in(log.path());
  std::string measures_line, step_line;
  std::getline(in, measures_line);
  std::getline(in, step_line);
  CHECK(util::json_string_field(measures_line, "event") == std::string("measures"));
  CHECK(field(measures_line, "peak_flops") == 1e9);
  CHECK(util::json_string_field(step_line, "event") == std::string("step"));
  const double flops = metrics::model_flops_per_token(config.model);
  CHECK(field(step_line, "mfu") == Approx(100 * flops / 1e9));

  const std::string text = metrics::render_prometheus(folded.snapshot(), {});
  CHECK_THAT(text, Contains("\ndseek_comm_share 0.2\n"));
  CHECK_THAT(text, Contains("\ndseek_data_wait_share 0.1\n"));
  CHECK_THAT(text, Contains("\ndseek_memory_fraction 0.5\n"));
  CHECK_THAT(text, Contains("\ndseek_scaling_efficiency 2\n"));
  CHECK_THAT(text, Contains("\ndseek_bubble_fraction 0\n"));
  CHECK_THAT(text, Contains("\ndseek_loss_scale 1024\n"));
  CHECK_THAT(text, Contains("\ndseek_skipped_steps_total 1\n"));
  CHECK_THAT(text, Contains("\ndseek_sdc_detections_total 1\n"));
  CHECK_THAT(text, Contains("\ndseek_peak_flops 1000000000\n"));
  const auto mfu_at = text.find("\ndseek_mfu ");
  REQUIRE(mfu_at != std::string::npos);
  CHECK(std::strtod(text.c_str() + mfu_at + 11, nullptr) == Approx(100 * flops / 1e9));
}
