// The progress thread: it owns the transport's worker, starts submitted operations in
// issue order, drives all running ones concurrently, enforces their deadlines, and
// fails everything at once on abort(). Between bursts of work it spins briefly, then
// yields, then sleeps on the transport's event fd, so ranks that outnumber cores still
// progress and an idle communicator costs no CPU.
#pragma once

#include <atomic>
#include <chrono>
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

namespace dseek::comm {

class ProgressEngine {
 public:
  explicit ProgressEngine(Transport& transport);
  ~ProgressEngine();  // fails what is left with ErrorKind::shut_down, joins the thread
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  // Thread-safe. Once the engine is broken (aborted or an operation failed) the
  // operation fails at once without being started.
  void submit(std::unique_ptr<Operation> op);
  // Thread-safe: every pending and future operation fails with `kind`.
  void abort(ErrorKind kind, const std::string& reason);
  // The error that broke the engine, if any.
  std::optional<CommError> broken() const;

  // Owned by the progress thread; operations use it from there.
  StagingPool& pool() { return pool_; }

  // Stops the thread after failing what is left; the transport is free afterwards.
  void stop();

 private:
  void run();
  void fail_all(std::vector<std::unique_ptr<Operation>>& ops, ErrorKind kind, const std::string& why);

  Transport& transport_;
  StagingPool pool_;
  mutable std::mutex mutex_;
  std::deque<std::unique_ptr<Operation>> submitted_;
  std::optional<CommError> broken_;
  std::atomic<bool> broken_flag_{false};
  std::atomic<bool> stop_{false};
  // After the last progress: busy-poll spin_ (lowest latency), then poll with
  // sched_yield until yield_ (other ranks on the same core run), then sleep on the event
  // fd. DSEEK_COMM_SPIN_US / DSEEK_COMM_YIELD_US override them (microseconds).
  std::chrono::microseconds spin_{30};
  std::chrono::microseconds yield_{300};
  std::thread thread_;
};

}  // namespace dseek::comm
