// Implementation of backend_staged_communicator.hpp.
#include "dist/backend_staged_communicator.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <utility>

namespace dseek::dist {

namespace {
// Runs `body` (copies and a waited host operation) and hands back a finished Work: done,
// or failed with the data plane's error, as an asynchronous operation reports it.
template <class Body>
comm::Work finished(const char* name, uint64_t epoch, Body&& body) {
  auto state = std::make_shared<comm::WorkState>(
      std::string(name) + " (backend-staged) epoch " + std::to_string(epoch),
      std::chrono::steady_clock::now());
  try {
    body();
    state->complete();
  } catch (const comm::CommError& error) {
    state->fail(error.kind(), error.what());
  }
  return comm::Work(state);
}

// Finishes a staged send or receive on the thread that waits for (or tests) it: the host
// operation's outcome, then a receive's copy into the backend.
class StagedTransfer final : public comm::WorkDriver {
 public:
  StagedTransfer(comm::Work host, std::shared_ptr<std::vector<std::byte>> buffer,
                 backend::Backend& backend, void* copy_to, std::function<void(const comm::Work&)> count)
      : host_(std::move(host)), buffer_(std::move(buffer)), backend_(backend), copy_to_(copy_to),
        count_(std::move(count)) {}
  void bind(const std::shared_ptr<comm::WorkState>& state) { state_ = state; }

  void drive(const comm::WorkState&, std::chrono::steady_clock::time_point until) override {
    settle([&] {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      return host_.wait(std::max(left, std::chrono::milliseconds(0)));
    });
  }
  void poke() override {
    settle([&] { return host_.test(); });
  }

 private:
  template <class Done>
  void settle(Done&& done) {
    const auto state = state_.lock();
    if (!state || state->finished()) return;
    try {
      if (!done()) return;
      if (copy_to_ != nullptr) backend_.copy_from_host(copy_to_, buffer_->data(), buffer_->size());
      count_(host_);
      state->add_sent(host_.bytes_sent());
      state->add_received(host_.bytes_received());
      state->complete();
    } catch (const comm::CommError& error) {
      state->fail(error.kind(), error.what());
    }
  }

