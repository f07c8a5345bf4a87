// The typed interfaces of a node's public actors (each declared in its own header, with
// what it accepts and answers), used as an embedding application would: through the
// typed handle, with requests that time out. The compiler checks every message below
// against the interface; the test checks the answers. (The node actor's own interface:
// test_embedded_node.cpp.)
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>

#include <unistd.h>

#include <caf/all.hpp>

#include "actors/cluster/coordinator.hpp"
#include "actors/data/stage_workers.hpp"
#include "actors/message_types.hpp"
#include "actors/node/checkpoint_writer.hpp"
#include "actors/node/data_prefetcher.hpp"
#include "actors/node/health_monitor.hpp"
#include "actors/node/node_registry.hpp"

using namespace dseek;
using namespace std::chrono_literals;

namespace {

struct node_system_config : caf::actor_system_config {
  node_system_config() { actors::register_message_types(*this); }
};

}  // namespace

TEST_CASE("public actors: the health monitor through health_monitor_actor",
          "[actors][interfaces]") {
  node_system_config cfg;
  caf::actor_system sys{cfg};
  CHECK_FALSE(actors::health_monitor_of(sys));  // none runs yet
  actors::spawn_health_monitor(sys);
  caf::scoped_actor self{sys};
  // Registered when it first runs: wait for it (bounded).
  actors::health_monitor_actor monitor;
  for (int i = 0; i < 500 && !monitor; ++i) {
    monitor = actors::health_monitor_of(sys);
    if (!monitor) std::this_thread::sleep_for(2ms);
  }
  REQUIRE(monitor);
  auto last_step = [&] {
    std::int64_t step = -1;
    self->request(monitor, 5s, caf::get_atom::value)
        .receive([&](std::int64_t s) { step = s; },
                 [&](caf::error& e) { FAIL("no answer: " << sys.render(e)); });
    return step;
  };
  CHECK(last_step() == 0);
  self->send(monitor, actors::step_progress{7, 2.5});
  self->send(monitor, actors::training_paused{7, true});
  CHECK(last_step() == 7);
  // Another replica disagrees: reported (no metrics exporter runs: nothing to write to),
  // and answered with ok.
  bool reported = false;
  self->request(monitor, 5s, actors::sdc_report{train::ReplicaDisagreement{6, "gradients", {1}, false}})
      .receive([&](caf::ok_atom) { reported = true; },
               [&](caf::error& e) { FAIL("no answer: " << sys.render(e)); });
  CHECK(reported);
  self->send_exit(monitor, caf::exit_reason::user_shutdown);
  sys.registry().erase(actors::names::health_monitor);
}

TEST_CASE("public actors: the data prefetcher through data_prefetcher_actor",
          "[actors][interfaces]") {
  node_system_config cfg;
  caf::actor_system sys{cfg};
  CHECK_FALSE(actors::data_prefetcher_of(sys, 1));
  actors::spawn_data_prefetcher(sys, 2, /*local_rank=*/1);
  auto prefetcher = actors::data_prefetcher_of(sys, 1);
  REQUIRE(prefetcher);
  CHECK_FALSE(actors::data_prefetcher_of(sys, 0));  // another group's
  caf::scoped_actor self{sys};
  actors::prefetch_stats stats;
  stats.hits = 99;
  self->request(prefetcher, 5s, caf::get_atom::value)
      .receive([&](actors::prefetch_stats& s) { stats = s; },
               [&](caf::error& e) { FAIL("no answer: " << sys.render(e)); });
  CHECK(stats.hits == 0);
  CHECK(stats.misses == 0);
  CHECK(stats.ready_through == -1);
  self->send_exit(prefetcher, caf::exit_reason::user_shutdown);
  sys.registry().erase(actors::names::data_prefetcher_of(1));
}

