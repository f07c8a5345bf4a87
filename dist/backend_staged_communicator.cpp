// Implementation of backend_staged_communicator.hpp.
#include "dist/backend_staged_communicator.hpp"

#include <chrono>
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
    host_.all_reduce(host, host, count, type, op).wait();
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
    host_.reduce_scatter(host_in, host_out, count, type, op).wait();
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
    host_.all_gather(mine, host, count, type).wait();
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
    host_.broadcast(host, count, type, root).wait();
    if (rank() != root) backend.copy_from_host(buffer, host, bytes);
  });
}

comm::Work BackendStagedCommunicator::send(const void* data, size_t count, comm::DataType type,
                                           int peer) {
  auto& backend = bound("send");
  return finished("send", epoch(), [&] {
    const size_t bytes = count * comm::element_size(type);
    std::byte* host = host_buffer(in_, bytes);
    backend.copy_to_host(host, data, bytes);
    host_.send(host, count, type, peer).wait();
  });
}

comm::Work BackendStagedCommunicator::recv(void* data, size_t count, comm::DataType type,
                                           int peer) {
  auto& backend = bound("recv");
  return finished("recv", epoch(), [&] {
    const size_t bytes = count * comm::element_size(type);
    std::byte* host = host_buffer(out_, bytes);
    host_.recv(host, count, type, peer).wait();
    backend.copy_from_host(data, host, bytes);
  });
}

comm::Work BackendStagedCommunicator::barrier() {
  return finished("barrier", epoch(), [&] { host_.barrier().wait(); });
}

std::unique_ptr<comm::Communicator> BackendStagedCommunicator::subgroup(
    const std::vector<int>& group_ranks) {
  auto host = host_.subgroup(group_ranks);
  if (!host) return nullptr;
  auto staged = std::make_unique<BackendStagedCommunicator>(std::move(host));
  staged->backend_ = backend_;
  return staged;
}

}  // namespace dseek::dist
