// The UCX (ucp) implementation of Transport: one ucp context and worker per communicator
// world, tag send/receive, shared memory between local processes and TCP across hosts
// (UCX picks), failure reports from the endpoints' error handlers, and sleeping on the
// worker's event fd so many ranks on few cores still progress.
//
// Strangers (issue 28): UCX lets any process that knows a worker's address connect and
// send it tagged messages, which carry no sender identity. With a data-plane key (one
// per epoch, from the coordinator over the authenticated control plane) every tag on the
// wire is the caller's tag XOR the key, so a sender without it matches a posted receive
// with probability (receives posted) / 2^64. What it sends instead waits in UCX's
// unexpected queue; with a tag filter the transport takes those messages out and, when
// they stay of no group of this world for the hold time, receives them into a scratch
// buffer and drops them (counted, logged at a bounded rate).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/transport.hpp"

namespace dseek::comm {

class UcxTransport final : public Transport {
 public:
  // Creates the ucp context and worker; connect() must follow before any send.
  // `peer_failure_detection` asks UCX to fail requests to a dead peer at once (its PEER
  // error mode); UCX 1.13 then refuses the shared-memory transports (no peer failure
  // handler), so local ranks talk over TCP loopback, ~10x slower. Without it a dead peer
  // is noticed by the operation deadline.
  // `net_device`: the one network interface UCX's network transports use ("" = every one;
  // UCX_NET_DEVICES in the environment wins).
  UcxTransport(int world_rank, int world_size, bool peer_failure_detection = false,
               const std::string& net_device = "");
  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  // This worker's address: the bytes every peer needs to connect (exchanged by the caller).
  const std::string& address() const { return address_; }
  // Creates an endpoint to every other rank (connections are made lazily by UCX on the
  // first message; the communicator warms them up with a barrier). `tag_key` masks every
  // tag this transport sends or receives (0: tags go out as given; every rank of a world
  // must use the same key). Never printed or logged.
  void connect(const std::vector<std::string>& addresses, uint64_t tag_key = 0);
  // `ours(tag)`: may this (unmasked) tag be one of this world's groups (its context
  // claimed)? Set before the first progress(); without it nothing is ever dropped.
  // Unexpected messages for which it says no are held, and dropped once they have been
  // held for `hold` and still are not ours (see sweep()).
  void set_stranger_filter(std::function<bool(uint64_t tag)> ours, std::chrono::milliseconds hold);
  // Messages dropped by the filter so far (any thread).
  uint64_t dropped_messages() const { return dropped_.load(std::memory_order_relaxed); }

  int world_rank() const override { return rank_; }
  int world_size() const override { return size_; }
  IoPtr send(int peer, uint64_t tag, const void* data, size_t bytes) override;
  IoPtr recv(int peer, uint64_t tag, void* data, size_t bytes) override;
  bool progress() override;
  bool arm() override;
  void wait_for_activity(std::chrono::microseconds max_wait) override;
  void wake() override;
  bool peer_failed(int peer) const override;
  void close(std::chrono::milliseconds timeout) override;

 protected:
  void release(Io* io) override;

 private:
  struct State;
  // How long a released request in flight may take to finish before its peer's endpoint
  // is closed by force (release(): in a world being torn down, so short), and how long
  // that close may take.
  static constexpr std::chrono::milliseconds kReleaseDrainTime{20};
  static constexpr std::chrono::milliseconds kForceCloseTime{100};
  // Progresses until `io` completes or `deadline`; true when it completed.
  bool drain(const Io& io, std::chrono::steady_clock::time_point deadline);
  // Closes the endpoint to `peer` by force (its requests complete with an error) and marks
  // the peer failed for the rest of this world.
  void force_close(int peer, std::chrono::steady_clock::time_point deadline);
  // Takes strangers' messages off the head of the unexpected queue and drops those held
  // long enough (rate-limited by progress()).
  void sweep(std::chrono::steady_clock::time_point now);
  // Receives a held message into the scratch buffer and forgets it.
  void drop(size_t held_index, std::chrono::steady_clock::time_point now, const char* why);

  std::unique_ptr<State> state_;
  int rank_;
  int size_;
  bool peer_failure_detection_;
  std::string address_;
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace dseek::comm
