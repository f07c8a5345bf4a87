// The handle every asynchronous operation returns. Compute overlaps communication by
// issuing an operation, working, then calling wait(). Every wait is bounded: wait()
// without an argument returns by the operation's own deadline (CommOptions::op_timeout).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "comm/types.hpp"

namespace dseek::comm {

class WorkState;

// Something that can move operations on from the waiting thread itself (the UCX progress
// engine): a wait then polls the network directly instead of sleeping until another
// thread hands the completion over, which costs tens of microseconds per call.
class WorkDriver {
 public:
  virtual ~WorkDriver() = default;
  // Drives progress until `state` finished or `until`; it may return early (the caller
  // then waits on the state's condition variable until `until`).
  virtual void drive(const WorkState& state, std::chrono::steady_clock::time_point until) = 0;
  // One non-blocking progress attempt (Work::test()).
  virtual void poke() = 0;
};

// Shared between the handle (user thread) and the operation (progress thread).
class WorkState {
 public:
  // `observer` (may be null) is told when the operation finishes.
  explicit WorkState(std::string name, std::chrono::steady_clock::time_point deadline,
                     std::shared_ptr<const WorkObserver> observer = nullptr)
      : name_(std::move(name)), deadline_(deadline), issued_(std::chrono::steady_clock::now()),
        observer_(std::move(observer)) {}

  const std::string& name() const { return name_; }
  std::chrono::steady_clock::time_point deadline() const { return deadline_; }

  // Called once, from the progress thread.
  void complete();
  void fail(ErrorKind kind, const std::string& why);

  bool finished() const { return done_.load(std::memory_order_acquire); }
  // Set once, before the handle is given out: waits drive progress through it.
  void set_driver(std::shared_ptr<WorkDriver> driver) { driver_ = std::move(driver); }
  void poke() const {
    if (driver_ && !finished()) driver_->poke();
  }
  // Waits until finished or `until`; true when finished.
  bool wait_until(std::chrono::steady_clock::time_point until) const;
  // Throws the operation's CommError if it failed; nothing otherwise.
  void rethrow() const;
  std::optional<CommError> error() const;
  std::chrono::nanoseconds duration() const;

  void add_sent(uint64_t bytes) { sent_.fetch_add(bytes, std::memory_order_relaxed); }
  void add_received(uint64_t bytes) { received_.fetch_add(bytes, std::memory_order_relaxed); }
  uint64_t bytes_sent() const { return sent_.load(std::memory_order_relaxed); }
  uint64_t bytes_received() const { return received_.load(std::memory_order_relaxed); }

 private:
  // Tells the observer, once the state is final (complete() and fail()).
  void observe_end() const {
    if (observer_) (*observer_)(*this, duration());
  }

  std::string name_;
  std::chrono::steady_clock::time_point deadline_;
  std::chrono::steady_clock::time_point issued_;
  std::chrono::steady_clock::time_point finished_at_{};
  std::shared_ptr<const WorkObserver> observer_;
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  bool finished_ = false;
  std::atomic<bool> done_{false};  // finished_, readable without the mutex
  std::optional<CommError> error_;
  std::shared_ptr<WorkDriver> driver_;
  // Written by the progress thread, readable any time.
  std::atomic<uint64_t> sent_{0};
  std::atomic<uint64_t> received_{0};
};

class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<WorkState> state) : state_(std::move(state)) {}

  // True when the operation has finished successfully; throws CommError when it failed;
  // false while it is still running. Never blocks.
  bool test() const;
  // Waits at most `timeout`: true when done, throws CommError when it failed, false when
  // the timeout passed first (the operation keeps running and can be waited on again).
  bool wait(std::chrono::milliseconds timeout) const;
  // Waits until the operation is done or its own deadline has passed (then it has failed
  // with ErrorKind::timeout); throws CommError on failure.
  void wait() const;

  bool valid() const { return state_ != nullptr; }
  const std::string& name() const;
  // Bytes this operation sent to and received from peers (final once it finished).
  uint64_t bytes_sent() const;
  uint64_t bytes_received() const;
  // Time from issue to completion (0 while running).
  std::chrono::nanoseconds duration() const;

 private:
  std::shared_ptr<WorkState> state_;
};

}  // namespace dseek::comm
