// One Catch2 check for a multi-process scenario: every rank exited 0 in time.
#pragma once

#include <catch2/catch.hpp>

#include "comm_test_support.hpp"

namespace dseek::comm::test {

inline void expect_scenario(int n, const std::string& scenario, const std::vector<std::string>& extra = {}) {
  const RanksResult r = run_ranks(n, scenario, extra);
  INFO(r.report());
  CHECK(r.all_ok());
}

}  // namespace dseek::comm::test
