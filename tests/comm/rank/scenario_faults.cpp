// Fault scenarios. Each surviving rank must see its operation fail within the timeout,
// never hang; the test driver checks exit codes and timing.
//   kill_during_all_reduce: the last rank SIGKILLs itself with an all-reduce in flight.
//   abort_unblocks_wait:    rank 0 waits on an all-reduce rank 1 never joins; another
//                           thread calls abort(); the wait must end at once.
//   timeout:                as above without abort: the op's deadline must end it.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "rank/rank_env.hpp"

namespace dseek::comm::test {
namespace {

using Clock = std::chrono::steady_clock;

long ms_since(Clock::time_point t) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
}

const RegisterScenario kill_during_all_reduce("kill_during_all_reduce", [](RankEnv& env) {
  const int victim = env.size - 1;
  const size_t count = size_t{4} << 20;  // 16 MiB of f32: long enough to be mid-flight
  std::vector<float> buf(count, 1.0f);
  for (int iter = 0; iter < 1000; ++iter) {
    Work w = env.comm->all_reduce(buf.data(), count, DataType::f32, ReduceOp::sum);
    if (env.rank == victim && iter == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      ::kill(::getpid(), SIGKILL);
    }
    const auto start = Clock::now();
    try {
      w.wait();
      std::fill(buf.begin(), buf.end(), 1.0f);
    } catch (const CommError& e) {
      const long took = ms_since(start);
      std::printf("rank %d: failed as expected after %ld ms (%s): %s\n", env.rank, took, to_string(e.kind()), e.what());
      require(took <= env.options.op_timeout.count() + 2000, "failure took longer than the timeout");
      // The communicator is unusable now: the next operation fails at once.
      const auto t2 = Clock::now();
      bool failed = false;
      try {
        env.comm->barrier().wait(std::chrono::seconds(5));
      } catch (const CommError&) {
        failed = true;
      }
      require(failed && ms_since(t2) < 1000, "an operation after the failure did not fail at once");
      return;
    }
  }
  fail("no failure seen although a rank was killed");
});

void wait_for_peer_exit(RankEnv& env) {
  // The idle rank leaves without a closing barrier (the other side is broken).
  std::this_thread::sleep_for(std::chrono::milliseconds(std::stol(env.arg("idle-ms", "1500"))));
  env.comm->abort("test over");
}

const RegisterScenario abort_unblocks_wait("abort_unblocks_wait", [](RankEnv& env) {
  if (env.rank != 0) return wait_for_peer_exit(env);
  std::vector<float> buf(100000, 1.0f);
  Work w = env.comm->all_reduce(buf.data(), buf.size(), DataType::f32, ReduceOp::sum);
  const auto start = Clock::now();
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    env.comm->abort("test abort");
  });
  bool aborted = false;
  try {
    w.wait();
  } catch (const CommError& e) {
    aborted = e.kind() == ErrorKind::aborted;
    std::printf("rank 0: wait ended after %ld ms: %s\n", ms_since(start), e.what());
  }
  aborter.join();
  require(aborted, "the wait did not fail with ErrorKind::aborted");
  require(ms_since(start) < 2000, "abort did not unblock the wait promptly");
  // Future operations fail at once.
  Work next = env.comm->barrier();
  bool failed = false;
  try {
    next.wait(std::chrono::milliseconds(500));
  } catch (const CommError& e) {
    failed = e.kind() == ErrorKind::aborted;
  }
  require(failed, "an operation after abort() did not fail at once");
});

const RegisterScenario timeout("timeout", [](RankEnv& env) {
  if (env.rank != 0) return wait_for_peer_exit(env);
  std::vector<float> buf(100000, 1.0f);
  const auto start = Clock::now();
  Work w = env.comm->all_reduce(buf.data(), buf.size(), DataType::f32, ReduceOp::sum);
  require(!w.wait(std::chrono::milliseconds(100)), "a wait with a short timeout should return false");
  bool timed_out = false;
  try {
    w.wait();
  } catch (const CommError& e) {
    timed_out = e.kind() == ErrorKind::timeout;
    std::printf("rank 0: failed after %ld ms: %s\n", ms_since(start), e.what());
  }
  require(timed_out, "the operation did not fail with ErrorKind::timeout");
  const long took = ms_since(start);
  require(took >= env.options.op_timeout.count() - 50 && took <= env.options.op_timeout.count() + 1000,
          "the timeout fired after " + std::to_string(took) + " ms");
});

}  // namespace
}  // namespace dseek::comm::test
