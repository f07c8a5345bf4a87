// NCCL Communicator (see nccl_communicator.hpp). The NCCL communicator is created in
// non-blocking mode so that creation and every call can be bounded by a deadline and
// aborted; calls that return ncclInProgress are settled by polling the async error.
#include "comm/nccl/nccl_communicator.hpp"

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/nccl/nccl_check.hpp"
#include "comm/reduce_kernels.hpp"

namespace dseek::comm {

namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t to_nccl(DataType t) {
  switch (t) {
    case DataType::f32: return ncclFloat32;
    case DataType::bf16: return ncclBfloat16;
    case DataType::u8: return ncclUint8;
  }
  return ncclUint8;
}

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::max: return ncclMax;
  }
  return ncclSum;
}

// Waits until the non-blocking communicator has finished its last call; throws on error
// or when `deadline` passes.
void settle(ncclComm_t comm, Clock::time_point deadline, const char* what) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    DSEEK_NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) throw_nccl_error(what, state, __FILE__, __LINE__);
    if (Clock::now() > deadline) throw CommError(ErrorKind::timeout, std::string(what) + ": timed out");
    std::this_thread::yield();
  }
}

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int device, int rank, int size, std::vector<int> world_ranks, CommOptions options)
      : comm_(comm), device_(device), rank_(rank), size_(size), world_ranks_(std::move(world_ranks)), options_(options) {
    DSEEK_CUDA_CHECK(cudaSetDevice(device_));
    DSEEK_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    DSEEK_CUDA_CHECK(cudaMalloc(&barrier_scratch_, sizeof(float)));
    watcher_ = std::thread([this] { watch(); });
  }

  ~NcclCommunicator() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    watcher_.join();
    {
      std::lock_guard lock(mutex_);
      if (!broken_) {
        // Orderly: let issued work finish (bounded), then free.
        cudaStreamSynchronize(stream_);
        ncclCommFinalize(comm_);
        try {
          settle(comm_, Clock::now() + std::chrono::seconds(10), "ncclCommFinalize");
        } catch (...) {
          ncclCommAbort(comm_);
          aborted_ = true;
        }
      }
      if (!aborted_) ncclCommDestroy(comm_);
      for (auto& p : pending_) p.work->fail(ErrorKind::shut_down, "communicator destroyed");
      for (auto& p : pending_) cudaEventDestroy(p.event);
      for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
      cudaFree(barrier_scratch_);
      cudaStreamDestroy(stream_);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  uint64_t epoch() const override { return options_.epoch; }
  const std::vector<int>& world_ranks() const override { return world_ranks_; }

  using Communicator::all_reduce;

  Work all_reduce(const void* in, void* out, size_t count, DataType type, ReduceOp op) override {
    require_reducible(type);
    const uint64_t bytes = count * element_size(type);
    return issue("all_reduce", ring_bytes(bytes), ring_bytes(bytes),
                 [&] { DSEEK_NCCL_CHECK(ncclAllReduce(in, out, count, to_nccl(type), to_nccl(op), comm_, stream_)); });
  }

  Work reduce_scatter(const void* in, void* out, size_t count, DataType type, ReduceOp op) override {
    require_reducible(type);
    const size_t es = element_size(type);
    return issue("reduce_scatter", ring_bytes(count * es) / 2, ring_bytes(count * es) / 2, [&] {
      if (count % static_cast<size_t>(size_) == 0) {
        DSEEK_NCCL_CHECK(ncclReduceScatter(in, out, count / static_cast<size_t>(size_), to_nccl(type), to_nccl(op), comm_,
                                           stream_));
        return;
      }
      // Uneven shards (any length): one reduce per shard, rooted at its owner.
      DSEEK_NCCL_CHECK(ncclGroupStart());
      for (int r = 0; r < size_; ++r) {
        const size_t n = comm::shard_count(count, size_, r), off = comm::shard_offset(count, size_, r);
        if (n == 0) continue;
        DSEEK_NCCL_CHECK(ncclReduce(static_cast<const char*>(in) + off * es, out, n, to_nccl(type), to_nccl(op), r, comm_,
                                    stream_));
      }
      DSEEK_NCCL_CHECK(ncclGroupEnd());
    });
  }

  Work all_gather(const void* in, void* out, size_t count, DataType type) override {
    const size_t es = element_size(type);
    return issue("all_gather", ring_bytes(count * es) / 2, ring_bytes(count * es) / 2, [&] {
      if (count % static_cast<size_t>(size_) == 0) {
        DSEEK_NCCL_CHECK(ncclAllGather(in, out, count / static_cast<size_t>(size_), to_nccl(type), comm_, stream_));
        return;
      }
      // Uneven shards: every owner broadcasts its shard into place.
      DSEEK_NCCL_CHECK(ncclGroupStart());
      for (int r = 0; r < size_; ++r) {
        const size_t n = comm::shard_count(count, size_, r), off = comm::shard_offset(count, size_, r);
        if (n == 0) continue;
        char* dst = static_cast<char*>(out) + off * es;
        DSEEK_NCCL_CHECK(ncclBroadcast(r == rank_ ? in : dst, dst, n, to_nccl(type), r, comm_, stream_));
      }
      DSEEK_NCCL_CHECK(ncclGroupEnd());
    });
  }

  Work broadcast(void* buffer, size_t count, DataType type, int root) override {
    check_rank(root);
    const uint64_t bytes = count * element_size(type);
    return issue("broadcast", rank_ == root ? bytes : 0, rank_ == root ? 0 : bytes,
                 [&] { DSEEK_NCCL_CHECK(ncclBroadcast(buffer, buffer, count, to_nccl(type), root, comm_, stream_)); });
  }

  Work send(const void* data, size_t count, DataType type, int peer) override {
    check_rank(peer);
    return issue("send", count * element_size(type), 0,
                 [&] { DSEEK_NCCL_CHECK(ncclSend(data, count, to_nccl(type), peer, comm_, stream_)); });
  }

  Work recv(void* data, size_t count, DataType type, int peer) override {
    check_rank(peer);
    return issue("recv", 0, count * element_size(type),
                 [&] { DSEEK_NCCL_CHECK(ncclRecv(data, count, to_nccl(type), peer, comm_, stream_)); });
  }

  Work barrier() override {
    return issue("barrier", 0, 0, [&] {
      DSEEK_NCCL_CHECK(ncclAllReduce(barrier_scratch_, barrier_scratch_, 1, ncclFloat32, ncclSum, comm_, stream_));
    });
  }

  void abort(const std::string& reason) override {
    std::lock_guard lock(mutex_);
    break_locked(ErrorKind::aborted, "aborted: " + reason);
  }

  std::unique_ptr<Communicator> subgroup(const std::vector<int>& group_ranks) override {
    int key = -1;
    for (size_t i = 0; i < group_ranks.size(); ++i)
      if (group_ranks[i] == rank_) key = static_cast<int>(i);
    std::lock_guard lock(mutex_);
    if (broken_) throw *error_;
    ncclConfig_t config = nonblocking_config();
    ncclComm_t child = nullptr;
    DSEEK_CUDA_CHECK(cudaSetDevice(device_));
    DSEEK_NCCL_CHECK(ncclCommSplit(comm_, key >= 0 ? 0 : NCCL_SPLIT_NOCOLOR, key, &child, &config));
    settle(comm_, Clock::now() + options_.op_timeout, "ncclCommSplit");
    if (key < 0) return nullptr;
    settle(child, Clock::now() + options_.op_timeout, "ncclCommSplit");
    std::vector<int> world;
    for (int g : group_ranks) world.push_back(world_ranks_[static_cast<size_t>(g)]);
    return std::make_unique<NcclCommunicator>(child, device_, key, static_cast<int>(group_ranks.size()), std::move(world),
                                              options_);
  }

  CommCounters counters() const override {
    CommCounters c;
    c.bytes_sent = sent_.load();
    c.bytes_received = received_.load();
    c.operations = operations_.load();
    return c;
  }

 private:
  struct Pending {
    cudaEvent_t event;
    std::shared_ptr<WorkState> work;
    uint64_t sent, received;
  };

  // Bytes a ring all-reduce moves per rank (NCCL does not report them).
  uint64_t ring_bytes(uint64_t bytes) const {
    return size_ > 1 ? 2 * static_cast<uint64_t>(size_ - 1) * bytes / static_cast<uint64_t>(size_) : 0;
  }

  void check_rank(int r) const {
    if (r < 0 || r >= size_) throw CommError(ErrorKind::invalid_argument, "rank " + std::to_string(r) + " out of range");
  }

  template <class Enqueue>
  Work issue(const char* name, uint64_t sent, uint64_t received, Enqueue&& enqueue) {
    ++operations_;
    auto work = std::make_shared<WorkState>(std::string(name) + " (nccl) epoch " + std::to_string(options_.epoch),
                                            Clock::now() + options_.op_timeout, options_.observer);
    std::lock_guard lock(mutex_);
    if (broken_) {
      work->fail(ErrorKind::aborted, std::string("communicator unusable: ") + error_->what());
      return Work(work);
    }
    try {
      DSEEK_CUDA_CHECK(cudaSetDevice(device_));
      enqueue();
      settle(comm_, work->deadline(), name);
      cudaEvent_t event;
      if (!free_events_.empty()) {
        event = free_events_.back();
        free_events_.pop_back();
      } else {
        DSEEK_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      }
      DSEEK_CUDA_CHECK(cudaEventRecord(event, stream_));
      pending_.push_back({event, work, sent, received});
    } catch (const CommError& e) {
      work->fail(e.kind(), e.what());
      break_locked(ErrorKind::aborted, std::string("an earlier operation failed: ") + e.what());
    }
    cv_.notify_all();
    return Work(work);
  }

  // Fails everything and aborts the NCCL communicator (kernels stuck waiting on a dead
  // peer return). Called with mutex_ held.
  void break_locked(ErrorKind kind, const std::string& why) {
    if (!broken_) {
      broken_ = true;
      error_.emplace(kind, why);
      ncclCommAbort(comm_);
      aborted_ = true;
    }
    for (auto& p : pending_) {
      p.work->fail(kind, why);
      free_events_.push_back(p.event);
    }
    pending_.clear();
  }

  // The watcher: completes operations in stream order, enforces deadlines, polls errors.
  void watch() {
    std::unique_lock lock(mutex_);
    cudaSetDevice(device_);
    while (!stop_) {
      if (pending_.empty()) {
        cv_.wait_for(lock, std::chrono::milliseconds(100));
        continue;
      }
      Pending& p = pending_.front();
      const cudaError_t status = cudaEventQuery(p.event);
      if (status == cudaSuccess) {
        sent_ += p.sent;
        received_ += p.received;
        p.work->add_sent(p.sent);
        p.work->add_received(p.received);
        p.work->complete();
        free_events_.push_back(p.event);
        pending_.pop_front();
        continue;
      }
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (status != cudaErrorNotReady) {
        break_locked(ErrorKind::transport, std::string("CUDA error: ") + cudaGetErrorString(status));
      } else if (async != ncclSuccess && async != ncclInProgress) {
        break_locked(ErrorKind::peer_failed, std::string("NCCL error: ") + ncclGetErrorString(async));
      } else if (Clock::now() > p.work->deadline()) {
        p.work->fail(ErrorKind::timeout, "timed out (a peer is dead, hung, or did not issue the same operation)");
        break_locked(ErrorKind::aborted, "an earlier operation timed out: " + p.work->name());
      } else {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        lock.lock();
      }
    }
  }

  ncclComm_t comm_;
  int device_, rank_, size_;
  std::vector<int> world_ranks_;
  CommOptions options_;
  cudaStream_t stream_ = nullptr;
  void* barrier_scratch_ = nullptr;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> free_events_;
  bool broken_ = false, aborted_ = false, stop_ = false;
  std::optional<CommError> error_;
  std::atomic<uint64_t> sent_{0}, received_{0}, operations_{0};
  std::thread watcher_;
};

}  // namespace