  comm::Work host_;
  std::shared_ptr<std::vector<std::byte>> buffer_;
  backend::Backend& backend_;
  void* copy_to_;
  std::function<void(const comm::Work&)> count_;
  std::weak_ptr<comm::WorkState> state_;
};

}  // namespace

BackendStagedCommunicator::BackendStagedCommunicator(comm::Communicator& host) : host_(host) {}

BackendStagedCommunicator::BackendStagedCommunicator(std::unique_ptr<comm::Communicator> host)
    : owned_(std::move(host)), host_(*owned_) {}

backend::Backend& BackendStagedCommunicator::bound(const char* operation) const {
  if (*backend_ == nullptr)
    throw std::logic_error(std::string("BackendStagedCommunicator::") + operation +
                           " before bind_backend(): whose memory are the buffers?");
  return **backend_;
}

std::byte* BackendStagedCommunicator::host_buffer(std::vector<std::byte>& buffer, size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

comm::Work BackendStagedCommunicator::all_reduce(const void* in, void* out, size_t count,
                                                 comm::DataType type, comm::ReduceOp op) {
  auto& backend = bound("all_reduce");
  return finished("all_reduce", epoch(), [&] {
    const size_t bytes = count * comm::element_size(type);
    std::byte* host = host_buffer(in_, bytes);
    backend.copy_to_host(host, in, bytes);
    run(host_.all_reduce(host, host, count, type, op));
    backend.copy_from_host(out, host, bytes);
  });
}

comm::Work BackendStagedCommunicator::reduce_scatter(const void* in, void* out, size_t count,
                                                     comm::DataType type, comm::ReduceOp op) {
  auto& backend = bound("reduce_scatter");
  return finished("reduce_scatter", epoch(), [&] {
    const size_t es = comm::element_size(type);
    const size_t piece = shard_count(count) * es;
    // Two host buffers: `out` may lie inside `in` (the reducer's in-place pieces).
    std::byte* host_in = host_buffer(in_, count * es);
    std::byte* host_out = host_buffer(out_, piece);
    backend.copy_to_host(host_in, in, count * es);
    run(host_.reduce_scatter(host_in, host_out, count, type, op));
    if (piece > 0) backend.copy_from_host(out, host_out, piece);
  });
}

comm::Work BackendStagedCommunicator::all_gather(const void* in, void* out, size_t count,
                                                 comm::DataType type) {
  auto& backend = bound("all_gather");
  return finished("all_gather", epoch(), [&] {
    const size_t es = comm::element_size(type);
    std::byte* host = host_buffer(out_, count * es);
    std::byte* mine = host + shard_offset(count) * es;
    if (shard_count(count) > 0) backend.copy_to_host(mine, in, shard_count(count) * es);
    run(host_.all_gather(mine, host, count, type));
    backend.copy_from_host(out, host, count * es);
  });
}

comm::Work BackendStagedCommunicator::broadcast(void* buffer, size_t count, comm::DataType type,
                                                int root) {
  auto& backend = bound("broadcast");
  return finished("broadcast", epoch(), [&] {
    const size_t bytes = count * comm::element_size(type);
    std::byte* host = host_buffer(in_, bytes);
    if (rank() == root) backend.copy_to_host(host, buffer, bytes);
    run(host_.broadcast(host, count, type, root));
    if (rank() != root) backend.copy_from_host(buffer, host, bytes);
  });
}

comm::Work BackendStagedCommunicator::send(const void* data, size_t count, comm::DataType type,
                                           int peer) {
  auto& backend = bound("send");
  auto buffer = std::make_shared<std::vector<std::byte>>(count * comm::element_size(type));
  backend.copy_to_host(buffer->data(), data, buffer->size());
  return transfer("send", buffer, host_.send(buffer->data(), count, type, peer), nullptr);
}

comm::Work BackendStagedCommunicator::recv(void* data, size_t count, comm::DataType type,
                                           int peer) {
  bound("recv");
  auto buffer = std::make_shared<std::vector<std::byte>>(count * comm::element_size(type));
  return transfer("recv", buffer, host_.recv(buffer->data(), count, type, peer), data);
}

comm::Work BackendStagedCommunicator::transfer(const char* name,
                                               std::shared_ptr<std::vector<std::byte>> buffer,
                                               comm::Work host, void* copy_to) {
  std::erase_if(in_flight_, [](const auto& entry) {
    try {
      return entry.first.test();
    } catch (const comm::CommError&) {
      return true;  // failed: the host operation is over
    }
  });
  in_flight_.emplace_back(host, buffer);
  // The host operation's own deadline bounds it: it fails first.
  auto state = std::make_shared<comm::WorkState>(
      std::string(name) + " (backend-staged) epoch " + std::to_string(epoch()),
      std::chrono::steady_clock::now() + std::chrono::hours(1));
  auto driver = std::make_shared<StagedTransfer>(
      std::move(host), std::move(buffer), bound(name), copy_to,
      [totals = totals_](const comm::Work& done) {
        totals->sent += done.bytes_sent();
        totals->received += done.bytes_received();
        ++totals->operations;
      });
  driver->bind(state);
  state->set_driver(driver);
  return comm::Work(state);
}

void BackendStagedCommunicator::run(const comm::Work& host) {
  host.wait();
  totals_->sent += host.bytes_sent();
  totals_->received += host.bytes_received();
  ++totals_->operations;
}

comm::CommCounters BackendStagedCommunicator::plane_counters() const {
  comm::CommCounters counters;
  counters.bytes_sent = totals_->sent.load();
  counters.bytes_received = totals_->received.load();
  counters.operations = totals_->operations.load();
  return counters;
}

comm::Work BackendStagedCommunicator::barrier() {
  return finished("barrier", epoch(), [&] { run(host_.barrier()); });
}

std::unique_ptr<comm::Communicator> BackendStagedCommunicator::subgroup(
    const std::vector<int>& group_ranks) {
  auto host = host_.subgroup(group_ranks);
  if (!host) return nullptr;
  auto staged = std::make_unique<BackendStagedCommunicator>(std::move(host));
  staged->backend_ = backend_;
  staged->totals_ = totals_;
  return staged;
}

}  // namespace dseek::dist
