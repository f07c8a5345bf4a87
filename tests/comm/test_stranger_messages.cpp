// A stranger on the data plane (issue 28): a process that knows a rank's UCX worker
// address connects to it and sends tagged messages. UCX tag messages carry no sender
// identity, and the tags are predictable (comm/tags.hpp), so before the data-plane key a
// message with the tag of the next all-reduce's piece landed in the collective's buffer.
// Here a world of two ranks in this process (fake host names: the all-reduces take the
// UCX algorithms, not shared memory) runs with a key; the stranger, a UcxTransport of
// its own without the key, (a) sends garbage under exactly the tags an unkeyed world
// would use: the sums stay exact; (b) floods rank 0 with random tags, small (eager) and
// 1 MiB (rendezvous): every message is dropped and counted, memory stays flat, and the
// world's collectives keep working. Over whatever UCX picks, and over TCP ([ucx-tcp]).
// Before the key, (a) gave rank 0 the stranger's bytes: 1024 of 1024 sums wrong.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/tags.hpp"
#include "comm/ucx/ucx_communicator.hpp"
#include "comm/ucx/ucx_transport.hpp"
#include "support/scoped_env.hpp"

namespace comm = dseek::comm;
using dseek::testing::ScopedEnv;
using namespace std::chrono_literals;

namespace {

size_t resident_bytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<size_t>(resident) * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

constexpr size_t kCount = 1024;  // floats per all-reduce: 4 KiB, the direct exchange

// Two ranks, each on a thread of its own, with one data-plane key.
class World {
 public:
  explicit World(uint64_t key) {
    comm::CommOptions options;
    options.op_timeout = 2s;  // also the hold time of strangers' messages
    std::array<std::unique_ptr<comm::UcxCommunicatorBuilder>, 2> builders;
    for (int r = 0; r < 2; ++r) {
      builders[r] = std::make_unique<comm::UcxCommunicatorBuilder>(r, 2, options);
      builders[r]->set_data_key(key);
    }
    address0 = builders[0]->address();
    const std::vector<std::string> addresses{builders[0]->address(), builders[1]->address()};
    on_ranks([&](int r) { comms[r] = builders[r]->connect(addresses, {"host-a", "host-b"}); });
  }
  ~World() {
    on_ranks([&](int r) { comms[r].reset(); });  // both at once: the destructor's barrier
  }
  // Runs f(rank) on both ranks at once; `pump` runs meanwhile (on the caller's thread).
  void on_ranks(const std::function<void(int)>& f, const std::function<void()>& pump = {}) {
    auto a = std::async(std::launch::async, f, 0);
    auto b = std::async(std::launch::async, f, 1);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while ((a.wait_for(0s) != std::future_status::ready || b.wait_for(0s) != std::future_status::ready) &&
           std::chrono::steady_clock::now() < deadline) {
      if (pump) pump();
      std::this_thread::sleep_for(1ms);
    }
    REQUIRE(a.wait_for(0s) == std::future_status::ready);
    REQUIRE(b.wait_for(0s) == std::future_status::ready);
    a.get();
    b.get();
  }
  // One all-reduce of rank + 1 + i % 7: how many elements differ from the exact sum on
  // either rank (small integers add exactly in float32).
  size_t wrong_sums(const std::function<void()>& pump = {}) {
    std::array<size_t, 2> wrong{};
    on_ranks(
        [&](int r) {
          std::vector<float> data(kCount);
          for (size_t i = 0; i < kCount; ++i) data[i] = static_cast<float>(r + 1 + i % 7);
          comms[r]->all_reduce(data.data(), kCount, comm::DataType::f32, comm::ReduceOp::sum).wait();
          for (size_t i = 0; i < kCount; ++i) wrong[r] += data[i] == static_cast<float>(3 + 2 * (i % 7)) ? 0 : 1;
        },
        pump);
    return wrong[0] + wrong[1];
  }
  uint64_t dropped() const { return comms[0]->counters().dropped_messages; }

