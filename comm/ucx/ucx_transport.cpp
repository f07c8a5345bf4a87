// UCX transport: see ucx_transport.hpp. Pitfalls handled here (platform notes): fields
// not flagged in field_mask are ignored, an nbx call that completes at once returns NULL
// without calling the callback, and nothing moves without ucp_worker_progress.
#include "comm/ucx/ucx_transport.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>

#include <ucp/api/ucp.h>

#include "comm/types.hpp"
#include "comm/ucx/ucx_check.hpp"

namespace dseek::comm {

namespace {

// Strangers' messages (see the header and sweep()): how often the unexpected queue is
// looked at, how many messages one sweep takes off it at most, how many it holds at most
// (beyond that the oldest is dropped at once: a flood does not grow memory), how much of
// a dropped message is received (the rest is truncated: an eager message is cut, a
// rendezvous one is acknowledged to its sender without any data moving), and how often a
// drop is logged.
constexpr auto kSweepInterval = std::chrono::milliseconds(10);
constexpr int kTakePerSweep = 1024;
constexpr size_t kMaxHeld = 4096;
constexpr size_t kScratchBytes = 64 * 1024;
constexpr auto kDropLogInterval = std::chrono::seconds(10);

// The transport's Io (a distinct type, so it is always freed as what it is).
struct UcxIo : Io {
  int peer = -1;           // the rank it goes to or comes from
  int* cancels = nullptr;  // the transport's count of released requests still in flight
};

void finish(UcxIo* io, ucs_status_t status, size_t received, bool is_recv) {
  io->impl = nullptr;
  io->done = true;
  if (status != UCS_OK) {
    io->failed = true;
    io->error = ucs_status_string(status);
  } else if (is_recv && received != io->bytes) {
    io->failed = true;
    io->error = "message of " + std::to_string(received) + " bytes where " +
                std::to_string(io->bytes) + " were expected";
  }
  if (io->released) {
    if (io->cancels != nullptr) --*io->cancels;
    delete io;
  }
}

void on_send_done(void* request, ucs_status_t status, void* user_data) {
  ucp_request_free(request);
  auto* io = static_cast<UcxIo*>(user_data);
  finish(io, status, io->bytes, false);
}

void on_recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
  ucp_request_free(request);
  auto* io = static_cast<UcxIo*>(user_data);
  finish(io, status, info != nullptr ? info->length : 0, true);
}

// Error-handler argument per endpoint: which peer, and where to record its failure.
struct PeerSlot {
  std::vector<char>* failed;
  int peer;
};

void on_endpoint_error(void* arg, ucp_ep_h /*ep*/, ucs_status_t /*status*/) {
  auto* slot = static_cast<PeerSlot*>(arg);
  (*slot->failed)[static_cast<size_t>(slot->peer)] = 1;
}

}  // namespace

struct UcxTransport::State {
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int worker_fd = -1;
  int wake_fd = -1;
  std::vector<ucp_ep_h> eps;
  std::vector<PeerSlot> slots;
  std::vector<char> failed;
  int cancels = 0;  // released requests whose completion has not run yet
  // Set when a released request could not be completed: UCX may still write its
  // caller's (by now freed) buffer, so this worker is never progressed again.
  bool inert = false;
  bool closed = false;

  // Every tag on the wire is the caller's tag XOR `key` (never printed or logged).
  uint64_t key = 0;
  // Strangers' messages (sweep()): which tags are this world's, how long a message of
  // another tag is held before it is dropped, the messages held (oldest first).
  std::function<bool(uint64_t)> ours;
  std::chrono::steady_clock::duration hold{};
  struct Held {
    ucp_tag_message_h message;
    uint64_t wire_tag;  // as sent (what a log may show: it reveals nothing of the key)
    size_t length;
    std::chrono::steady_clock::time_point since;
  };
  std::deque<Held> held;
  std::chrono::steady_clock::time_point next_sweep{};
  std::vector<char> scratch;  // dropped messages land here (outlives the worker)
  std::chrono::steady_clock::time_point last_drop_log{};
  uint64_t drops_unlogged = 0;
};


bool UcxTransport::drain(const Io& io, std::chrono::steady_clock::time_point deadline) {
  while (!io.done && std::chrono::steady_clock::now() < deadline) ucp_worker_progress(state_->worker);
  return io.done;
}

