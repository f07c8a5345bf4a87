// A plain CAF 0.17 program that embeds a dseek supervisor: one child that
// answers pings and can be told to crash. The child crashes once, the
// supervisor restarts it and reports it, then the program shuts the tree
// down in order and exits 0. Prints what happens; exits 1 on any surprise.
#include <chrono>
#include <iostream>
#include <string>

#include <caf/all.hpp>

#include "actors/message_types.hpp"
#include "actors/supervision/supervisor.hpp"

namespace {

using namespace dseek::actors;
using crash_atom = caf::atom_constant<caf::atom("crash")>;

class config : public caf::actor_system_config {
public:
  config() { register_message_types(*this); }
};

caf::behavior pinger(caf::event_based_actor* self) {
  return {
      [](caf::get_atom) { return std::string{"pong"}; },
      [self](crash_atom) { self->quit(caf::make_error(caf::sec::runtime_error)); },
  };
}

int run(caf::actor_system& sys) {
  caf::scoped_actor self{sys};
  constexpr auto limit = std::chrono::seconds(5);

  supervisor_config cfg;
  cfg.name = "example";
  cfg.strategy = restart_strategy::one_for_one;
  cfg.max_restarts = 3;
  cfg.restart_period = std::chrono::seconds(10);
  cfg.listener = caf::actor_cast<caf::actor>(self);
  cfg.children.push_back(child_spec{"pinger",
                                    [](caf::actor_system& s) { return s.spawn(pinger); },
                                    restart_policy::permanent, std::chrono::seconds(1)});
  auto sup = spawn_supervisor(sys, std::move(cfg));

  auto child = [&]() -> caf::actor {
    caf::actor out;
    self->request(sup, limit, which_children_atom::value)
        .receive([&](std::vector<child_info>& kids) {
                   for (auto& k : kids)
                     std::cout << "child " << k.name << " running=" << k.running
                               << " restarts=" << k.restarts << "\n";
                   if (!kids.empty())
                     out = kids.front().handle;
                 },
                 [&](caf::error& e) { std::cout << "error: " << sys.render(e) << "\n"; });
    return out;
  };
  auto ping = [&](const caf::actor& who) {
    bool ok = false;
    self->request(who, limit, caf::get_atom::value)
        .receive([&](std::string& s) { ok = s == "pong"; },
                 [&](caf::error& e) { std::cout << "error: " << sys.render(e) << "\n"; });
    return ok;
  };

  auto first = child();
  if (!first || !ping(first))
    return 1;
  self->send(first, crash_atom::value);
  bool restarted = false;
  self->receive(
      [&](child_restarted& ev) {
        std::cout << "event: " << ev.supervisor << "/" << ev.child << " restarted ("
                  << sys.render(ev.reason) << "), restarts=" << ev.restarts << "\n";
        restarted = true;
      },
      caf::after(limit) >> [] {});
  auto second = child();
  if (!restarted || !second || second == first || !ping(second))
    return 1;

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
