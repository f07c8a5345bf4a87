// The progress engine (see progress_engine.hpp).
#include "comm/progress_engine.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace dseek::comm {

namespace {
using Clock = std::chrono::steady_clock;
// Upper bound on one sleep with work in flight, in case an event is missed.
constexpr auto kBusySleep = std::chrono::microseconds(2000);
constexpr auto kIdleSleep = std::chrono::microseconds(100000);
// The same while an operation polls shared memory: a peer's flag raises no network event.
constexpr auto kMemoryPollSleep = std::chrono::microseconds(50);
// Upper bound on the progress thread's stand-aside while a caller drives (and after one
// left with nothing left to do).
constexpr auto kStandAside = std::chrono::milliseconds(20);
}  // namespace

ProgressEngine::ProgressEngine(Transport& transport) : transport_(transport) {
  if (const char* v = std::getenv("DSEEK_COMM_SPIN_US")) spin_ = std::chrono::microseconds(std::atol(v));
  if (const char* v = std::getenv("DSEEK_COMM_YIELD_US")) yield_ = std::chrono::microseconds(std::atol(v));
  if (const char* v = std::getenv("DSEEK_COMM_CALLER_DRIVES")) caller_drives_ = std::atol(v) != 0;
  if (const char* v = std::getenv("DSEEK_COMM_WAKE_ON_SUBMIT")) wake_on_submit_ = std::atol(v) != 0;
  thread_ = std::thread([this] { run(); });
}

ProgressEngine::~ProgressEngine() { stop(); }

void ProgressEngine::stop() {
  // Once stopped, the transport may be gone (a Work handle can keep the engine alive
  // past its world): never touch it again.
  if (stop_done_.exchange(true)) return;
  {
    std::lock_guard lock(waiters_mutex_);
    stop_ = true;
  }
  waiters_cv_.notify_all();
  transport_.wake();
  if (thread_.joinable()) thread_.join();
  {
    // The thread failed everything under the worker lock; make sure (also when it was
    // already gone) and wait for the callers still inside drive() to leave.
    std::lock_guard lock(worker_mutex_);
    fail_remaining_and_stop();
  }
  std::unique_lock lock(waiters_mutex_);
  while (waiters_.load() != 0) {
    lock.unlock();
    transport_.wake();
    lock.lock();
    waiters_cv_.wait_for(lock, std::chrono::milliseconds(1));
  }
}

void ProgressEngine::submit(std::unique_ptr<Operation> op) {
  // Not for an operation that polls shared memory either: it moves only as fast as the
  // peers' CPUs, and the woken thread would take a core from one of them.
  const bool wake_thread = wake_on_submit_ && !no_spare_core_.load(std::memory_order_relaxed) && !op->polls_memory();
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
    has_work_ = true;
  }
  // Start it from this thread when nobody else is driving (no hand-off).
  bool started = false;
  {
    std::unique_lock lock(worker_mutex_, std::defer_lock);
    if (caller_drives_ && lock.try_lock() && !stopped_) {
      poll_locked();
      started = true;
    }
  }
  // Someone else drives: make sure it sees the new operation (it may sleep on the fd).
  if (!started) transport_.wake();
  // Nobody waits: get the thread going, so the operation also moves while the caller
  // computes. Not when ranks outnumber cores: the woken thread would preempt a peer (the
  // thread still wakes on network events, or within kStandAside after standing aside).
  if (wake_thread && !oversubscribed_.load(std::memory_order_relaxed) && waiters_.load() == 0 && has_work_.load()) {
    if (thread_parked_.load()) {
      { std::lock_guard lock(waiters_mutex_); }
      waiters_cv_.notify_one();
    } else if (started && thread_sleeping_.load()) {
      transport_.wake();
    }
  }
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
  std::vector<std::shared_ptr<WorkState>> works;
  for (auto& op : ops) works.push_back(op->work_ptr());
  ops.clear();  // first: destroying an operation ends its messages in flight
  for (auto& work : works) work->fail(kind, why);
}

void ProgressEngine::fail_one(std::unique_ptr<Operation> op, ErrorKind kind, const std::string& why) {
  const std::shared_ptr<WorkState> work = op->work_ptr();
  op.reset();  // its buffers are the caller's again only once its messages have ended
  work->fail(kind, why);
}

std::chrono::microseconds ProgressEngine::spin_for(bool /*caller*/) const {
  return oversubscribed_.load(std::memory_order_relaxed) ? std::chrono::microseconds(0) : spin_;
}

