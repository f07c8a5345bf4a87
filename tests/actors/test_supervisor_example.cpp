// The embedding example (apps/examples/supervisor_example.cpp) runs and exits 0: a dseek
// supervisor in a plain CAF program, with dseek's health monitor next to the program's
// own actor.
#include <catch2/catch.hpp>

#include "support/process.hpp"

TEST_CASE("the supervisor example embeds a supervisor in a plain CAF program",
          "[actors][supervision][example]") {
  auto r = dseek::testing::run_process({DSEEK_SUPERVISOR_EXAMPLE}, std::chrono::seconds(30));
  INFO(r.output);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  auto has = [&](const char* text) { return r.output.find(text) != std::string::npos; };
  // The health monitor heard the steps, then saw them stop.
  CHECK(has("health monitor: last step 3\n"));
  CHECK(has("event: worker_stalled {\"last_step\":3,"));
  // The program's own actor crashed and was restarted; one_for_one left the monitor be.
  CHECK(has("example/pinger restarted"));
  CHECK(has("health monitor: last step 3 (untouched by the restart)"));
  CHECK(has("supervisor shut down"));
  CHECK(has("\nok\n"));
}
