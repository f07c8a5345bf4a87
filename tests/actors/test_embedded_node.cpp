// The node actor of actors/node/embedded_node.hpp in a test's own actor system: a system
// without the middleman is refused; a job whose data is missing fails in the worker, and
// the node answers its status, refuses an invalid subscriber with a node_errc error, tells
// its subscriber the events and the result (exit code 3: a data error no restart cures),
// refuses a resume without a pause and a checkpoint of a job without checkpoints, fails
// a pending pause at the job's end, and exits with node_errc::job_failed. (A job that trains: the integration test of the
// embedding example, tests/integration/test_embedded_node.cpp.)
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/faults/crash_request.hpp"
#include "actors/message_types.hpp"
#include "actors/node/embedded_node.hpp"
#include "runtime/config/load.hpp"
#include "runtime/util/exit_codes.hpp"

using namespace dseek::actors;
using namespace std::chrono_literals;

namespace {

class node_test_config : public caf::actor_system_config {
 public:
  node_test_config() { register_node_types(*this); }
};

class bare_config : public caf::actor_system_config {
 public:
  bare_config() { register_message_types(*this); }
};

struct scratch {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("dseek-embedded-node-" + std::to_string(::getpid()));
  scratch() { std::filesystem::create_directories(path); }
  ~scratch() { std::filesystem::remove_all(path); }
};

dseek::config::JobConfig job_without_data(const std::filesystem::path& dir) {
  return dseek::config::load_config_text(
      "", "embedded-test.toml",
      {"data.dir=\"" + (dir / "no-such-data").string() + "\"", "checkpoint.every_steps=0",
       "model.dim=64", "model.layers=2", "model.heads=4", "model.context=64",
       "train.batch_size=4", "train.steps=2", "train.threads=1", "metrics.progress=\"plain\""});
}

}  // namespace

TEST_CASE("spawn_node refuses an actor system without the middleman", "[embed][actors]") {
  scratch dir;
  bare_config cfg;
  caf::actor_system sys{cfg};
  node_options options;
  options.run_dir = dir.path;
  CHECK_THROWS_WITH(spawn_node(sys, job_without_data(dir.path), options),
                    Catch::Contains("register_node_types"));
}

TEST_CASE("an embedded node whose job fails answers, tells the result and exits with a "
          "node error", "[embed][actors]") {
  scratch dir;
  int exit_code = -1;
  std::string reason;
  std::vector<std::string> events;
  {
    node_test_config cfg;
    caf::actor_system sys{cfg};
    caf::scoped_actor self{sys};
    node_options options;
    options.run_dir = dir.path;
    options.subscribers.push_back(caf::actor_cast<caf::actor>(self));
    node_actor node = spawn_node(sys, job_without_data(dir.path), options);
    self->monitor(node);

    self->request(node, 5s, node_status_atom::value)
        .receive([](const node_status& s) { CHECK(s.epoch >= 0); },
                 [&](caf::error& e) { FAIL(sys.render(e)); });
    self->request(node, 5s, node_subscribe_atom::value, caf::actor{})
        .receive([](caf::ok_atom) { FAIL("an invalid subscriber was taken"); },
                 [](caf::error& e) {
                   CHECK(e.category() == node_category);
                   CHECK(e.code() == static_cast<std::uint8_t>(node_errc::invalid_subscriber));
                 });

    // Steering a job that cannot train: resume without a pause is refused, a checkpoint
    // of a job that writes none is refused (or the node is already stopping), and a
    // pause waits until the job's end says it never came.
    auto code_of = [](const caf::error& e) {
      CHECK(e.category() == node_category);
      return static_cast<node_errc>(e.code());
    };
    self->request(node, 5s, node_resume_atom::value)
        .receive([](caf::ok_atom) { FAIL("a resume without a pause was taken"); },
                 [&](caf::error& e) { CHECK(code_of(e) == node_errc::not_paused); });
    self->request(node, 5s, node_checkpoint_atom::value)
        .receive([](std::int64_t) { FAIL("a checkpoint of a job without checkpoints"); },
                 [&](caf::error& e) {
                   const auto code = code_of(e);
                   CHECK((code == node_errc::no_checkpoints || code == node_errc::not_running));
                 });
    self->request(node, 60s, node_pause_atom::value)
        .receive([](std::int64_t) { FAIL("a job that never trained paused"); },
                 [&](caf::error& e) {
                   const auto code = code_of(e);
                   CHECK((code == node_errc::ended || code == node_errc::not_running));
                 });

    bool down = false;
    caf::error exit_reason;
    while (!down)
      self->receive([&](node_event& e) { events.push_back(e.event); },
                    [&](node_result& r) {
                      exit_code = r.exit_code;
                      reason = r.reason;
                    },
                    [&](caf::down_msg& msg) {
                      down = true;
                      exit_reason = msg.reason;
                    },
                    caf::after(60s) >> [&] { down = true; });
    CHECK(exit_reason.category() == node_category);
    CHECK(exit_reason.code() == static_cast<std::uint8_t>(node_errc::job_failed));
    CHECK(sys.render(exit_reason).find("exit code 3") != std::string::npos);
  }  // the system's destructor waits for the node's whole tree
  INFO(reason);
  CHECK(exit_code == dseek::exit_code::permanent);
  CHECK(reason.find("no-such-data") != std::string::npos);
  CHECK(std::find(events.begin(), events.end(), "node_started") != events.end());
  CHECK(std::find(events.begin(), events.end(), "node_failed") != events.end());
}
