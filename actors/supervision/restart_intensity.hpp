// Restart intensity of a supervisor: at most `max_restarts` restarts within a
// sliding window of `period`; one more and the supervisor gives up (OTP's
// MaxR / MaxT). Pure logic, no actors: the supervisor feeds it time points.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>

namespace dseek::actors {

class restart_intensity {
public:
  using clock = std::chrono::steady_clock;

  // max_restarts = 0 means "never restart" (the first restart gives up).
  restart_intensity(std::size_t max_restarts, clock::duration period);

  // Records a restart at `now`. Returns true if it is allowed, false if it is
  // restart number max_restarts + 1 inside the window (now - period, now]:
  // the supervisor must give up. Time points must not go backwards.
  bool record(clock::time_point now);

  // Restarts recorded inside the window (now - period, now].
  std::size_t count(clock::time_point now);

  void reset() { times_.clear(); }

private:
  void expire(clock::time_point now);

  std::size_t max_restarts_;
  clock::duration period_;
  std::deque<clock::time_point> times_;
};

} // namespace dseek::actors
