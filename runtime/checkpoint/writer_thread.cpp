// Implementation of writer_thread.hpp.
#include "runtime/checkpoint/writer_thread.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <utility>

namespace dseek::checkpoint {

CheckpointWriter::CheckpointWriter(WriteOptions options, bool async)
    : options_(std::move(options)), async_(async) {
  if (async_) thread_ = std::thread([this] { run(); });
}

CheckpointWriter::~CheckpointWriter() {
  if (!async_) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool CheckpointWriter::busy() const {
  std::lock_guard lock(mutex_);
  return pending_;
}

int64_t CheckpointWriter::in_flight_step() const {
  std::lock_guard lock(mutex_);
  return snapshot_.step;
}

void CheckpointWriter::submit(bool fail_midway) {
  if (!async_) {
    WriteOutcome outcome = write_reporting(snapshot_, options_, fail_midway);
    std::lock_guard lock(mutex_);
    outcomes_.push_back(std::move(outcome));
    return;
  }
  {
    std::lock_guard lock(mutex_);
    pending_ = true;
    fail_midway_ = fail_midway;
  }
  wake_.notify_all();
}

void CheckpointWriter::wait() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return !pending_; });
}

std::vector<WriteOutcome> CheckpointWriter::take_outcomes() {
  std::lock_guard lock(mutex_);
  return std::exchange(outcomes_, {});
}

void CheckpointWriter::run() {
  // Training threads should win the CPU when they compete with the writer: the write
  // has until the next checkpoint is due, a step has no slack. On Linux a nice value is
  // per thread; failing to set it only costs speed.
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 10);
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return pending_ || stopping_; });
    if (pending_) {
      const bool fail = fail_midway_;
      lock.unlock();
      // The snapshot is ours while pending_.
      WriteOutcome outcome = write_reporting(snapshot_, options_, fail);
      lock.lock();
      outcomes_.push_back(std::move(outcome));
      pending_ = false;
      idle_.notify_all();
      continue;
    }
    if (stopping_) return;
  }
}

}  // namespace dseek::checkpoint
