// A plain CAF 0.17 program that embeds dseek's actors: a dseek supervisor
// (actors/supervision/supervisor.hpp) runs dseek's health monitor
// (actors/node/health_monitor.hpp) next to an actor of this program, one_for_one.
//
//   1. The program plays a worker: it reports three steps to the health monitor
//      and asks it which step it saw last.
//   2. It stops reporting. The monitor notices the stall and says so through the
//      actor registered as the node's metrics exporter (here, this program's
//      event printer).
//   3. The program's own actor crashes; the supervisor restarts it and reports
//      the restart. one_for_one: the health monitor is not touched and still
//      knows step 3.
//   4. The tree shuts down in reverse start order and the program exits 0.
//
// Prints what happens; exits 1 on any surprise.
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/message_types.hpp"
#include "actors/node/health_monitor.hpp"
#include "actors/node/node_messages.hpp"
#include "actors/node/node_registry.hpp"
#include "actors/supervision/supervisor.hpp"

namespace {

using namespace dseek::actors;
using namespace std::chrono_literals;
using crash_atom = caf::atom_constant<caf::atom("crash")>;

// One call announces every dseek message type.
class config : public caf::actor_system_config {
public:
  config() { register_message_types(*this); }
};

// This program's own actor: answers pings, and fails when told to crash.
caf::behavior pinger(caf::event_based_actor* self) {
  return {
      [](caf::get_atom) { return std::string{"pong"}; },
      [self](crash_atom) { self->quit(caf::make_error(caf::sec::runtime_error)); },
  };
}

// The node's actors send their events (node_event) to whatever is registered
// under names::metrics_exporter; in dseek-node that writes events.jsonl. This
// stand-in prints them and passes them on to `main`.
caf::behavior event_printer(caf::event_based_actor* self, caf::actor main) {
  names::register_as(self, names::metrics_exporter);
  return {
      [main](const node_event& e) {
        std::cout << "event: " << e.event << " " << e.fields_json << "\n";
        caf::anon_send(main, e);
      },
  };
}

int run(caf::actor_system& sys) {
  caf::scoped_actor self{sys};
  const auto main = caf::actor_cast<caf::actor>(self);
  constexpr auto limit = 5s;

  // The tree. Children start in this order and stop in reverse; the listener
  // (this program) hears of every restart.
  supervisor_config cfg;
  cfg.name = "example";
  cfg.strategy = restart_strategy::one_for_one;
  cfg.max_restarts = 3;
  cfg.restart_period = 10s;
  cfg.listener = main;
  cfg.children.push_back(child_spec{
      "events", [main](caf::actor_system& s) { return s.spawn(event_printer, main); },
      restart_policy::permanent, 1s});
  health_settings health;
  health.min_stall = 300ms;  // dseek-node waits 10 s before it calls a worker stalled
  health.check_interval = 50ms;
  cfg.children.push_back(child_spec{
      "health_monitor", [health](caf::actor_system& s) { return spawn_health_monitor(s, health); },
      restart_policy::permanent, 1s});
  cfg.children.push_back(child_spec{"pinger",
                                    [](caf::actor_system& s) { return s.spawn(pinger); },
                                    restart_policy::permanent, 1s});
  auto sup = spawn_supervisor(sys, std::move(cfg));

  // The supervisor's children by name (a restarted child has a new handle).
  auto child = [&](const std::string& name) -> caf::actor {
    caf::actor out;
    self->request(sup, limit, which_children_atom::value)
        .receive(
            [&](std::vector<child_info>& kids) {
              for (auto& k : kids)
                if (k.name == name)
                  out = k.handle;
            },
            [&](caf::error& e) { std::cout << "error: " << sys.render(e) << "\n"; });
    return out;
  };
  auto ask = [&](const caf::actor& who, auto&& on_reply) {
    self->request(who, limit, caf::get_atom::value)
        .receive(on_reply, [&](caf::error& e) { std::cout << "error: " << sys.render(e) << "\n"; });
  };

  // 1. A worker reports each finished step (step_progress) to the health monitor.
  auto monitor = child("health_monitor");
  if (!monitor)
    return 1;
  for (std::int64_t step = 1; step <= 3; ++step)
    self->send(monitor, step_progress{step, 0.0});
  std::int64_t last = -1;
  ask(monitor, [&](std::int64_t step) { last = step; });
  std::cout << "health monitor: last step " << last << "\n";
  if (last != 3)
    return 1;

  // 2. No step for longer than health.min_stall: the monitor reports a stall.
  bool stalled = false;
  self->receive([&](node_event& e) { stalled = e.event == "worker_stalled"; },
                caf::after(limit) >> [] {});
  if (!stalled)
    return 1;

  // 3. The program's own actor crashes and comes back under a new handle.
  auto first = child("pinger");
  bool pong = false;
  ask(first, [&](std::string& s) { pong = s == "pong"; });
  if (!first || !pong)
    return 1;
  self->send(first, crash_atom::value);
  bool restarted = false;
  self->receive(
      [&](child_restarted& ev) {
        std::cout << "event: " << ev.supervisor << "/" << ev.child << " restarted ("
                  << sys.render(ev.reason) << "), restarts=" << ev.restarts << "\n";
        restarted = ev.child == "pinger";
      },
      caf::after(limit) >> [] {});
  auto second = child("pinger");
  pong = false;
  if (second)
    ask(second, [&](std::string& s) { pong = s == "pong"; });
  if (!restarted || !second || second == first || !pong)
    return 1;
  last = -1;
  ask(monitor, [&](std::int64_t step) { last = step; });
  const bool untouched = child("health_monitor") == monitor && last == 3;
  std::cout << "health monitor: last step " << last
            << (untouched ? " (untouched by the restart)" : " (restarted too)") << "\n";
  if (!untouched)
    return 1;

  // 4. Orderly shutdown: pinger, health monitor, event printer.
  bool stopped = false;
  self->request(sup, limit, shutdown_atom::value)
      .receive([&](caf::ok_atom) { stopped = true; },
               [&](caf::error& e) { std::cout << "error: " << sys.render(e) << "\n"; });
  std::cout << (stopped ? "supervisor shut down\n" : "shutdown failed\n");
  return stopped ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  config cfg;
  if (auto err = cfg.parse(argc, argv)) {
    std::cerr << "bad arguments\n";
    return 2;
  }
  int rc = 1;
  {
    caf::actor_system sys{cfg};
    rc = run(sys);
  } // the system's destructor waits for every actor: the tree must be gone
  std::cout << (rc == 0 ? "ok\n" : "FAILED\n");
  return rc;
}
