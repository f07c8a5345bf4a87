// Communicators of an epoch that failed, torn down on the side: a failed one can take
// seconds to tear down (its transfers to a hung peer are given up after a bounded wait),
// and the next world is built meanwhile. The destructor waits for every teardown. Used
// by the epoch loop (epoch_loop.hpp).
#pragma once

#include <memory>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"

namespace dseek::actors {

class RetiredCommunicators {
 public:
  RetiredCommunicators() = default;
  RetiredCommunicators(const RetiredCommunicators&) = delete;
  RetiredCommunicators& operator=(const RetiredCommunicators&) = delete;
  ~RetiredCommunicators() {
    for (auto& thread : threads_) thread.join();
  }
  void retire(std::unique_ptr<comm::Communicator> communicator) {
    if (communicator)
      threads_.emplace_back([dead = std::move(communicator)]() mutable { dead.reset(); });
  }

 private:
  std::vector<std::thread> threads_;
};

}  // namespace dseek::actors
