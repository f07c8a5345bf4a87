#include "actors/supervision/restart_intensity.hpp"

namespace dseek::actors {

restart_intensity::restart_intensity(std::size_t max_restarts, clock::duration period)
    : max_restarts_(max_restarts), period_(period) {}

void restart_intensity::expire(clock::time_point now) {
  // A restart at t is inside the window while now - t < period.
  while (!times_.empty() && now - times_.front() >= period_)
    times_.pop_front();
}

bool restart_intensity::record(clock::time_point now) {
  expire(now);
  times_.push_back(now);
  return times_.size() <= max_restarts_;
}

std::size_t restart_intensity::count(clock::time_point now) {
  expire(now);
  return times_.size();
}

} // namespace dseek::actors