void UcxTransport::force_close(int peer, std::chrono::steady_clock::time_point deadline) {
  State& s = *state_;
  auto& ep = s.eps[static_cast<size_t>(peer)];
  s.failed[static_cast<size_t>(peer)] = 1;
  if (ep == nullptr) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &param);
  ep = nullptr;
  if (req == nullptr || UCS_PTR_IS_ERR(req)) return;
  while (ucp_request_check_status(req) == UCS_INPROGRESS && std::chrono::steady_clock::now() < deadline)
    ucp_worker_progress(s.worker);
  ucp_request_free(req);
}

UcxTransport::UcxTransport(int world_rank, int world_size, bool peer_failure_detection,
                           const std::string& net_device)
    : state_(std::make_unique<State>()), rank_(world_rank), size_(world_size),
      peer_failure_detection_(peer_failure_detection) {
  if (world_size < 1 || world_rank < 0 || world_rank >= world_size)
    throw CommError(ErrorKind::invalid_argument, "rank " + std::to_string(world_rank) +
                                                     " outside a world of " + std::to_string(world_size));
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.estimated_num_eps = static_cast<size_t>(world_size);
  // The network transports on the advertised interface only (an UCX_NET_DEVICES in the
  // environment wins: ucp_config_read has read it).
  ucp_config_t* ucx_config = nullptr;
  DSEEK_UCX_CHECK(ucp_config_read(nullptr, nullptr, &ucx_config));
  const char* chosen = std::getenv("UCX_NET_DEVICES");
  if (!net_device.empty() && (chosen == nullptr || *chosen == '\0')) {
    const ucs_status_t modified = ucp_config_modify(ucx_config, "NET_DEVICES", net_device.c_str());
    if (modified != UCS_OK) {
      ucp_config_release(ucx_config);
      DSEEK_UCX_CHECK(modified);
    }
  }
  const ucs_status_t initialised = ucp_init(&params, ucx_config, &state_->context);
  ucp_config_release(ucx_config);
  DSEEK_UCX_CHECK(initialised);

  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // One thread at a time (the progress engine's worker lock), but not always the same one:
  // a waiting caller drives progress itself.
  wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  DSEEK_UCX_CHECK(ucp_worker_create(state_->context, &wparams, &state_->worker));
  DSEEK_UCX_CHECK(ucp_worker_get_efd(state_->worker, &state_->worker_fd));
  state_->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (state_->wake_fd < 0) throw CommError(ErrorKind::transport, std::string("eventfd: ") + std::strerror(errno));

  ucp_address_t* addr = nullptr;
  size_t addr_len = 0;
  DSEEK_UCX_CHECK(ucp_worker_get_address(state_->worker, &addr, &addr_len));
  address_.assign(reinterpret_cast<const char*>(addr), addr_len);
  ucp_worker_release_address(state_->worker, addr);

  state_->eps.assign(static_cast<size_t>(world_size), nullptr);
  state_->failed.assign(static_cast<size_t>(world_size), 0);
  state_->slots.resize(static_cast<size_t>(world_size));
  for (int p = 0; p < world_size; ++p) state_->slots[static_cast<size_t>(p)] = {&state_->failed, p};
}

UcxTransport::~UcxTransport() {
  try {
    close(std::chrono::milliseconds(2000));
  } catch (...) {
  }
}

void UcxTransport::set_stranger_filter(std::function<bool(uint64_t)> ours, std::chrono::milliseconds hold) {
  state_->ours = std::move(ours);
  state_->hold = hold;
  state_->scratch.resize(kScratchBytes);
}

void UcxTransport::connect(const std::vector<std::string>& addresses, uint64_t tag_key) {
  state_->key = tag_key;
  if (static_cast<int>(addresses.size()) != size_)
    throw CommError(ErrorKind::invalid_argument, "expected " + std::to_string(size_) +
                                                     " peer addresses, got " + std::to_string(addresses.size()));
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;  // a rank never messages itself
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(addresses[static_cast<size_t>(p)].data());
    // PEER mode: a dead peer fails the requests in flight to it instead of hanging them
    // (but excludes shared memory in UCX 1.13, see the header).
    ep.err_mode = peer_failure_detection_ ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    ep.err_handler.cb = on_endpoint_error;
    ep.err_handler.arg = &state_->slots[static_cast<size_t>(p)];
    // A peer that cannot be reached (no route, a stale neighbour entry) is named: the
    // control loop re-plans the epoch around it (actors/control/epoch_loop.hpp).
    const ucs_status_t created = ucp_ep_create(state_->worker, &ep, &state_->eps[static_cast<size_t>(p)]);
    if (created != UCS_OK) throw_ucx_error("ucp_ep_create", created, __FILE__, __LINE__, p);
  }
}

