// A Communicator of a compute backend's memory made from a Communicator of host memory:
// every operation copies its inputs from the backend into host buffers (the backend's
// copy calls), runs the host communicator's operation on them, waits for it and copies
// its outputs back into the backend. The reductions are the host communicator's, so
// their bits are those of the same operation on host buffers.
//
// Why it exists: the data-parallel path that keeps gradients in the backend's memory
// (ReducerSettings::backend_memory, taken by comm.backend = "nccl") must run in CI, where
// there is no GPU and no NCCL. Tests run it on the scrambled test device
// (runtime/backend/scrambled_backend.hpp: memory that reads as garbage unless it goes
// through the backend) over UCX, through this communicator: a trainer or reducer that
// touched backend memory directly, or forgot a buffer, breaks the bits. It is a test
// vehicle, not a job setting: it stages through the host exactly what NCCL avoids, and
// comm.backend = "ucx" already stages gradients better (per bucket, overlapped with
// backward, train/host_staging.hpp). Nothing in a job config selects it.
//
// Collectives complete before they return (the Work is done, or failed with the host
// communicator's error). Sends and receives do not: a pipeline stage posts a step's
// receives at its start (as over NCCL, whose groups queue them on their own streams), so
// a send copies its data out and a receive posts its host receive at once, and the
// waiting thread copies a received buffer into the backend when it waits for it (the
// Work's driver). bind_backend() must come before the first operation: the
// trainer creates its backend, so the caller binds it from the backend factory
// (train::RunOptions::backend); sub-groups share the binding, so groups cut before the
// trainer exists (dist/run_pipeline.cpp) stage through its backend too. Not thread-safe
// except abort().
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "runtime/backend/backend.hpp"

namespace dseek::dist {

class BackendStagedCommunicator final : public comm::Communicator {
 public:
  // `host` moves host memory and outlives this communicator.
  explicit BackendStagedCommunicator(comm::Communicator& host);
  // The same, owning its host communicator (sub-groups).
  explicit BackendStagedCommunicator(std::unique_ptr<comm::Communicator> host);

  // The backend whose memory the buffers of every operation are; it outlives their use.
  void bind_backend(backend::Backend& backend) { *backend_ = &backend; }

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  uint64_t epoch() const override { return host_.epoch(); }
  const std::vector<int>& world_ranks() const override { return host_.world_ranks(); }

  using Communicator::all_reduce;
  comm::Work all_reduce(const void* in, void* out, size_t count, comm::DataType type,
                        comm::ReduceOp op) override;
  comm::Work reduce_scatter(const void* in, void* out, size_t count, comm::DataType type,
                            comm::ReduceOp op) override;
  comm::Work all_gather(const void* in, void* out, size_t count, comm::DataType type) override;
  comm::Work broadcast(void* buffer, size_t count, comm::DataType type, int root) override;
  comm::Work send(const void* data, size_t count, comm::DataType type, int peer) override;
  comm::Work recv(void* data, size_t count, comm::DataType type, int peer) override;
  comm::Work barrier() override;
  void abort(const std::string& reason) override { host_.abort(reason); }
  // The host communicator's sub-group, staged through the same backend.
  std::unique_ptr<comm::Communicator> subgroup(const std::vector<int>& group_ranks) override;
  comm::CommCounters counters() const override { return host_.counters(); }
  // The bytes of every operation of this communicator and of the groups cut from it
  // (the device plane's traffic, as a test reads it): counted once each finished.
  comm::CommCounters plane_counters() const;

 private:
  struct PlaneTotals {
    std::atomic<uint64_t> sent{0}, received{0}, operations{0};
  };
  backend::Backend& bound(const char* operation) const;
  std::byte* host_buffer(std::vector<std::byte>& buffer, size_t bytes);
  // Waits for a host operation and counts its bytes.
  void run(const comm::Work& host);
  // A send or receive left running on the host (`copy_to`: where a receive's bytes go).
  comm::Work transfer(const char* name, std::shared_ptr<std::vector<std::byte>> buffer,
                      comm::Work host, void* copy_to);

  // In-flight transfers' host buffers (released once finished); before owned_, so a
  // sub-group's host communicator ends its operations before their buffers go.
  std::vector<std::pair<comm::Work, std::shared_ptr<std::vector<std::byte>>>> in_flight_;
  std::unique_ptr<comm::Communicator> owned_;
  comm::Communicator& host_;
  // Shared with the sub-groups cut from this communicator.
  std::shared_ptr<backend::Backend*> backend_ = std::make_shared<backend::Backend*>(nullptr);
  std::shared_ptr<PlaneTotals> totals_ = std::make_shared<PlaneTotals>();
  std::vector<std::byte> in_, out_;  // host copies, kept between operations
};

}  // namespace dseek::dist
