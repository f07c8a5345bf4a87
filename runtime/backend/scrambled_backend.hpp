// A TEST device (train.device = "scrambled-cpu-for-tests"): the CPU backend behind a
// backend whose memory is not host memory, as a GPU's is not. Every byte it stores is
// kept XOR-ed with a mask; each op decodes its inputs into host scratch, runs the CPU
// op there and encodes its outputs back; copy_to_host / copy_from_host decode / encode.
//
// So a caller that reads or writes the backend's memory directly, instead of through
// the memory calls, reads garbage (1.0f reads as about -1e-22, token 5 as -1515870811)
// or writes values the ops then misread (the bf16/fp8 matmuls' scales and amaxes, which
// are backend memory too, included); a training run on this backend has the CPU
// run's bits only if every host access goes through the backend. That is what the
// trainer tests use it for, on a machine without a GPU. It is slow (every op copies
// its buffers) and never meant for training.
#pragma once

#include <cstddef>
#include <memory>

#include "runtime/backend/backend.hpp"

namespace dseek::backend {

// The name of the device, as train.device spells it and Backend::name() returns it.
inline constexpr const char* kScrambledDevice = "scrambled-cpu-for-tests";

// Wraps make_cpu_backend(threads): the same arithmetic, so the same bits.
std::unique_ptr<Backend> make_scrambled_backend(int threads);

// What the memory calls (copy_to_host, copy_from_host) moved between the host and the
// device: on a GPU, the PCIe traffic. Tests read it to show what a step makes cross,
// e.g. that the tensor-parallel model never moves its logits (N x V/T floats) to the
// host. Ops move nothing: the device's staging inside them is not host traffic.
struct HostTraffic {
  struct Direction {
    size_t copies = 0;
    size_t bytes = 0;
    size_t largest_copy_bytes = 0;
  };
  Direction to_host, from_host;
};
// The traffic of `scrambled` (made by make_scrambled_backend) since the previous call,
// and starts counting afresh; std::invalid_argument for any other backend.
HostTraffic take_host_traffic(Backend& scrambled);

}  // namespace dseek::backend
