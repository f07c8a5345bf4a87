// A node embedded in another CAF application (apps/examples/embedded_node_example.cpp,
// actors/node/embedded_node.hpp) trains the tiny job to the same parameters as
// `dseek launch` and `dseek-node` with the same config: the example prints every event of
// the node, its status and its result, and writes the same events.jsonl.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {

// The example's command line for the tiny job: tiny_job()'s config, run dir and --set
// values (dseek-node CONFIG RUN_DIR --set K=V ... becomes example CONFIG RUN_DIR K=V ...).
std::vector<std::string> tiny_example(const std::filesystem::path& run_dir, int steps) {
  const auto node = tiny_job(run_dir, steps);
  REQUIRE(node.size() >= 5);
  REQUIRE(node[1] == "--config");
  REQUIRE(node[3] == "--run-dir");
  std::vector<std::string> example = {bin("dseek_embedded_node_example"), node[2], node[4]};
  for (size_t i = 5; i + 1 < node.size(); i += 2) {
    REQUIRE(node[i] == "--set");
    example.push_back(node[i + 1]);
  }
  return example;
}

}  // namespace

TEST_CASE("an application that embeds a node trains the tiny job to the parameters "
          "dseek launch and dseek-node reach", "[embed][integration]") {
  constexpr int steps = 12;
  ScratchDir embedded("embedded-node");
  const auto example = run_process(tiny_example(embedded.path(), steps), 120s);
  INFO(example.output);
  REQUIRE(example.exit_code == 0);
  // It printed the node's events as they came, its status, then the result.
  CHECK(example.output.find("event: node_started ") != std::string::npos);
  CHECK(example.output.find("event: train_done ") != std::string::npos);
  CHECK(example.output.find("event: node_stopping ") != std::string::npos);
  CHECK(example.output.find("result: exit code 0, " + std::to_string(steps) + " steps") !=
        std::string::npos);
  const std::string params = final_params_sha256(embedded.path(), 0, steps);
  REQUIRE(params.size() == 64);
  CHECK(example.output.find("params_sha256 " + params) != std::string::npos);
  // The result comes after the node's last event.
  CHECK(example.output.find("result: ") > example.output.find("event: node_stopping "));

  ScratchDir launched("embedded-node-launch");
  const auto launch = run_process(tiny_launch(launched.path(), 1, steps), 120s, launch_env());
  INFO(launch.output);
  REQUIRE(launch.exit_code == 0);
  CHECK(final_params_sha256(launched.path(), 0, steps) == params);

  ScratchDir standalone("embedded-node-standalone");
  const auto node = run_process(tiny_job(standalone.path(), steps), 120s);
  INFO(node.output);
  REQUIRE(node.exit_code == 0);
  CHECK(final_params_sha256(standalone.path(), 0, steps) == params);
}
