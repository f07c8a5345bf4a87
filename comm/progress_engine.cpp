// The progress loop (see progress_engine.hpp).
#include "comm/progress_engine.hpp"

#include <sched.h>

#include <chrono>
#include <cstdlib>

namespace dseek::comm {

namespace {
using Clock = std::chrono::steady_clock;
// Upper bound on one sleep with work in flight, in case an event is missed.
constexpr auto kBusySleep = std::chrono::microseconds(2000);
constexpr auto kIdleSleep = std::chrono::microseconds(100000);
}  // namespace

ProgressEngine::ProgressEngine(Transport& transport) : transport_(transport) {
  if (const char* v = std::getenv("DSEEK_COMM_SPIN_US")) spin_ = std::chrono::microseconds(std::atol(v));
  if (const char* v = std::getenv("DSEEK_COMM_YIELD_US")) yield_ = std::chrono::microseconds(std::atol(v));
  thread_ = std::thread([this] { run(); });
}

ProgressEngine::~ProgressEngine() { stop(); }

void ProgressEngine::stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  transport_.wake();
  thread_.join();
}

void ProgressEngine::submit(std::unique_ptr<Operation> op) {
  {
    std::lock_guard lock(mutex_);
    if (broken_) {
      op->work().fail(broken_->kind() == ErrorKind::shut_down ? ErrorKind::shut_down : ErrorKind::aborted,
                      std::string("communicator unusable: ") + broken_->what());
      return;
    }
    if (stop_) {
      op->work().fail(ErrorKind::shut_down, "communicator is shutting down");
      return;
    }
    submitted_.push_back(std::move(op));
  }
  transport_.wake();
}

void ProgressEngine::abort(ErrorKind kind, const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (!broken_) broken_.emplace(kind, reason);
    broken_flag_ = true;
  }
  transport_.wake();
}

std::optional<CommError> ProgressEngine::broken() const {
  std::lock_guard lock(mutex_);
  return broken_;
}

void ProgressEngine::fail_all(std::vector<std::unique_ptr<Operation>>& ops, ErrorKind kind, const std::string& why) {
  for (auto& op : ops) op->work().fail(kind, why);
  ops.clear();  // destroying an operation cancels its messages in flight
}

void ProgressEngine::run() {
  std::vector<std::unique_ptr<Operation>> active;
  auto last_activity = Clock::now();
  for (;;) {
    // Take new operations (and learn about abort/stop).
    std::deque<std::unique_ptr<Operation>> fresh;
    std::optional<CommError> broken;
    {
      std::lock_guard lock(mutex_);
      fresh.swap(submitted_);
      if (broken_flag_) broken = broken_;
    }
    if (broken) {
      for (auto& op : fresh) active.push_back(std::move(op));
      fresh.clear();
      fail_all(active, broken->kind(), broken->what());
    }
    if (stop_) {
      for (auto& op : fresh) active.push_back(std::move(op));
      fresh.clear();
      fail_all(active, ErrorKind::shut_down, "communicator destroyed while the operation was pending");
      std::lock_guard lock(mutex_);
      if (!broken_) broken_.emplace(ErrorKind::shut_down, "communicator destroyed");
      broken_flag_ = true;
      for (auto& op : submitted_) op->work().fail(ErrorKind::shut_down, "communicator destroyed");
      submitted_.clear();
      return;
    }
    bool activity = !fresh.empty();
    for (auto& op : fresh) {
      try {
        op->start();
        active.push_back(std::move(op));
      } catch (const CommError& e) {
        op->work().fail(e.kind(), e.what());
        abort(ErrorKind::aborted, std::string("an earlier operation failed: ") + op->work().name() + ": " + e.what());
      }
    }

    if (transport_.progress()) activity = true;

    const auto now = Clock::now();
    for (size_t i = 0; i < active.size();) {
      Operation& op = *active[i];
      bool done = false;
      try {
        done = op.advance();
        if (!done && now > op.work().deadline())
          throw CommError(ErrorKind::timeout,
                          "timed out (a peer is dead, hung, or did not issue the same operation)");
      } catch (const CommError& e) {
        op.work().fail(e.kind(), e.what());
        // The ranks no longer agree on what is in flight: the epoch is over.
        abort(ErrorKind::aborted, std::string("an earlier operation failed: ") + op.work().name() + ": " + e.what());
        done = true;
        activity = true;
        active.erase(active.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      if (done) {
        op.work().complete();
        activity = true;
        active.erase(active.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      ++i;
    }

    if (activity) {
      last_activity = Clock::now();
      continue;
    }
    const auto idle = Clock::now() - last_activity;
    if (active.empty()) {
      transport_.wait_for_activity(kIdleSleep);
    } else if (idle < spin_) {
      continue;
    } else if (idle < yield_) {
      sched_yield();
    } else {
      transport_.wait_for_activity(kBusySleep);
    }
  }
}

}  // namespace dseek::comm
