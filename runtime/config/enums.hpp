// The settings that take one of a few names (train.precision, parallel.schedule,
// comm.compression, ...) as enums: the loader parses the name once (schema.cpp) and
// everything past it compares enums, never strings. Each enum's names are listed once,
// here, in EnumNames: the schema's allowed values, the TOML it writes back and
// name_of() all come from that list.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace dseek::config {

enum class Precision { fp32, bf16, fp8 };
enum class Device { cpu, cuda, scrambled_cpu_for_tests };
enum class Schedule { gpipe, one_f_one_b, interleaved };
enum class Partition { uniform, balanced };
enum class CommBackend { ucx, nccl };
enum class Compression { none, topk, int8, topk_int8 };
enum class Progress { automatic, bar, plain, off };
enum class Balance { equal, throughput };
// Where AdamW runs (train.offload): automatic picks by the device (job_config.hpp).
enum class Offload { automatic, none, optimizer };
// `unset` is no name: a [[faults]] entry must give its kind.
enum class FaultKind {
  kill, hang, crash_actor, drop_messages, slow, corrupt_gradient, fail_checkpoint_write,
  fail_connect, unset
};
enum class FaultDuring { step, reduction };
// corrupt_gradient: the reduced gradient (caught by the replica check), the node's own
// before any reduction (caught by the SDC audit, runtime/train/sdc_audit.hpp), or only
// its recomputations for the audit (an auditor that is wrong: cleared by a second one).
enum class FaultWhere { reduced, local, audit };

// names[i] is the name of the enumerator with value i.
template <class E>
struct EnumNames;
template <>
struct EnumNames<Precision> {
  static constexpr std::array<std::string_view, 3> names{"fp32", "bf16", "fp8"};
};
template <>
struct EnumNames<Device> {
  static constexpr std::array<std::string_view, 3> names{"cpu", "cuda", "scrambled-cpu-for-tests"};
};
template <>
struct EnumNames<Schedule> {
  static constexpr std::array<std::string_view, 3> names{"gpipe", "1f1b", "interleaved"};
};
template <>
struct EnumNames<Partition> {
  static constexpr std::array<std::string_view, 2> names{"uniform", "balanced"};
};
template <>
struct EnumNames<CommBackend> {
  static constexpr std::array<std::string_view, 2> names{"ucx", "nccl"};
};
template <>
struct EnumNames<Compression> {
  static constexpr std::array<std::string_view, 4> names{"none", "topk", "int8", "topk+int8"};
};
template <>
struct EnumNames<Progress> {
  static constexpr std::array<std::string_view, 4> names{"auto", "bar", "plain", "off"};
};
template <>
struct EnumNames<Balance> {
  static constexpr std::array<std::string_view, 2> names{"equal", "throughput"};
};
template <>
struct EnumNames<Offload> {
  static constexpr std::array<std::string_view, 3> names{"auto", "none", "optimizer"};
};
template <>
struct EnumNames<FaultKind> {
  static constexpr std::array<std::string_view, 8> names{
      "kill", "hang", "crash_actor", "drop_messages", "slow", "corrupt_gradient",
      "fail_checkpoint_write", "fail_connect"};
};
template <>
struct EnumNames<FaultDuring> {
  static constexpr std::array<std::string_view, 2> names{"step", "reduction"};
};
template <>
struct EnumNames<FaultWhere> {
  static constexpr std::array<std::string_view, 3> names{"reduced", "local", "audit"};
};

template <class E>
concept NamedEnum = requires { EnumNames<E>::names; };

// The name of `value` ("" for a value without one, FaultKind::unset).
template <NamedEnum E>
constexpr std::string_view name_of(E value) {
  const auto index = static_cast<size_t>(value);
  return index < EnumNames<E>::names.size() ? EnumNames<E>::names[index] : std::string_view{};
}

// The enumerator called `name`, or nothing.
template <NamedEnum E>
constexpr std::optional<E> enum_from_name(std::string_view name) {
  for (size_t i = 0; i < EnumNames<E>::names.size(); ++i)
    if (EnumNames<E>::names[i] == name) return static_cast<E>(i);
  return std::nullopt;
}

// For messages and events that carry the name.
template <NamedEnum E>
std::string name_string(E value) {
  return std::string(name_of(value));
}

}  // namespace dseek::config