namespace {
// Records what an *_nbx call returned: NULL means it completed at once and no callback
// will come; an error pointer fails the transfer; anything else is the request the
// callback will complete.
void track(UcxIo* io, ucs_status_ptr_t req) {
  if (req == nullptr) {
    io->done = true;
  } else if (UCS_PTR_IS_ERR(req)) {
    io->done = io->failed = true;
    io->error = ucs_status_string(UCS_PTR_STATUS(req));
  } else {
    io->impl = req;
  }
}
}  // namespace

IoPtr UcxTransport::send(int peer, uint64_t tag, const void* data, size_t bytes) {
  auto* io = new UcxIo;
  io->bytes = bytes;
  io->owner = this;
  io->peer = peer;
  IoPtr result(io);
  if (state_->inert || peer < 0 || peer >= size_ || peer == rank_ || state_->eps[static_cast<size_t>(peer)] == nullptr ||
      state_->failed[static_cast<size_t>(peer)]) {
    io->done = io->failed = true;
    io->error = "peer " + std::to_string(peer) + " is unreachable";
    return result;
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = on_send_done;
  param.user_data = io;
  track(io, ucp_tag_send_nbx(state_->eps[static_cast<size_t>(peer)], data, bytes, tag ^ state_->key, &param));
  return result;
}

IoPtr UcxTransport::recv(int peer, uint64_t tag, void* data, size_t bytes) {
  auto* io = new UcxIo;
  io->bytes = bytes;
  io->owner = this;
  io->peer = peer;
  IoPtr result(io);
  if (state_->inert || state_->worker == nullptr || (peer >= 0 && peer < size_ && state_->failed[static_cast<size_t>(peer)])) {
    io->done = io->failed = true;
    io->error = "peer " + std::to_string(peer) + " is unreachable";
    return result;
  }
  ucp_request_param_t param{};
  // UCX 1.13 leaves recv_info unset when a receive completes at once, so the received
  // length could not be checked: ask for a request (and a callback) every time.
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.recv = on_recv_done;
  param.user_data = io;
  const uint64_t wire_tag = tag ^ state_->key;
  // A message the sweep took off the unexpected queue before this world claimed its
  // group (a peer was quicker to create it) is received from where it is held: it is
  // older than any of its tag still in UCX's queue (one sender, sent in order).
  for (auto it = state_->held.begin(); it != state_->held.end(); ++it) {
    if (it->wire_tag != wire_tag) continue;
    const ucp_tag_message_h message = it->message;
    state_->held.erase(it);
    track(io, ucp_tag_msg_recv_nbx(state_->worker, data, bytes, message, &param));
    return result;
  }
  // NULL (done at once) is not expected with NO_IMM_CMPL; the length would be unknown.
  track(io, ucp_tag_recv_nbx(state_->worker, data, bytes, wire_tag, ~uint64_t{0}, &param));
  return result;
}

void UcxTransport::sweep(std::chrono::steady_clock::time_point now) {
  State& s = *state_;
  // Take what heads the unexpected queue off it while it is of no group of this world.
  // A message that is ours (an early piece waiting for its receive) stops the look:
  // probing shows only the first match, so what is behind it waits for a later sweep.
  for (int i = 0; i < kTakePerSweep; ++i) {
    ucp_tag_recv_info_t info{};
    if (ucp_tag_probe_nb(s.worker, 0, 0, 0, &info) == nullptr) break;  // empty: cheap
    if (s.ours(info.sender_tag ^ s.key)) break;
    // The oldest message of that exact tag is the head itself: remove it.
    const ucp_tag_message_h message = ucp_tag_probe_nb(s.worker, info.sender_tag, ~uint64_t{0}, 1, &info);
    if (message == nullptr) break;
    s.held.push_back({message, info.sender_tag, info.length, now});
    if (s.held.size() > kMaxHeld) drop(0, now, "more strangers' messages held than the limit");
  }
  // Drop what has been held for the hold time and is still of no group of this world.
  // The rule: a message of a group this rank has not created (yet) may be a peer's early
  // send on a sub-group it created first; such a message is never dropped before `hold`
  // (the communicator gives max(op_timeout, 1 s): a peer's operation on a group this
  // rank does not join within its op_timeout has failed on the peer; and every rank cuts
  // its groups right after the world connects: dist/run_layout.cpp). One that became
  // ours meanwhile stays held until its receive takes it (recv()).
  for (size_t i = 0; i < s.held.size() && now - s.held[i].since >= s.hold;) {
    if (s.ours(s.held[i].wire_tag ^ s.key)) {
      ++i;
      continue;
    }
    drop(i, now, "of no group of this world for the hold time");
  }
}

void UcxTransport::drop(size_t held_index, std::chrono::steady_clock::time_point now, const char* why) {
  State& s = *state_;
  const State::Held h = s.held[held_index];
  s.held.erase(s.held.begin() + static_cast<std::ptrdiff_t>(held_index));
  // No callback: the request is released at once and UCX completes it by itself (into
  // the scratch buffer, truncated; it outlives the worker).
  ucp_request_param_t param{};
  ucs_status_ptr_t req = ucp_tag_msg_recv_nbx(s.worker, s.scratch.data(), s.scratch.size(), h.message, &param);
  if (req != nullptr && !UCS_PTR_IS_ERR(req)) ucp_request_free(req);
  const uint64_t total = dropped_.fetch_add(1, std::memory_order_relaxed) + 1;
  ++s.drops_unlogged;
  if (total == 1 || now - s.last_drop_log >= kDropLogInterval) {
    // The tag as sent (the stranger's own), never the unmasked one: that would give away
    // the key to whoever chose what was sent.
    std::fprintf(stderr,
                 "dseek: rank %d dropped a data-plane message that is not of this epoch (tag 0x%016llx as "
                 "sent, %zu bytes: %s); %llu dropped since the last report, %llu in all\n",
                 rank_, static_cast<unsigned long long>(h.wire_tag), h.length, why,
                 static_cast<unsigned long long>(s.drops_unlogged), static_cast<unsigned long long>(total));
    s.last_drop_log = now;
    s.drops_unlogged = 0;
  }
}

void UcxTransport::release(Io* io) {
  auto* uio = static_cast<UcxIo*>(io);
  State& s = *state_;
  if (uio->done || uio->impl == nullptr || s.worker == nullptr) {
    delete uio;  // (with the worker gone, its request went with it)
    return;
  }
  // Still in flight. Cancelling completes a receive that nothing has matched yet, at once.
  // UCX cancels neither a matched receive (a rendezvous under way) nor a send: those go on
  // writing or reading the caller's buffer, which the caller frees once this returns (a
  // released receive's data arriving later corrupted the heap at epoch changes). So they
  // are completed here: a live peer finishes them in moments; one that does not answer
  // has its endpoint closed by force, which fails them.
  if (!s.inert) {
    ucp_request_cancel(s.worker, uio->impl);
    const int peer = uio->peer;
    const bool reachable = peer >= 0 && peer < size_ && s.eps[static_cast<size_t>(peer)] != nullptr &&
                           !s.failed[static_cast<size_t>(peer)];
    if (!uio->done && reachable) {
      const auto start = std::chrono::steady_clock::now();
      if (!drain(*uio, start + kReleaseDrainTime)) force_close(peer, start + kReleaseDrainTime + kForceCloseTime);
    }
    if (uio->done) {
      delete uio;
      return;
    }
  }
  // Not completed even so: this worker must never run again (close() destroys it without
  // progress); the callback, should the destruction run it, frees the Io.
  s.inert = true;
  uio->released = true;
  uio->cancels = &s.cancels;
  ++s.cancels;
}

bool UcxTransport::progress() {
  if (state_->worker == nullptr || state_->inert) return false;
  bool any = false;
  for (int i = 0; i < 64 && ucp_worker_progress(state_->worker) != 0; ++i) any = true;
  // The sweep, at most every kSweepInterval, and only when there is something to look at
  // (a probe of an empty unexpected queue is a list check).
  ucp_tag_recv_info_t info{};
  if (state_->ours && (!state_->held.empty() || ucp_tag_probe_nb(state_->worker, 0, 0, 0, &info) != nullptr)) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= state_->next_sweep) {
      state_->next_sweep = now + kSweepInterval;
      sweep(now);
    }
  }
  return any;
}

