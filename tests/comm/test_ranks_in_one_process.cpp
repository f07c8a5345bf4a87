// Ranks of one process (a dseek-node with cluster.gpus_per_node > 1 runs one per worker
// group, each on a thread of its own): each builds its own UCX worker and endpoints and
// reaches the others as ranks of other processes do. The all-reduce takes the shared-
// memory path (comm/shm/, chosen because every rank is on one host: its POSIX segments
// are named per rank, so ranks of one process map each other's as they map another
// process's) up to CommOptions::shm_max_bytes (set to 1 MiB here; no limit by default)
// and the UCX ring above it: both are checked here against the exact sums (small integers
// in float32 add exactly).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/ucx/ucx_communicator.hpp"

namespace comm = dseek::comm;

namespace {

// The addresses the ranks publish, handed to each other in memory (a rendezvous).
class AddressBoard {
 public:
  explicit AddressBoard(int ranks) : promises_(static_cast<size_t>(ranks)) {
    for (auto& p : promises_) futures_.push_back(p.get_future().share());
  }
  void publish(int rank, const std::string& address) {
    promises_[static_cast<size_t>(rank)].set_value(address);
  }
  std::vector<std::string> all() {
    std::vector<std::string> addresses;
    // (On a rank's thread: Catch's assertions are for the test's thread.)
    for (auto& f : futures_) {
      if (f.wait_for(std::chrono::seconds(30)) != std::future_status::ready)
        throw std::runtime_error("a rank did not publish its address within 30 s");
      addresses.push_back(f.get());
    }
    return addresses;
  }

 private:
  std::vector<std::promise<std::string>> promises_;
  std::vector<std::shared_future<std::string>> futures_;
};

// Rank `rank`'s all-reduce of `count` floats, each rank contributing rank + 1 + i % 7
// at index i; returns how many elements differ from the exact sum.
size_t wrong_sums(comm::Communicator& c, size_t count) {
  const int ranks = c.size();
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(c.rank() + 1 + i % 7);
  c.all_reduce(data.data(), count, comm::DataType::f32, comm::ReduceOp::sum).wait();
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const float expected =
        static_cast<float>(ranks * (ranks + 1) / 2 + ranks * static_cast<int>(i % 7));
    wrong += data[i] == expected ? 0 : 1;
  }
  return wrong;
}

}  // namespace

TEST_CASE("ranks of one process connect and all-reduce over shared memory and UCX",
          "[comm][local_ranks]") {
  constexpr int kRanks = 3;
  comm::CommOptions options;
  options.op_timeout = std::chrono::seconds(30);
  options.shm_max_bytes = size_t{1} << 20;
  const size_t small = 1000;  // 4 KB: shared memory
  const size_t large = options.shm_max_bytes / sizeof(float) * 2;  // past it: the UCX ring
  AddressBoard board(kRanks);
  std::vector<std::future<std::vector<size_t>>> ranks;
  for (int rank = 0; rank < kRanks; ++rank)
    ranks.push_back(std::async(std::launch::async, [&, rank] {
      comm::UcxCommunicatorBuilder builder(rank, kRanks, options);
      board.publish(rank, builder.address());
      auto c = builder.connect(board.all(), std::vector<std::string>(kRanks, "127.0.0.1"));
      std::vector<size_t> wrong = {wrong_sums(*c, small), wrong_sums(*c, large),
                                   wrong_sums(*c, small)};
      c->barrier().wait();  // no rank tears its endpoints down under a peer still reducing
      return wrong;
    }));
  for (int rank = 0; rank < kRanks; ++rank) {
    INFO("rank " << rank);
    REQUIRE(ranks[static_cast<size_t>(rank)].wait_for(std::chrono::seconds(60)) ==
            std::future_status::ready);
    CHECK(ranks[static_cast<size_t>(rank)].get() == std::vector<size_t>{0, 0, 0});
  }
}
