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
