// docs/metrics.md's table of metrics is what /metrics serves: the names in its first
// column equal the names TrainingMetrics exports once every event that sets a gauge was
// seen, with the same type. The dashboard and alert checks (tests/deploy/
// test_observability.py) take their list of exported metrics from that table.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <string>

#include "runtime/metrics/training_metrics.hpp"
#include "support/test_paths.hpp"

using namespace dseek;

TEST_CASE("docs/metrics.md's table names exactly the metrics /metrics serves", "[metrics][docs]") {
  metrics::TrainingMetrics folded(64);
  folded.observe("measures", R"({"peak_flops":1e12,"device_memory_bytes":1e9,)"
                             R"("baseline_tokens_per_s":100})");
  folded.observe("epoch_started", R"({"epoch":1,"world_size":2})");
  folded.observe("step", R"({"step":1,"loss":2,"lr":0.001,"grad_norm":1,"tokens_per_s":100,)"
                         R"("step_ms":10,"compute_ms":8,"comm_ms":1,"data_wait_ms":1,)"
                         R"("offload_wait_ms":0,"peak_memory_bytes":5,"loss_scale":1024,)"
                         R"("model_flops_per_s":1e9,"mfu":0.001,"comm_share":0.1,)"
                         R"("data_wait_share":0.1,"bubble":0,"host_peak_memory_bytes":7,)"
                         R"("memory_fraction":0.5,"tokens_per_s_per_node":50,)"
                         R"("scaling_efficiency":0.5,"prefetch_queue_depth":2,"batch_share":6})");
  folded.observe("eval", R"({"step":1,"val_loss":2.5})");
  folded.observe("train_done", R"({"step":1})");
  std::map<std::string, std::string> served;
  for (const auto& sample : folded.snapshot())
    served[std::string(sample.name)] =
        sample.type == metrics::MetricType::counter ? "counter" : "gauge";

  std::ifstream doc(testing::source_dir() / "docs" / "metrics.md");
  REQUIRE(doc);
  const std::regex row(R"(^\| `(dseek_[a-z_]+)` \| (counter|gauge) \|)");
  std::map<std::string, std::string> documented;
  for (std::string line; std::getline(doc, line);) {
    std::smatch match;
    if (std::regex_search(line, match, row)) documented[match[1]] = match[2];
  }
  CHECK(documented == served);
  CHECK(served.size() == 42);
}
