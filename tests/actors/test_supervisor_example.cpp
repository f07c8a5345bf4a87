// The embedding example (apps/examples/supervisor_example.cpp) runs and exits 0.
#include <catch2/catch.hpp>

#include "support/process.hpp"

TEST_CASE("the supervisor example embeds a supervisor in a plain CAF program",
          "[actors][supervision][example]") {
  auto r = dseek::testing::run_process({DSEEK_SUPERVISOR_EXAMPLE}, std::chrono::seconds(30));
  INFO(r.output);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("restarted") != std::string::npos);
  CHECK(r.output.find("supervisor shut down") != std::string::npos);
  CHECK(r.output.find("ok") != std::string::npos);
}
