// Basic vocabulary of the data plane: element types, reduction operators, the error
// type every failed operation reports, and the options a communicator is built with.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

namespace dseek::comm {

class WorkState;  // work.hpp
// Who is told of an operation as it finishes (done or failed): run on the thread that
// finished it (the progress thread, or the caller for an operation done at once) with
// the operation's state and its time from issue to end. It must be quick and must not
// throw. Each communicator has its own (CommOptions::observer).
using WorkObserver = std::function<void(const WorkState& work, std::chrono::nanoseconds took)>;

// Element types a buffer can hold. bf16 is stored as uint16 and reduced in fp32.
// u8 is raw bytes: valid for broadcast, all_gather, send/recv, not for reductions.
enum class DataType : uint8_t { f32, bf16, u8 };

enum class ReduceOp : uint8_t { sum, avg, max };

size_t element_size(DataType type);
const char* to_string(DataType type);
const char* to_string(ReduceOp op);

// Why an operation failed. The communicator is unusable after any failure: every
// failure poisons the whole epoch (like NCCL's asynchronous errors), because the ranks
// no longer agree on which messages belong to which operation.
enum class ErrorKind : uint8_t {
  aborted,           // abort() was called (here or because another op failed)
  timeout,           // the operation ran past its deadline
  peer_failed,       // the transport reported a dead or unreachable peer
  transport,         // any other transport error
  invalid_argument,  // the call itself was wrong (bad rank, type, size)
  shut_down,         // the communicator was destroyed with the operation pending
};

const char* to_string(ErrorKind kind);

class CommError : public std::runtime_error {
 public:
  // `peer`: the rank the failure concerns, when one is known (a connection to it that
  // could not be made); -1 otherwise.
  CommError(ErrorKind kind, const std::string& what, int peer = -1)
      : std::runtime_error(what), kind_(kind), peer_(peer) {}
  ErrorKind kind() const { return kind_; }
  int peer() const { return peer_; }

 private:
  ErrorKind kind_;
  int peer_;
};

// Which algorithm an all-reduce runs. `automatic` chooses by size, rank count and
// placement (CommOptions below); the others force one whatever the size, for tests and
// measurements. shared_memory needs a world on one host (else the call fails).
enum class AllReduceAlgorithm : uint8_t { automatic, shared_memory, direct, direct_rsag, recursive_halving, ring };

const char* to_string(AllReduceAlgorithm algorithm);
// "auto", "shm", "direct", "rsag", "halving", "ring"; throws CommError(invalid_argument)
// naming `what` (the knob it came from) for anything else.
AllReduceAlgorithm parse_all_reduce_algorithm(const std::string& name, const std::string& what);

struct CommOptions {
  // Every operation fails with ErrorKind::timeout if it is not done this long after it
  // was issued: a dead or hung peer never hangs the others.
  std::chrono::milliseconds op_timeout{60000};
  // Large collectives are cut into chunks of this many bytes and pipelined: the reduce of
  // chunk k overlaps the transfer of chunk k+1.
  size_t chunk_bytes = 512 * 1024;
  // How many chunks one collective keeps in flight at once.
  int pipeline_depth = 4;
  // Buffers up to this many bytes use the latency-optimised algorithms (direct exchange)
  // instead of the ring.
  size_t small_message_bytes = 32 * 1024;
  // All-reduces of a power-of-two number of ranks (more than 2) above small_message_bytes
  // up to this many bytes use recursive halving + doubling (recursive_halving.hpp: 2
  // log2(N) steps, each waiting for one partner). 0 turns it off. At 4 ranks on 2 cores
  // (bench/RESULTS.md): ~1.2x the direct reduce-scatter + all-gather at 1-4 MiB, ~1.05x
  // the ring at 4 MiB, slower than the ring at 8 MiB; at 3 ranks (folded) slower than both.
  size_t recursive_halving_max_bytes = 4 * 1024 * 1024;
  // All-reduces of more than 2 ranks (not taken by the limit above) up to this many bytes
  // (and above small_message_bytes) use the direct reduce-scatter + all-gather (2 rounds)
  // instead of the ring (2(N-1) steps). 0 turns it off; DSEEK_COMM_RSAG_MAX (bytes)
  // overrides it, for measurements. At 4 ranks on 2 cores: 1 MiB ~10-25% faster than the
  // ring, 4 MiB ~10% slower; at 3 ranks on par with the ring at 1 MiB.
  size_t direct_rsag_max_bytes = 2 * 1024 * 1024;
  // All-reduces of a world whose ranks all run on one host go through shared memory
  // (comm/shm/): memcpy and reduce loops on shm segments instead of UCX (no page pinning,
  // no rendezvous). Needs POSIX shm (/dev/shm) of 4 x (shm_chunk_bytes + 4 KiB) per rank.
  // Not with peer_failure_detection (which needs the transport to carry every message).
  // DSEEK_COMM_SHM=0 turns it off, for measurements.
  bool shared_memory = true;
  // The chunk one shared-memory all-reduce step moves; each rank's segment holds four
  // (two staging and two result slots, so one chunk is staged while the last is gathered).
  size_t shm_chunk_bytes = 1024 * 1024;
  // Buffers up to this size take the shared-memory path, larger ones the UCX algorithms.
  // No limit by default: with its data half a page from the output (alias_offset.hpp) it
  // was faster than every UCX algorithm at every size measured, 2 and 4 ranks on 2 cores,
  // 4 KiB to 64 MiB (bench/RESULTS.md, "4K aliasing"). DSEEK_COMM_SHM_MAX (bytes)
  // overrides it, for measurements.
  size_t shm_max_bytes = SIZE_MAX;
  // Forces one all-reduce algorithm (automatic: chosen by the limits above).
  // DSEEK_COMM_ALLREDUCE=auto|shm|direct|rsag|halving|ring overrides it, for measurements.
  AllReduceAlgorithm all_reduce_algorithm = AllReduceAlgorithm::automatic;
  // Use the host-aware all-reduce (intra-host reduce, inter-host all-reduce, intra-host
  // broadcast) when a group spans several hosts and some host holds several of its ranks.
  bool hierarchical = true;
  // Ask the transport to fail operations on a dead peer at once. UCX 1.13 can only do
  // that without shared memory (local ranks then use TCP loopback, ~10x slower), so it is
  // off by default and a dead peer is noticed by op_timeout.
  bool peer_failure_detection = false;
  // The network interface UCX's network transports may use (UCX_NET_DEVICES; the one
  // that owns the node's advertised address: net_device.hpp). "" = every one. An
  // UCX_NET_DEVICES in the environment wins.
  std::string net_device;
  // The world epoch this communicator belongs to (reported in errors, never reused).
  uint64_t epoch = 0;
  // Told of every operation of this communicator as it finishes (work.hpp's
  // WorkObserver; a node's trace: dist/trace_collectives.hpp); null: nobody.
  std::shared_ptr<const WorkObserver> observer;
};

}  // namespace dseek::comm
