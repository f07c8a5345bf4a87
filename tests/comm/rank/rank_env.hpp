// What a comm rank program scenario gets: its communicator, its arguments, and helpers
// to make deterministic test data, compute serial references and compare results.
// A scenario returns normally on success and throws (any exception) on failure.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/bf16.hpp"
#include "comm/communicator.hpp"

namespace dseek::comm::test {

struct RankEnv {
  int rank = 0, size = 1;
  std::map<std::string, std::string> args;  // --key value pairs
  CommOptions options;
  std::unique_ptr<Communicator> comm;

  std::string arg(const std::string& key, const std::string& fallback = "") const {
    auto it = args.find(key);
    return it == args.end() ? fallback : it->second;
  }
};

using Scenario = std::function<void(RankEnv&)>;
std::map<std::string, Scenario>& scenarios();
struct RegisterScenario {
  RegisterScenario(const std::string& name, Scenario s) { scenarios()[name] = std::move(s); }
};

[[noreturn]] inline void fail(const std::string& what) { throw std::runtime_error(what); }
inline void require(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

// Rank r's input value at index i: multiples of 1/4 in [-2.75, 2.75], exact in bf16 and
// in fp32 sums of a few ranks, different per rank and per salt.
inline float input_value(int r, size_t i, int salt) {
  return static_cast<float>(static_cast<int>(((r + 1) * 7 + i * 13 + static_cast<size_t>(salt) * 5) % 23) - 11) * 0.25f;
}

// A buffer of `count` elements of `type` holding input_value(r, offset + i, salt).
inline std::vector<uint8_t> make_input(DataType type, size_t count, int r, int salt, size_t offset = 0) {
  std::vector<uint8_t> buf(count * element_size(type));
  for (size_t i = 0; i < count; ++i) {
    const float v = input_value(r, offset + i, salt);
    if (type == DataType::f32) reinterpret_cast<float*>(buf.data())[i] = v;
    else if (type == DataType::bf16) reinterpret_cast<uint16_t*>(buf.data())[i] = float_to_bf16(v);
    else buf[i] = static_cast<uint8_t>((r * 31 + (offset + i) * 7 + static_cast<size_t>(salt)) & 0xff);
  }
  return buf;
}

inline double get(const std::vector<uint8_t>& buf, DataType type, size_t i) {
  if (type == DataType::f32) return reinterpret_cast<const float*>(buf.data())[i];
  if (type == DataType::bf16) return bf16_to_float(reinterpret_cast<const uint16_t*>(buf.data())[i]);
  return buf[i];
}

// The serial reference of an all-reduce at global index i.
inline double reference(ReduceOp op, int ranks, size_t i, int salt) {
  double acc = op == ReduceOp::max ? -1e30 : 0.0;
  for (int r = 0; r < ranks; ++r) {
    const double v = input_value(r, i, salt);
    acc = op == ReduceOp::max ? std::max(acc, v) : acc + v;
  }
  return op == ReduceOp::avg ? acc / ranks : acc;
}

inline void expect_close(double got, double want, DataType type, const std::string& where) {
  const double tol = (type == DataType::bf16 ? 1e-2 : 1e-5) * std::max(1.0, std::abs(want));
  if (!(std::abs(got - want) <= tol)) {
    std::ostringstream s;
    s << where << ": got " << got << ", expected " << want;
    fail(s.str());
  }
}

// Every rank got the same bits: gather everybody's result and compare.
inline void require_identical(Communicator& comm, const void* data, size_t bytes, const std::string& what) {
  std::vector<uint8_t> all(bytes * static_cast<size_t>(comm.size()));
  std::memcpy(all.data() + bytes * static_cast<size_t>(comm.rank()), data, bytes);
  comm.all_gather(all.data() + bytes * static_cast<size_t>(comm.rank()), all.data(), all.size(), DataType::u8).wait();
  for (int r = 0; r < comm.size(); ++r)
    require(std::memcmp(all.data() + bytes * static_cast<size_t>(r), data, bytes) == 0,
            what + ": rank " + std::to_string(r) + " got different bits than rank " + std::to_string(comm.rank()));
}
inline void require_identical(Communicator& comm, const std::vector<float>& out, const std::string& what) {
  require_identical(comm, out.data(), out.size() * sizeof(float), what);
}

// Test data whose sums round (unlike input_value's): a hash of `key` mapped to [-1, 1).
inline uint64_t mix(uint64_t x) {  // splitmix64's finalizer: a good enough hash for test data
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
inline float uniform(uint64_t key) {  // in [-1, 1)
  return static_cast<float>(static_cast<double>(mix(key) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

inline std::string label(const char* op, DataType type, size_t count, const std::string& extra = "") {
  return std::string(op) + " " + to_string(type) + " count " + std::to_string(count) + extra;
}

// Sizes that cover: fewer elements than ranks, odd sizes, the small-message path, and
// the ring with many pipelined chunk columns (tests run with small chunks).
inline const std::vector<size_t>& test_sizes() {
  static const std::vector<size_t> sizes{1, 2, 3, 5, 17, 1000, 4099, 9001, 65537, 262147};
  return sizes;
}

}  // namespace dseek::comm::test
