#include <catch2/catch.hpp>

#include "actors/supervision/restart_intensity.hpp"

using dseek::actors::restart_intensity;
using namespace std::chrono_literals;

TEST_CASE("restart intensity allows max_restarts within the period and refuses one more",
          "[actors][supervision]") {
  restart_intensity ri{3, 5s};
  auto t0 = restart_intensity::clock::time_point{} + 100s;
  CHECK(ri.record(t0));
  CHECK(ri.record(t0 + 1s));
  CHECK(ri.record(t0 + 2s));
  CHECK(ri.count(t0 + 2s) == 3);
  CHECK_FALSE(ri.record(t0 + 3s));
  CHECK(ri.count(t0 + 3s) == 4);
}

TEST_CASE("restart intensity forgets restarts older than the period",
          "[actors][supervision]") {
  restart_intensity ri{2, 5s};
  auto t0 = restart_intensity::clock::time_point{} + 100s;
  CHECK(ri.record(t0));
  CHECK(ri.record(t0 + 4s));
  // t0 leaves the window at t0 + 5s: (now - period, now].
  CHECK(ri.count(t0 + 5s) == 1);
  CHECK(ri.record(t0 + 5s));
  CHECK_FALSE(ri.record(t0 + 6s)); // t0+4, t0+5, t0+6
  // A slow, steady trickle never trips it.
  restart_intensity slow{1, 1s};
  for (int i = 0; i < 100; ++i)
    CHECK(slow.record(t0 + std::chrono::seconds(i)));
}

TEST_CASE("restart intensity zero refuses the first restart", "[actors][supervision]") {
  restart_intensity ri{0, 1s};
  CHECK_FALSE(ri.record(restart_intensity::clock::now()));
  ri.reset();
  CHECK(ri.count(restart_intensity::clock::now()) == 0);
}