bool ProgressEngine::poll_locked() {
  // Take new operations (and learn about abort).
  std::deque<std::unique_ptr<Operation>> fresh;
  std::optional<CommError> broken;
  {
    std::lock_guard lock(mutex_);
    fresh.swap(submitted_);
    if (broken_flag_) broken = broken_;
  }
  if (broken) {
    for (auto& op : fresh) active_.push_back(std::move(op));
    fresh.clear();
    const bool any = !active_.empty();
    fail_all(active_, broken->kind(), broken->what());
    update_has_work_locked();
    return any;
  }
  bool activity = !fresh.empty();
  for (auto& op : fresh) {
    try {
      op->start();
      active_.push_back(std::move(op));
    } catch (const CommError& e) {
      const std::string name = op->work().name();
      fail_one(std::move(op), e.kind(), e.what());
      abort(ErrorKind::aborted, std::string("an earlier operation failed: ") + name + ": " + e.what());
    }
  }

  if (transport_.progress()) activity = true;

  const auto now = Clock::now();
  for (size_t i = 0; i < active_.size();) {
    Operation& op = *active_[i];
    bool done = false;
    try {
      done = op.advance();
      if (!done && now > op.work().deadline())
        throw CommError(ErrorKind::timeout, "timed out (a peer is dead, hung, or did not issue the same operation)");
    } catch (const CommError& e) {
      const std::string name = op.work().name();
      std::unique_ptr<Operation> failed = std::move(active_[i]);
      active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
      fail_one(std::move(failed), e.kind(), e.what());
      // The ranks no longer agree on what is in flight: the epoch is over.
      abort(ErrorKind::aborted, std::string("an earlier operation failed: ") + name + ": " + e.what());
      activity = true;
      continue;
    }
    if (done) {
      op.work().complete();
      activity = true;
      active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    ++i;
  }
  memory_polling_ = std::any_of(active_.begin(), active_.end(), [](const auto& op) { return op->polls_memory(); });
  update_has_work_locked();
  return activity;
}

void ProgressEngine::update_has_work_locked() {
  std::lock_guard lock(mutex_);
  has_work_ = !active_.empty() || !submitted_.empty();
}

bool ProgressEngine::busy_locked() {
  if (!active_.empty()) return true;
  std::lock_guard lock(mutex_);
  return !submitted_.empty();
}

void ProgressEngine::poke() {
  std::unique_lock lock(worker_mutex_, std::try_to_lock);
  if (lock.owns_lock() && !stopped_) poll_locked();
}

void ProgressEngine::drive(const WorkState& state, Clock::time_point until) {
  {
    std::lock_guard lock(waiters_mutex_);
    if (stop_) return;
    waiters_.fetch_add(1);
  }
  auto last_activity = Clock::now();
  while (!state.finished() && !stop_.load(std::memory_order_relaxed)) {
    auto now = Clock::now();
    if (now >= until) break;
    bool activity = false;
    bool may_sleep = false;
    bool memory_polling = false;
    const auto idle = now - last_activity;
    {
      std::lock_guard lock(worker_mutex_);
      if (stopped_) break;
      activity = poll_locked();
      memory_polling = memory_polling_;
      if (state.finished()) break;
      if (!activity && idle >= yield_) may_sleep = transport_.arm();
    }
    if (activity) {
      last_activity = Clock::now();
      continue;
    }
    if (idle < spin_for(true)) continue;
    if (idle < yield_) {
      sched_yield();
      continue;
    }
    if (may_sleep) {
      now = Clock::now();
      if (now >= until) break;
      transport_.wait_for_activity(std::min<std::chrono::microseconds>(
          memory_polling ? kMemoryPollSleep : kBusySleep, std::chrono::duration_cast<std::chrono::microseconds>(until - now) + std::chrono::microseconds(1)));
    }
  }
  {
    std::lock_guard lock(waiters_mutex_);
    waiters_.fetch_sub(1);
  }
  // Hand over to the thread only when something is left to move (a needless wake-up
  // preempts a peer rank when ranks outnumber cores).
  if (has_work_.load()) waiters_cv_.notify_all();
}

void ProgressEngine::run() {
  auto last_activity = Clock::now();
  for (;;) {
    if (stop_) break;
    if (waiters_.load() > 0) {
      // A caller drives: stand aside until it leaves with work left (or a while passed:
      // then sleep on the network as usual, so idle-time messages still move).
      std::unique_lock lock(waiters_mutex_);
      thread_parked_ = true;
      waiters_cv_.wait_for(lock, kStandAside,
                           [&] { return stop_.load() || (waiters_.load() == 0 && has_work_.load()); });
      thread_parked_ = false;
      last_activity = Clock::now();
      continue;
    }
    bool activity = false;
    bool busy = false;
    bool may_sleep = false;
    bool memory_polling = false;
    const auto idle = Clock::now() - last_activity;
    {
      std::lock_guard lock(worker_mutex_);
      if (stopped_) break;
      activity = poll_locked();
      busy = busy_locked();
      memory_polling = memory_polling_;
      if (!activity && (!busy || idle >= yield_)) {
        may_sleep = transport_.arm();
        if (may_sleep) thread_sleeping_ = true;  // before unlocking: submit() sees it
      }
    }
    if (activity) {
      last_activity = Clock::now();
      continue;
    }
    if (may_sleep) {
      if (waiters_.load() == 0 && !stop_) transport_.wait_for_activity(!busy ? kIdleSleep : memory_polling ? kMemoryPollSleep : kBusySleep);
      thread_sleeping_ = false;
      continue;
    }
    if (busy && idle < spin_for(false)) continue;
    if (busy) sched_yield();
  }
  // Stopping: fail what is left (under the worker lock: a caller may still be polling).
  std::lock_guard lock(worker_mutex_);
  fail_remaining_and_stop();
}

void ProgressEngine::fail_remaining_and_stop() {
  if (stopped_) return;
  std::vector<std::unique_ptr<Operation>> left;
  left.swap(active_);
  {
    std::lock_guard queue_lock(mutex_);
    for (auto& op : submitted_) left.push_back(std::move(op));
    submitted_.clear();
    if (!broken_) broken_.emplace(ErrorKind::shut_down, "communicator destroyed");
    broken_flag_ = true;
  }
  fail_all(left, ErrorKind::shut_down, "communicator destroyed while the operation was pending");
  stopped_ = true;
}

}  // namespace dseek::comm
