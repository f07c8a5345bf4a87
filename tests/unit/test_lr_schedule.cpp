// The learning-rate schedule: linear warm-up to the peak, then cosine decay to min_lr.
#include <catch2/catch.hpp>

#include <cmath>

#include "runtime/optim/lr_schedule.hpp"

using dseek::optim::LrSchedule;

TEST_CASE("warm-up rises linearly to the peak", "[optim][schedule]") {
  const LrSchedule s{.peak = 1e-3, .min = 1e-4, .warmup_steps = 10, .total_steps = 110};
  CHECK(s.at(0) == Approx(1e-4));   // (0 + 1) / 10 of the peak
  CHECK(s.at(4) == Approx(5e-4));
  CHECK(s.at(9) == Approx(1e-3));
}

TEST_CASE("cosine decay goes from the peak to min_lr at the last step", "[optim][schedule]") {
  const LrSchedule s{.peak = 1e-3, .min = 1e-4, .warmup_steps = 10, .total_steps = 110};
  CHECK(s.at(10) == Approx(1e-3));
  CHECK(s.at(60) == Approx(1e-4 + 0.5 * 9e-4));  // half way: cos(pi/2) = 0
  CHECK(s.at(110) == Approx(1e-4));
  CHECK(s.at(500) == Approx(1e-4));  // past the end it stays at the floor
  for (int64_t step = 11; step < 110; ++step) CHECK(s.at(step) < s.at(step - 1));
}

TEST_CASE("no warm-up starts at the peak", "[optim][schedule]") {
  const LrSchedule s{.peak = 2e-3, .min = 0.0, .warmup_steps = 0, .total_steps = 4};
  CHECK(s.at(0) == Approx(2e-3));
  CHECK(s.at(2) == Approx(1e-3));
}