TEST_CASE("public actors: the checkpoint writer through checkpoint_writer_actor counts the "
          "snapshots it ran", "[actors][interfaces]") {
  node_system_config cfg;
  caf::actor_system sys{cfg};
  const auto root = std::filesystem::temp_directory_path() /
                    ("dseek-interfaces-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  auto writer_handle = actors::spawn_checkpoint_writer(sys);
  actors::checkpoint_writer_actor writer;
  for (int i = 0; i < 500 && !writer; ++i) {
    writer = actors::checkpoint_writer_of(sys);
    if (!writer) std::this_thread::sleep_for(2ms);
  }
  REQUIRE(writer);
  caf::scoped_actor self{sys};
  auto snapshots_run = [&] {
    std::uint64_t n = 99;
    self->request(writer, 5s, caf::get_atom::value)
        .receive([&](std::uint64_t count) { n = count; },
                 [&](caf::error& e) { FAIL("no answer: " << sys.render(e)); });
    return n;
  };
  CHECK(snapshots_run() == 0);
  {
    auto sink = actors::checkpoint_sink_for(sys)(checkpoint::WriteOptions{root, 3, false});
    REQUIRE(sink);
    CHECK(std::string(sink->kind()) == "actor");
    sink->buffer().step = 3;
    sink->buffer().params = {1.0f, 2.0f};
    sink->buffer().adam_m = {0.0f, 0.0f};
    sink->buffer().adam_v = {0.0f, 0.0f};
    sink->submit(/*fail_midway=*/false);
    sink->wait();
    const auto outcomes = sink->take_outcomes();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].step == 3);
  }
  CHECK(snapshots_run() == 1);
  self->send_exit(writer_handle, caf::exit_reason::user_shutdown);
  std::filesystem::remove_all(root);
}

TEST_CASE("public actors: the coordinator through coordinator_actor", "[actors][interfaces]") {
  node_system_config cfg;
  caf::actor_system sys{cfg};
  actors::coordinator_config cc;
  cc.log = false;
  cc.settings.secret = "interfaces-test-secret";  // a coordinator needs the job's secret
  auto spawned = actors::spawn_coordinator(sys, cc);
  INFO((spawned ? std::string() : sys.render(spawned.error())));
  REQUIRE(spawned);
  auto coordinator = caf::actor_cast<actors::coordinator_actor>(*spawned);
  caf::scoped_actor self{sys};
  std::uint64_t epoch = 99;
  std::size_t members = 99;
  self->request(coordinator, 5s, actors::members_atom::value)
      .receive(
          [&](const actors::epoch_started& e) {
            epoch = e.epoch;
            members = e.members.size();
          },
          [&](caf::error& e) { FAIL("no answer: " << sys.render(e)); });
  CHECK(epoch == 0);  // nobody joined yet
  CHECK(members == 0);
  self->send_exit(coordinator, caf::exit_reason::user_shutdown);
}

TEST_CASE("public actors: a data-preparation stage worker through piece_worker_actor",
          "[actors][interfaces]") {
  node_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor driver{sys};
  // A dedup worker of a node of several (no dedup state here): it passes pieces on.
  auto context = std::make_shared<actors::prepare_context>();
  auto worker = caf::actor_cast<actors::piece_worker_actor>(actors::spawn_stage_worker(
      sys, data::PrepareStage::dedup, context, caf::actor_cast<caf::actor>(driver)));
  // It says it is ready, with its stage.
  int ready_stage = -1;
  driver->receive([&](actors::prep_ready_atom, std::uint8_t stage) { ready_stage = stage; },
                  caf::after(5s) >> [] { FAIL("the worker did not say it is ready"); });
  CHECK(ready_stage == static_cast<int>(data::PrepareStage::dedup));
  auto piece = std::make_shared<data::Piece>();
  piece->file = 3;
  piece->number = 1;
  piece->documents.push_back({});
  piece->documents.back().text = "a document";
  driver->send(worker, actors::prep_work_atom::value, actors::piece_ptr(piece));
  actors::piece_ptr done;
  driver->receive([&](actors::prep_done_atom, actors::piece_ptr& out) { done = out; },
                  caf::after(5s) >> [] { FAIL("the worker did not answer"); });
  REQUIRE(done);
  CHECK(done->file == 3);
  CHECK(done->number == 1);
  REQUIRE(done->documents.size() == 1);
  CHECK(done->documents[0].text == "a document");
  driver->send_exit(worker, caf::exit_reason::user_shutdown);
}