bool UcxTransport::arm() {
  if (state_->worker == nullptr || state_->inert) return true;
  // UCS_ERR_BUSY means events are already pending: do not sleep.
  return ucp_worker_arm(state_->worker) != UCS_ERR_BUSY;
}

void UcxTransport::wait_for_activity(std::chrono::microseconds max_wait) {
  if (state_->worker_fd < 0 || state_->wake_fd < 0) {
    std::this_thread::sleep_for(max_wait);
    return;
  }
  pollfd fds[2] = {{state_->worker_fd, POLLIN, 0}, {state_->wake_fd, POLLIN, 0}};
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(max_wait.count() / 1000000);
  ts.tv_nsec = static_cast<long>((max_wait.count() % 1000000) * 1000);
  if (::ppoll(fds, 2, &ts, nullptr) > 0 && (fds[1].revents & POLLIN)) {
    uint64_t value;
    [[maybe_unused]] ssize_t n = ::read(state_->wake_fd, &value, sizeof value);
  }
}

void UcxTransport::wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(state_->wake_fd, &one, sizeof one);
}

bool UcxTransport::peer_failed(int peer) const {
  return peer >= 0 && peer < size_ && (state_->inert || state_->failed[static_cast<size_t>(peer)] != 0);
}

void UcxTransport::close(std::chrono::milliseconds timeout) {
  State& s = *state_;
  if (s.closed) return;
  s.closed = true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // An inert worker (a released request it could not complete) is not progressed again:
  // its endpoints are closed by force and it is destroyed at once.
  if (s.inert) std::fill(s.failed.begin(), s.failed.end(), 1);
  // Flush every live endpoint within half the time left. A peer that is alive but does
  // not answer (hung, or its link cut: over TCP its connection stays open and nothing is
  // acknowledged) never completes the flush; it is treated as dead from here on, so its
  // endpoint is closed by force, which completes its requests with UCS_ERR_CANCELED.
  const auto flush_deadline = std::chrono::steady_clock::now() + (deadline - std::chrono::steady_clock::now()) / 2;
  std::vector<std::pair<size_t, ucs_status_ptr_t>> flushes;
  for (size_t p = 0; p < s.eps.size(); ++p) {
    if (s.eps[p] == nullptr || s.failed[p]) continue;
    ucp_request_param_t param{};
    ucs_status_ptr_t req = ucp_ep_flush_nbx(s.eps[p], &param);
    if (req == nullptr) continue;
    if (UCS_PTR_IS_ERR(req)) {
      s.failed[p] = 1;
      continue;
    }
    flushes.emplace_back(p, req);
  }
  while (!s.inert && !flushes.empty() && std::chrono::steady_clock::now() < flush_deadline) {
    ucp_worker_progress(s.worker);
    for (size_t i = 0; i < flushes.size();) {
      const ucs_status_t st = ucp_request_check_status(flushes[i].second);
      if (st != UCS_INPROGRESS) {
        if (st != UCS_OK) s.failed[flushes[i].first] = 1;
        ucp_request_free(flushes[i].second);
        flushes[i] = flushes.back();
        flushes.pop_back();
      } else {
        ++i;
      }
    }
  }
  for (auto& [p, req] : flushes) {
    s.failed[p] = 1;        // did not answer in time
    ucp_request_free(req);  // released: UCX completes and recycles it with the endpoint
  }
  std::vector<ucs_status_ptr_t> pending;
  for (size_t p = 0; p < s.eps.size(); ++p) {
    if (s.eps[p] == nullptr) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    // Flushed peers close gracefully; dead or silent ones by force.
    param.flags = s.failed[p] ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t req = ucp_ep_close_nbx(s.eps[p], &param);
    if (req != nullptr && !UCS_PTR_IS_ERR(req)) pending.push_back(req);
    s.eps[p] = nullptr;
  }
  while (!s.inert && !pending.empty() && std::chrono::steady_clock::now() < deadline) {
    ucp_worker_progress(s.worker);
    for (size_t i = 0; i < pending.size();) {
      if (ucp_request_check_status(pending[i]) != UCS_INPROGRESS) {
        ucp_request_free(pending[i]);
        pending[i] = pending.back();
        pending.pop_back();
      } else {
        ++i;
      }
    }
  }
  // A close request still in progress is released, not abandoned: ucp_worker_destroy
  // asserts (ucp_ep.c, UCP_REQUEST_FLAG_RELEASED) on a close request its user still
  // holds, which is how every survivor of a hung peer over TCP aborted.
  for (ucs_status_ptr_t req : pending) ucp_request_free(req);
  // Held messages are UCX's descriptors: received (dropped, uncounted) before the worker goes.
  while (!s.inert && !s.held.empty()) {
    ucp_request_param_t param{};
    ucs_status_ptr_t req = ucp_tag_msg_recv_nbx(s.worker, s.scratch.data(), s.scratch.size(), s.held.front().message, &param);
    if (req != nullptr && !UCS_PTR_IS_ERR(req)) ucp_request_free(req);
    s.held.pop_front();
  }
  // The worker's destruction completes (cancels) whatever is left (bounded teardown).
  s.worker_fd = -1;
  if (s.worker != nullptr) ucp_worker_destroy(s.worker);
  s.worker = nullptr;
  if (s.context != nullptr) ucp_cleanup(s.context);
  s.context = nullptr;
  if (s.wake_fd >= 0) ::close(s.wake_fd);
  s.wake_fd = -1;
}

}  // namespace dseek::comm
