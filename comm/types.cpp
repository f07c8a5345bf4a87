// Names and sizes for the vocabulary in types.hpp.
#include "comm/types.hpp"

namespace dseek::comm {

size_t element_size(DataType type) {
  switch (type) {
    case DataType::f32: return 4;
    case DataType::bf16: return 2;
    case DataType::u8: return 1;
  }
  return 1;
}

const char* to_string(DataType type) {
  switch (type) {
    case DataType::f32: return "f32";
    case DataType::bf16: return "bf16";
    case DataType::u8: return "u8";
  }
  return "?";
}

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
  }
  return "?";
}

namespace {
struct AlgorithmName {
  AllReduceAlgorithm algorithm;
  const char* name;
};
constexpr AlgorithmName kAlgorithmNames[] = {
    {AllReduceAlgorithm::automatic, "auto"},           {AllReduceAlgorithm::shared_memory, "shm"},
    {AllReduceAlgorithm::direct, "direct"},            {AllReduceAlgorithm::direct_rsag, "rsag"},
    {AllReduceAlgorithm::recursive_halving, "halving"}, {AllReduceAlgorithm::ring, "ring"},
};
}  // namespace

const char* to_string(AllReduceAlgorithm algorithm) {
  for (const auto& a : kAlgorithmNames)
    if (a.algorithm == algorithm) return a.name;
  return "?";
}

AllReduceAlgorithm parse_all_reduce_algorithm(const std::string& name, const std::string& what) {
  for (const auto& a : kAlgorithmNames)
    if (name == a.name) return a.algorithm;
  throw CommError(ErrorKind::invalid_argument,
                  what + ": unknown all-reduce algorithm '" + name + "' (auto, shm, direct, rsag, halving, ring)");
}

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::aborted: return "aborted";
    case ErrorKind::timeout: return "timeout";
    case ErrorKind::peer_failed: return "peer failed";
    case ErrorKind::transport: return "transport error";
    case ErrorKind::invalid_argument: return "invalid argument";
    case ErrorKind::shut_down: return "shut down";
  }
  return "?";
}

}  // namespace dseek::comm
