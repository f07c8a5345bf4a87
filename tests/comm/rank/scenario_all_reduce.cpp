// All-reduce scenarios: every op, type and size against the serial reference, in and
// out of place, several operations in flight at once, and the byte counters.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include "rank/rank_env.hpp"

namespace dseek::comm::test {
namespace {

void check_all_reduce(RankEnv& env, DataType type, ReduceOp op, size_t count, bool in_place, int salt) {
  auto in = make_input(type, count, env.rank, salt);
  std::vector<uint8_t> out_buf = in_place ? std::vector<uint8_t>{} : std::vector<uint8_t>(in.size(), 0xAB);
  void* out = in_place ? in.data() : out_buf.data();
  const auto original = in;
  env.comm->all_reduce(in.data(), out, count, type, op).wait();
  const auto& result = in_place ? in : out_buf;
  const std::string where = label("all_reduce", type, count, std::string(" ") + to_string(op) + (in_place ? " in place" : ""));
  for (size_t i = 0; i < count; ++i) expect_close(get(result, type, i), reference(op, env.size, i, salt), type, where + " index " + std::to_string(i));
  if (!in_place) require(in == original, where + ": the input was modified");
}

const RegisterScenario all_reduce("all_reduce", [](RankEnv& env) {
  int salt = 0;
  for (DataType type : {DataType::f32, DataType::bf16})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
      for (size_t count : test_sizes()) {
        check_all_reduce(env, type, op, count, true, ++salt);
        if (op == ReduceOp::sum) check_all_reduce(env, type, op, count, false, ++salt);
      }
  // 2 MiB + 16 KiB of f32: shared memory in 3 chunks of 1 MiB; with --shared-memory 0, past
  // CommOptions::direct_rsag_max_bytes (the ring at 3 ranks), recursive halving at 4.
  // 4 MiB + 16 KiB: 5 chunks; without shared memory past recursive_halving_max_bytes too:
  // the ring at 2-4 ranks.
  for (size_t big : {(size_t{2} << 20) / 4 + 4099, (size_t{4} << 20) / 4 + 4099}) {
    check_all_reduce(env, DataType::f32, ReduceOp::sum, big, true, ++salt);
    check_all_reduce(env, DataType::f32, ReduceOp::sum, big, false, ++salt);
  }
  check_all_reduce(env, DataType::bf16, ReduceOp::avg, ((size_t{2} << 20) / 4 + 4099) * 2, true, ++salt);
});

// Waits from threads other than the issuer, several at once, and test() polling: the
// waiting threads drive progress themselves and must not trip over each other.
const RegisterScenario all_reduce_threads("all_reduce_threads", [](RankEnv& env) {
  const std::vector<size_t> counts{5, 6000, 100003, 300001, 17, 700001};  // direct, rsag / ring
  std::vector<std::vector<uint8_t>> bufs;
  for (size_t j = 0; j < counts.size(); ++j) bufs.push_back(make_input(DataType::f32, counts[j], env.rank, 300 + static_cast<int>(j)));
  for (int round = 0; round < 3; ++round) {
    std::vector<Work> works;
    for (size_t j = 0; j < counts.size(); ++j)
      works.push_back(env.comm->all_reduce(bufs[j].data(), counts[j], DataType::f32, ReduceOp::max));
    std::vector<std::thread> waiters;
    for (size_t j = 0; j + 1 < counts.size(); ++j)
      waiters.emplace_back([&works, j] { works[j].wait(); });
    // The last one by test() polling only.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!works.back().test()) {
      require(std::chrono::steady_clock::now() < until, "test() never saw the all_reduce finish");
      std::this_thread::yield();
    }
    for (auto& t : waiters) t.join();
    for (size_t j = 0; j < counts.size(); ++j) {
      require(works[j].test(), "all_reduce not finished after its wait");
      for (size_t i = 0; i < counts[j]; ++i)
        expect_close(get(bufs[j], DataType::f32, i), reference(ReduceOp::max, env.size, i, 300 + static_cast<int>(j)),
                     DataType::f32, "threaded all_reduce " + std::to_string(j));
    }
  }
});

// Several all-reduces in flight at once (compute would overlap them), waited in reverse.
const RegisterScenario all_reduce_async("all_reduce_async", [](RankEnv& env) {
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<Work> works;
  const std::vector<size_t> counts{100003, 7, 5000, 65536, 1, 33333};
  for (size_t j = 0; j < counts.size(); ++j) bufs.push_back(make_input(DataType::f32, counts[j], env.rank, 100 + static_cast<int>(j)));
  for (size_t j = 0; j < counts.size(); ++j)
    works.push_back(env.comm->all_reduce(bufs[j].data(), counts[j], DataType::f32, ReduceOp::sum));
  for (size_t j = counts.size(); j-- > 0;) {
    require(works[j].wait(std::chrono::seconds(30)), "async all_reduce did not finish");
    for (size_t i = 0; i < counts[j]; ++i)
      expect_close(get(bufs[j], DataType::f32, i), reference(ReduceOp::sum, env.size, i, 100 + static_cast<int>(j)),
                   DataType::f32, "async all_reduce " + std::to_string(j));
  }
});

// Byte counters: a ring all-reduce sends and receives 2(N-1)/N of the buffer per rank.
const RegisterScenario all_reduce_counters("all_reduce_counters", [](RankEnv& env) {
  const size_t count = 1 << 18;  // 1 MiB of f32: the ring
  auto buf = make_input(DataType::f32, count, env.rank, 7);
  const auto before = env.comm->counters();
  Work w = env.comm->all_reduce(buf.data(), count, DataType::f32, ReduceOp::sum);
  w.wait();
  const auto after = env.comm->counters();
  const double expected = 2.0 * (env.size - 1) / env.size * static_cast<double>(count * 4);
  const double slack = 4.0 * env.size;  // uneven shards
  require(std::abs(static_cast<double>(w.bytes_sent()) - expected) <= slack * 4,
          "bytes sent " + std::to_string(w.bytes_sent()) + ", expected about " + std::to_string(expected));
  require(std::abs(static_cast<double>(w.bytes_received()) - expected) <= slack * 4,
          "bytes received " + std::to_string(w.bytes_received()) + ", expected about " + std::to_string(expected));
  require(after.bytes_sent - before.bytes_sent == w.bytes_sent(), "communicator counter disagrees with the op's");
  require(after.operations == before.operations + 1, "operation counter did not advance by one");
});

// Buffers at a different offset within a page on every rank, the output at another one
// than the input: the shared-memory path places each rank's staged and reduced data
// relative to that rank's own output (comm/alias_offset.hpp) and its peers must read it
// where it was put. Chunks of whole pages, several per buffer.
const RegisterScenario all_reduce_page_offsets("all_reduce_page_offsets", [](RankEnv& env) {
  constexpr size_t kPage = 4096;
  auto placed = [](std::vector<uint8_t>& storage, size_t bytes, size_t offset) {
    storage.assign(bytes + 2 * kPage, 0xAB);
    const auto base = (reinterpret_cast<uintptr_t>(storage.data()) + kPage - 1) / kPage * kPage;
    return reinterpret_cast<uint8_t*>(base + offset);
  };
  int salt = 100;
  for (DataType type : {DataType::f32, DataType::bf16})
    for (size_t count : {size_t{4099}, size_t{70001}})
      for (bool in_place : {true, false}) {
        const size_t bytes = count * element_size(type);
        const auto input = make_input(type, count, env.rank, ++salt);
        std::vector<uint8_t> in_storage, out_storage;
        uint8_t* in = placed(in_storage, bytes, (16 + 1008 * static_cast<size_t>(env.rank)) % kPage);
        uint8_t* out = in_place ? in : placed(out_storage, bytes, (2064 + 528 * static_cast<size_t>(env.rank)) % kPage);
        std::copy(input.begin(), input.end(), in);
        env.comm->all_reduce(in, out, count, type, ReduceOp::sum).wait();
        const std::vector<uint8_t> result(out, out + bytes);
        const std::string where = label("all_reduce at page offsets", type, count, in_place ? " in place" : "");
        for (size_t i = 0; i < count; ++i)
          expect_close(get(result, type, i), reference(ReduceOp::sum, env.size, i, salt), type, where + " index " + std::to_string(i));
        if (!in_place) require(std::equal(input.begin(), input.end(), in), where + ": the input was modified");
      }
});

// Run with --all-reduce-algorithm shm: the world takes the shared-memory path past every
// size limit; a sub-group, which cannot, refuses at once and names the knob.
const RegisterScenario all_reduce_forced_shm("all_reduce_forced_shm", [](RankEnv& env) {
  const size_t past_limits = (size_t{8} << 20) / 4 + 4099;  // 8 MiB + 16 KiB of f32
  check_all_reduce(env, DataType::f32, ReduceOp::sum, past_limits, true, 1);
  check_all_reduce(env, DataType::bf16, ReduceOp::avg, 65537, false, 2);
  std::vector<int> reversed;
  for (int r = env.size; r-- > 0;) reversed.push_back(r);
  auto group = env.comm->subgroup(reversed);
  std::vector<float> buf(1000, 1.0f);
  bool refused = false;
  try {
    group->all_reduce(buf.data(), buf.size(), DataType::f32, ReduceOp::sum).wait();
  } catch (const CommError& e) {
    refused = e.kind() == ErrorKind::invalid_argument && std::string(e.what()).find("DSEEK_COMM_ALLREDUCE") != std::string::npos;
  }
  require(refused, "a sub-group's all_reduce with the shm algorithm forced did not refuse naming the knob");
  env.comm->barrier().wait();  // the world is still usable
});

}  // namespace
}  // namespace dseek::comm::test
