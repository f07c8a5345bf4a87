// Crash requests (crash_atom) are obeyed only where crash faults are allowed: a node
// allows them only when its job configures a crash_actor fault (crash_requests_of),
// since anyone connected to one of a node's ports can reach its registered actors
// (issue 28, finding 2). Elsewhere the request is said and ignored. The policy is each
// actor's, given at its spawn: two in one actor system can differ.
#include <catch2/catch.hpp>

#include <chrono>

#include <caf/all.hpp>

#include "actors/faults/crash_request.hpp"
#include "actors/message_types.hpp"
#include "actors/node/health_monitor.hpp"
#include "runtime/config/load.hpp"

using dseek::actors::crash_requests;

TEST_CASE("crash requests: ignored unless crash faults are allowed", "[actors][faults]") {
  CHECK_NOTHROW(dseek::actors::crash_now("health_monitor", crash_requests::ignored));
  CHECK_THROWS_WITH(dseek::actors::crash_now("health_monitor", crash_requests::obeyed),
                    Catch::Contains("injected fault: crash_actor health_monitor"));
}

TEST_CASE("crash requests: a job obeys them only when it injects crash_actor faults",
          "[actors][faults]") {
  const auto plain = dseek::config::load_config_text("", "plain.toml", {});
  CHECK(dseek::actors::crash_requests_of(plain) == crash_requests::ignored);
  const auto crashing = dseek::config::load_config_text(
      "[[faults]]\nkind = \"crash_actor\"\nactor = \"health_monitor\"\nnode = 0\nstep = 5\n",
      "crashing.toml", {});
  CHECK(dseek::actors::crash_requests_of(crashing) == crash_requests::obeyed);
}

TEST_CASE("crash requests: two actors of one system keep their own policy", "[actors][faults]") {
  caf::actor_system_config cfg;
  dseek::actors::register_message_types(cfg);
  caf::actor_system sys{cfg};
  auto obeying = dseek::actors::spawn_health_monitor(sys, {}, crash_requests::obeyed);
  auto ignoring = dseek::actors::spawn_health_monitor(sys, {}, crash_requests::ignored);
  caf::scoped_actor self{sys};
  self->monitor(obeying);
  self->monitor(ignoring);
  self->send(obeying, dseek::actors::crash_atom::value);
  self->send(ignoring, dseek::actors::crash_atom::value);
  // The obeying one goes down with the injected crash, the other not.
  caf::actor_addr first_down;
  self->receive([&](const caf::down_msg& down) { first_down = down.source; },
                caf::after(std::chrono::seconds(5)) >> [] {});
  CHECK(first_down == obeying.address());
  bool ignoring_down = false;
  self->receive([&](const caf::down_msg&) { ignoring_down = true; },
                caf::after(std::chrono::milliseconds(200)) >> [] {});
  CHECK_FALSE(ignoring_down);
  // ... and still answers.
  bool answered = false;
  self->request(ignoring, std::chrono::seconds(5), dseek::actors::crash_atom::value)
      .receive([&] { answered = true; }, [&](const caf::error&) {});
  CHECK(answered);
  self->send_exit(ignoring, caf::exit_reason::user_shutdown);
}
