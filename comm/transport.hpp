// The point-to-point layer under the collectives: tagged, asynchronous send and receive
// between world ranks, progress, and a way to sleep until the network has something to
// do. The collective algorithms (ring, direct, chain, ...) are written only against this
// interface, so a backend that moves bytes differently (UCX today; plain TCP or another
// fabric later) plugs in without touching them. NCCL, which brings its own collectives,
// sits one level up as another Communicator instead (see communicator.hpp).
//
// Threading: the callers serialise every member (the progress engine's worker lock),
// except wake() and wait_for_activity(), which any thread may call at any time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace dseek::comm {

class Transport;

// One posted send or receive. The transport completes it during progress(); the
// collective polls done()/failed(). Released through IoPtr: releasing a pending Io
// cancels it, and once the release returns the transport no longer reads or writes its
// buffer (so an Io must be released before the memory it moves is freed).
struct Io {
  bool done = false;
  bool failed = false;
  std::string error;     // why it failed
  size_t bytes = 0;      // bytes this Io moves
  void* impl = nullptr;  // the transport's request
  bool released = false; // its owner let go while in flight: the transport frees it
  Transport* owner = nullptr;
};

struct IoRelease {
  void operator()(Io* io) const;
};
using IoPtr = std::unique_ptr<Io, IoRelease>;

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int world_rank() const = 0;
  virtual int world_size() const = 0;

  // Post a tagged send of `bytes` from `data` to world rank `peer`; `data` must stay
  // valid until the Io is done. A receive matches on the exact 64-bit tag; put the
  // source in the tag (tag matching has no source filter).
  virtual IoPtr send(int peer, uint64_t tag, const void* data, size_t bytes) = 0;
  virtual IoPtr recv(int peer, uint64_t tag, void* data, size_t bytes) = 0;

  // Move whatever can move now; true when anything completed or arrived.
  virtual bool progress() = 0;
  // Prepare a sleep (serialised like progress()): false when events are already pending,
  // so the caller must not sleep but progress again.
  virtual bool arm() = 0;
  // Sleep until network activity since the last arm(), wake(), or `max_wait`, whichever
  // comes first. Thread-safe; needs no lock (a wake-up may be spurious).
  virtual void wait_for_activity(std::chrono::microseconds max_wait) = 0;
  // Thread-safe: end a wait_for_activity() early.
  virtual void wake() = 0;

  virtual bool peer_failed(int peer) const = 0;

  // Orderly teardown after the last operation: flush and close connections (bounded).
  virtual void close(std::chrono::milliseconds timeout) = 0;

 protected:
  friend struct IoRelease;
  // Free or cancel an Io (called through IoPtr).
  virtual void release(Io* io) = 0;
};

}  // namespace dseek::comm