  std::array<std::unique_ptr<comm::Communicator>, 2> comms;
  std::string address0;
};

// A process without the key that knows rank 0's address: it connects as "rank 1".
class Stranger {
 public:
  explicit Stranger(const std::string& address0) { transport.connect({address0, std::string()}); }
  void send(uint64_t tag, const std::vector<uint8_t>& data) {
    ios.push_back(transport.send(0, tag, data.data(), data.size()));
    REQUIRE_FALSE(ios.back()->failed);
  }
  void progress() { transport.progress(); }
  size_t pending() const {
    size_t n = 0;
    for (const auto& io : ios) n += io->done ? 0 : 1;
    return n;
  }
  comm::UcxTransport transport{1, 2};
  std::vector<comm::IoPtr> ios;
};

uint64_t random_key() {
  std::random_device device;
  return (uint64_t{device()} << 32) ^ device();
}

void against_a_stranger() {
  World world(random_key());
  Stranger stranger(world.address0);
  const auto pump = [&] { stranger.progress(); };
  // Progresses the stranger until `done` or the limit; true when done.
  const auto pump_until = [&](const std::function<bool()>& done, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      stranger.progress();
      std::this_thread::sleep_for(1ms);
    }
    return done();
  };

  // (a) Garbage under the tags an unkeyed world gives rank 1's pieces of its next
  // all-reduces (the barrier of connect() took sequence number 0), sent before them.
  const std::vector<uint8_t> garbage(kCount * sizeof(float), 0x7f);
  const uint32_t root = comm::derive_context(0, 0, 0);
  uint64_t sent = 0;
  for (uint32_t seq = 1; seq <= 8; ++seq)
    for (uint32_t piece = 0; piece < 4; ++piece, ++sent) stranger.send(comm::make_tag(root, 1, false, seq, piece), garbage);
  REQUIRE(pump_until([&] { return stranger.pending() == 0; }, 10s));
  pump_until([] { return false; }, 1s);  // (the messages reach rank 0's queue meanwhile)
  for (int i = 0; i < 3; ++i) CHECK(world.wrong_sums(pump) == 0);
  // Held for the hold time (2 s), then dropped and counted.
  CHECK(pump_until([&] { return world.dropped() >= sent; }, 15s));
  CHECK(world.dropped() == sent);

  // (b) Random tags, 4 KiB and below (eager) and 1 MiB (rendezvous), in rounds; the
  // resident size after the first round is the baseline.
  std::mt19937_64 rng(12345);
  const std::vector<uint8_t> small(4096, 0x55), large(size_t{1} << 20, 0xaa);
  std::vector<std::vector<uint8_t>> sizes;
  for (size_t bytes : {size_t{8}, size_t{64}, size_t{512}, size_t{4096}}) sizes.emplace_back(small.begin(), small.begin() + bytes);
  size_t baseline = 0;
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    stranger.ios.clear();
    for (int i = 0; i < 4000; ++i, ++sent) stranger.send(rng(), sizes[static_cast<size_t>(i) % sizes.size()]);
    for (int i = 0; i < 8; ++i, ++sent) stranger.send(rng(), large);
    CHECK(world.wrong_sums(pump) == 0);  // the world works in the middle of the flood
    REQUIRE(pump_until([&] { return world.dropped() >= sent; }, 20s));
    // Even the rendezvous sends ended: a dropped one is acknowledged without its data.
    CHECK(pump_until([&] { return stranger.pending() == 0; }, 10s));
    CHECK(world.wrong_sums(pump) == 0);
    if (round == 0) baseline = resident_bytes();
  }
  CHECK(world.dropped() == sent);
  // A leak of what was dropped would be 2 x 4000 messages (~10 MB of eager data alone).
  const size_t grown = resident_bytes() > baseline ? resident_bytes() - baseline : 0;
  INFO("resident size grew by " << grown / 1024 << " KiB over two rounds of the flood");
  CHECK(grown < size_t{8} << 20);
}

}  // namespace

TEST_CASE("ucx: a stranger's messages never reach a keyed world's buffers, and are dropped and counted",
          "[comm][ucx][stranger]") {
  against_a_stranger();
}

TEST_CASE("ucx over tcp: a stranger's messages never reach a keyed world's buffers, and are dropped",
          "[comm][ucx-tcp][stranger]") {
  ScopedEnv tls("UCX_TLS", "tcp");
  against_a_stranger();
}