void require_cuda_device(int device) {
  const cudaError_t status = cudaSetDevice(device);
  if (status != cudaSuccess)
    throw std::runtime_error("comm.backend = \"nccl\": CUDA device " + std::to_string(device) +
                             " is not usable here: " + cudaGetErrorString(status));
}

std::string make_nccl_unique_id() {
  ncclUniqueId id;
  DSEEK_NCCL_CHECK(ncclGetUniqueId(&id));
  return std::string(reinterpret_cast<const char*>(&id), sizeof id);
}

std::unique_ptr<Communicator> connect_nccl(const std::string& unique_id, int rank, int size, int device,
                                           const CommOptions& options) {
  if (unique_id.size() != sizeof(ncclUniqueId))
    throw CommError(ErrorKind::invalid_argument, "an NCCL unique id has " + std::to_string(sizeof(ncclUniqueId)) +
                                                     " bytes, got " + std::to_string(unique_id.size()));
  DSEEK_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id;
  std::memcpy(&id, unique_id.data(), sizeof id);
  ncclConfig_t config = nonblocking_config();
  ncclComm_t comm = nullptr;
  DSEEK_NCCL_CHECK(ncclCommInitRankConfig(&comm, size, id, rank, &config));
  try {
    settle(comm, Clock::now() + options.op_timeout, "ncclCommInitRankConfig");
  } catch (...) {
    ncclCommAbort(comm);
    throw;
  }
  std::vector<int> world(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) world[static_cast<size_t>(r)] = r;
  return std::make_unique<NcclCommunicator>(comm, device, rank, size, std::move(world), options);
}

std::unique_ptr<Communicator> connect_nccl(Bootstrap& bootstrap, int device, const CommOptions& options) {
  DSEEK_CUDA_CHECK(cudaSetDevice(device));
  const std::string mine = bootstrap.rank() == 0 ? make_nccl_unique_id() : std::string();
  const auto all = bootstrap.all_gather(mine, options.op_timeout);
  if (all.empty() || all[0].size() != sizeof(ncclUniqueId))
    throw CommError(ErrorKind::invalid_argument, "bootstrap did not deliver rank 0's NCCL unique id");
  return connect_nccl(all[0], bootstrap.rank(), bootstrap.size(), device, options);
}

}  // namespace dseek::comm
