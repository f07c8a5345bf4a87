// The progress engine: it owns the transport's worker, starts submitted operations in
// issue order, drives all running ones concurrently, enforces their deadlines, and
// fails everything at once on abort().
//
// Progress runs in whichever thread holds the worker lock:
// - the caller that issues an operation starts it at once (no hand-off) when the lock is
//   free;
// - a caller that waits on a Work drives progress itself (WorkDriver): it polls the
//   network directly and sees its completion without a thread switch;
// - the progress thread drives only while nobody waits (compute overlapping
//   communication), and sleeps while a caller drives.
// Whoever drives and finds nothing to do spins briefly, then yields, then sleeps on the
// transport's event fd, so an idle communicator costs no CPU. When this host runs more
// ranks than it has cores, it yields at once instead of spinning (a spinning rank takes
// the core from the peer it is waiting for). When it runs at least as many ranks as cores,
// submit() does not wake the thread (the woken thread would preempt a rank: 4 KiB at 2
// ranks on 2 cores took 4 or 20 us from run to run with the wake-up, 3-6 us without; it
// still wakes on network events).
//
// Knobs (environment, for measurements): DSEEK_COMM_SPIN_US, DSEEK_COMM_YIELD_US (see
// below), DSEEK_COMM_CALLER_DRIVES=0 (only the thread drives: the old hand-off),
// DSEEK_COMM_WAKE_ON_SUBMIT=0.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/operation.hpp"
#include "comm/staging_pool.hpp"
#include "comm/transport.hpp"
#include "comm/work.hpp"

namespace dseek::comm {

class ProgressEngine final : public WorkDriver {
 public:
  explicit ProgressEngine(Transport& transport);
  ~ProgressEngine() override;  // fails what is left with ErrorKind::shut_down, joins the thread
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  // Thread-safe. Once the engine is broken (aborted or an operation failed) the
  // operation fails at once without being started.
  void submit(std::unique_ptr<Operation> op);
  // Thread-safe: every pending and future operation fails with `kind`.
  void abort(ErrorKind kind, const std::string& reason);
  // The error that broke the engine, if any.
  std::optional<CommError> broken() const;

  // Used by operations, under the worker lock.
  StagingPool& pool() { return pool_; }

  // More ranks than cores on this host: yield instead of spinning.
  void set_oversubscribed(bool oversubscribed) { oversubscribed_ = oversubscribed; }
  // No core left over for the progress thread (this host runs at least as many ranks as
  // cores): submit() does not wake it, since it would run on a core a rank needs.
  void set_no_spare_core(bool none) { no_spare_core_ = none; }
  // False (DSEEK_COMM_CALLER_DRIVES=0): only the progress thread drives (the old hand-off;
  // kept for comparison).
  bool caller_drives() const { return caller_drives_; }

  // Fails what is left, stops the thread and waits for every driving caller to leave;
  // the transport is never touched again afterwards. Idempotent.
  void stop();

  // WorkDriver: a waiting caller drives progress (thread-safe).
  void drive(const WorkState& state, std::chrono::steady_clock::time_point until) override;
  void poke() override;

 private:
  void run();
  // One round of progress: start submitted operations, progress the transport, advance
  // the running operations, enforce deadlines. Needs worker_mutex_. True on activity.
  bool poll_locked();
  // Whether anything is running or queued (under worker_mutex_).
  bool busy_locked();
  void update_has_work_locked();
  // Destroy the operations, then fail their Works: a waiter frees the buffers an
  // operation moves once its Work fails, so its messages must have ended before.
  void fail_all(std::vector<std::unique_ptr<Operation>>& ops, ErrorKind kind, const std::string& why);
  void fail_one(std::unique_ptr<Operation> op, ErrorKind kind, const std::string& why);
  // Fails every pending and queued operation and marks the engine stopped; the caller
  // holds worker_mutex_. Idempotent.
  void fail_remaining_and_stop();
  std::chrono::microseconds spin_for(bool caller) const;

  Transport& transport_;
  StagingPool pool_;
  mutable std::mutex mutex_;  // submitted_, broken_
  std::deque<std::unique_ptr<Operation>> submitted_;
  std::optional<CommError> broken_;
  std::atomic<bool> broken_flag_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> stop_done_{false};
  std::atomic<bool> oversubscribed_{false};
  std::atomic<bool> no_spare_core_{false};

  // The worker lock: the transport and the running operations belong to its holder.
  std::mutex worker_mutex_;
  std::vector<std::unique_ptr<Operation>> active_;
  bool stopped_ = false;  // the transport is not to be touched again
  bool memory_polling_ = false;  // a running operation polls shared memory (short sleeps only)

  // Callers inside drive(); the progress thread stands aside while there are any.
  std::mutex waiters_mutex_;
  std::condition_variable waiters_cv_;
  std::atomic<int> waiters_{0};
  std::atomic<bool> thread_sleeping_{false};
  std::atomic<bool> thread_parked_{false};
  std::atomic<bool> has_work_{false};  // operations running or queued (written under mutex_)

  // After the last progress: busy-poll spin_ (lowest latency), then poll with
  // sched_yield until yield_ (other ranks on the same core run), then sleep on the event
  // fd. DSEEK_COMM_SPIN_US / DSEEK_COMM_YIELD_US override them (microseconds).
  std::chrono::microseconds spin_{50};
  std::chrono::microseconds yield_{500};
  bool caller_drives_ = true;
  bool wake_on_submit_ = true;
  std::thread thread_;
};

}  // namespace dseek::comm
