// The UCX Communicator: chooses an algorithm per call (shared memory for the all-reduces
// of a world on one host, at every size; for sub-groups and worlds across hosts: direct
// exchange for small buffers, recursive halving + doubling or the direct reduce-scatter
// + all-gather for mid-size ones, the pipelined ring for large ones, the hierarchical
// all-reduce when the group spans hosts; DSEEK_COMM_ALLREDUCE forces one), numbers
// operations in issue order, and hands them to the progress engine. Sub-groups share the parent's
// transport and progress thread.
#include "comm/ucx/ucx_communicator.hpp"

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <sched.h>
#include <sys/random.h>

#include "comm/barrier.hpp"
#include "comm/bootstrap/bootstrap.hpp"
#include "comm/broadcast.hpp"
#include "comm/direct_allreduce.hpp"
#include "comm/direct_rsag.hpp"
#include "comm/point_to_point.hpp"
#include "comm/progress_engine.hpp"
#include "comm/recursive_halving.hpp"
#include "comm/reduce_kernels.hpp"
#include "comm/reduce_to_root.hpp"
#include "comm/ring_collective.hpp"
#include "comm/sequence_operation.hpp"
#include "comm/shm/shared_segments.hpp"
#include "comm/shm/shm_allreduce.hpp"
#include "comm/tags.hpp"
#include "comm/ucx/ucx_transport.hpp"

namespace dseek::comm {

namespace {

// What a root communicator and its sub-groups share: connections, progress thread, and
// the tag contexts in use in this process (a hash collision is refused, not ignored).
struct UcxWorld {
  std::unique_ptr<UcxTransport> transport;
  std::shared_ptr<ProgressEngine> engine;  // Work handles keep it (stopped) as their driver
  std::unique_ptr<SharedSegments> segments;  // all ranks on this host: all-reduces of the world go through them
  size_t shm_max_bytes = 0;                  // up to this size (CommOptions, or the environment)
  std::mutex mutex;
  std::multiset<uint32_t> contexts;

  ~UcxWorld() {
    engine->stop();  // joins the progress thread, waits out driving callers: the transport is ours again
    engine.reset();
    segments.reset();  // no operation is left to use them
    transport->close(std::chrono::milliseconds(2000));
  }
  void claim(uint32_t context) {
    std::lock_guard lock(mutex);
    if (contexts.count(context) != 0)
      throw CommError(ErrorKind::invalid_argument,
                      "communicator context collision (" + std::to_string(context) + "): create the groups in another order");
    contexts.insert(context);
  }
  void release(uint32_t context) {
    std::lock_guard lock(mutex);
    if (auto it = contexts.find(context); it != contexts.end()) contexts.erase(it);
  }
  // Whether `tag` may be one of this world's: a claimed context and a sender in the world
  // (the transport's stranger filter; under the worker lock).
  bool ours(uint64_t tag) {
    if (tag_sender(tag) >= transport->world_size()) return false;
    std::lock_guard lock(mutex);
    return contexts.count(tag_context(tag)) != 0;
  }
};

struct AtomicCounters {
  std::atomic<uint64_t> operations{0};
};

// A group plus the sequence numbers of the operations issued on it.
struct GroupState {
  std::shared_ptr<const GroupInfo> info;
  uint32_t next_seq = 0;
  std::vector<uint32_t> send_seq, recv_seq;  // point to point, per peer
};

class UcxCommunicator final : public Communicator {
 public:
  UcxCommunicator(std::shared_ptr<UcxWorld> world, GroupInfo info, CommOptions options, bool owns_world)
      : world_(std::move(world)), options_(options), owns_world_(owns_world) {
    main_.info = std::make_shared<const GroupInfo>(std::move(info));
    const GroupInfo& g = *main_.info;
    main_.send_seq.assign(static_cast<size_t>(g.size()), 0);
    main_.recv_seq.assign(static_cast<size_t>(g.size()), 0);
    world_->claim(g.context);
    claimed_.push_back(g.context);
    plan_hierarchy();
  }

  ~UcxCommunicator() override {
    if (owns_world_ && !world_->engine->broken()) {
      // Barrier before closing connections, so no peer still needs ours (bounded).
      try {
        barrier().wait(std::min<std::chrono::milliseconds>(options_.op_timeout, std::chrono::seconds(10)));
      } catch (...) {
      }
    }
    for (uint32_t c : claimed_) world_->release(c);
  }

  int rank() const override { return main_.info->index; }
  int size() const override { return main_.info->size(); }
  uint64_t epoch() const override { return options_.epoch; }
  const std::vector<int>& world_ranks() const override { return main_.info->members; }

  using Communicator::all_reduce;

  Work all_reduce(const void* in, void* out, size_t count, DataType type, ReduceOp op) override {
    require_reducible(type);
    const std::string name = describe("all_reduce", count, type, &op);
    const float scale = op == ReduceOp::avg ? 1.0f / static_cast<float>(size()) : 1.0f;
    const ReduceOp base = op == ReduceOp::avg ? ReduceOp::sum : op;
    const size_t bytes = count * element_size(type);
    const AllReduceAlgorithm forced = options_.all_reduce_algorithm;
    const bool shm_ready = owns_world_ && world_->segments;
    if (forced == AllReduceAlgorithm::shared_memory && !shm_ready)
      throw CommError(ErrorKind::invalid_argument,
                      "all-reduce algorithm 'shm' (DSEEK_COMM_ALLREDUCE / CommOptions::all_reduce_algorithm) needs "
                      "a world whose ranks all run on one host, with shared memory on");
    std::lock_guard lock(mutex_);
    auto work = new_work(name);
    if (count == 0) return finished(work);
    if (hierarchical_) {
      std::vector<std::unique_ptr<Operation>> parts;
      const bool several_local = local_.info->size() > 1;
      if (several_local)
        parts.push_back(std::make_unique<ReduceToRoot>(ctx(local_, work), in, out, count, type, base, 0));
      if (local_.info->index == 0)
        parts.push_back(flat_all_reduce(leaders_, work, several_local ? out : in, out, count, type, base, scale, bytes));
      if (several_local) parts.push_back(std::make_unique<Broadcast>(ctx(local_, work), out, bytes, 0));
      return submit(std::make_unique<SequenceOperation>(ctx(main_, work, false), std::move(parts)), work);
    }
    if (shm_ready && (forced == AllReduceAlgorithm::shared_memory ||
                      (forced == AllReduceAlgorithm::automatic && bytes <= world_->shm_max_bytes)))
      return submit(std::make_unique<ShmAllReduce>(ctx(main_, work), *world_->segments, in, out, count, type, base, scale),
                    work);
    return submit(flat_all_reduce(main_, work, in, out, count, type, base, scale, bytes), work);
  }

  Work reduce_scatter(const void* in, void* out, size_t count, DataType type, ReduceOp op) override {
    require_reducible(type);
    const float scale = op == ReduceOp::avg ? 1.0f / static_cast<float>(size()) : 1.0f;
    const ReduceOp base = op == ReduceOp::avg ? ReduceOp::sum : op;
    std::lock_guard lock(mutex_);
    auto work = new_work(describe("reduce_scatter", count, type, &op));
    if (count == 0) return finished(work);
    return submit(std::make_unique<RingCollective>(ctx(main_, work), RingCollective::Kind::reduce_scatter, in, out,
                                                   count, type, base, scale),
                  work);
  }

  Work all_gather(const void* in, void* out, size_t count, DataType type) override {
    std::lock_guard lock(mutex_);
    auto work = new_work(describe("all_gather", count, type, nullptr));
    if (count == 0) return finished(work);
    return submit(std::make_unique<RingCollective>(ctx(main_, work), RingCollective::Kind::all_gather, in, out, count,
                                                   type, ReduceOp::sum, 1.0f),
                  work);
  }

  Work broadcast(void* buffer, size_t count, DataType type, int root) override {
    check_rank(root, "broadcast root");
    std::lock_guard lock(mutex_);
    auto work = new_work(describe("broadcast", count, type, nullptr) + " from " + std::to_string(root));
    if (count == 0) return finished(work);
    return submit(std::make_unique<Broadcast>(ctx(main_, work), buffer, count * element_size(type), root), work);
  }

  Work send(const void* data, size_t count, DataType type, int peer) override {
    return point_to_point(true, const_cast<void*>(data), count, type, peer);
  }
  Work recv(void* data, size_t count, DataType type, int peer) override {
    return point_to_point(false, data, count, type, peer);
  }

  Work barrier() override {
    std::lock_guard lock(mutex_);
    auto work = new_work("barrier");
    return submit(std::make_unique<Barrier>(ctx(main_, work)), work);
  }

  void abort(const std::string& reason) override {
    world_->engine->abort(ErrorKind::aborted, "aborted: " + reason);
  }

  std::unique_ptr<Communicator> subgroup(const std::vector<int>& group_ranks) override {
    std::lock_guard lock(mutex_);
    const uint32_t index = children_++;
    if (group_ranks.empty()) throw CommError(ErrorKind::invalid_argument, "subgroup of no ranks");
    GroupInfo info;
    info.context = derive_context(main_.info->context, 3, index);
    info.index = -1;
    std::set<int> seen;
    for (size_t i = 0; i < group_ranks.size(); ++i) {
      const int g = group_ranks[i];
      check_rank(g, "subgroup member");
      if (!seen.insert(g).second) throw CommError(ErrorKind::invalid_argument, "subgroup lists a rank twice");
      info.members.push_back(main_.info->world_of(g));
      info.hosts.push_back(main_.info->hosts[static_cast<size_t>(g)]);
      if (g == rank()) info.index = static_cast<int>(i);
    }
    if (info.index < 0) return nullptr;
    return std::make_unique<UcxCommunicator>(world_, std::move(info), options_, false);
  }

  CommCounters counters() const override {
    CommCounters c;
    c.bytes_sent = bytes_->bytes_sent();
    c.bytes_received = bytes_->bytes_received();
    c.operations = counters_.operations.load();
    c.dropped_messages = world_->transport->dropped_messages();
    return c;
  }

 private:
  // Host-aware plan: the local group (ranks on this host, leader first) and the leaders'
  // group (the first rank of every host). Used when the group spans hosts and at least
  // one host holds several of its ranks.
  void plan_hierarchy() {
    const GroupInfo& g = *main_.info;
    std::vector<std::string> host_order;
    std::map<std::string, std::vector<int>> by_host;
    for (int r = 0; r < g.size(); ++r) {
      const std::string& h = g.hosts[static_cast<size_t>(r)];
      if (by_host.find(h) == by_host.end()) host_order.push_back(h);
      by_host[h].push_back(r);
    }
    const bool some_shared = std::any_of(by_host.begin(), by_host.end(), [](auto& kv) { return kv.second.size() > 1; });
    hierarchical_ = options_.hierarchical && host_order.size() > 1 && some_shared;
    if (!hierarchical_) return;
    const std::string& my_host = g.hosts[static_cast<size_t>(g.index)];
    const uint32_t host_index =
        static_cast<uint32_t>(std::find(host_order.begin(), host_order.end(), my_host) - host_order.begin());
    GroupInfo local, leaders;
    local.context = derive_context(g.context, 1, host_index);
    for (int r : by_host[my_host]) {
      if (r == g.index) local.index = static_cast<int>(local.members.size());
      local.members.push_back(g.world_of(r));
      local.hosts.push_back(my_host);
    }
    leaders.context = derive_context(g.context, 2, 0);
    leaders.index = -1;
    for (const auto& h : host_order) {
      const int leader = by_host[h].front();
      if (leader == g.index) leaders.index = static_cast<int>(leaders.members.size());
      leaders.members.push_back(g.world_of(leader));
      leaders.hosts.push_back(h);
    }
    world_->claim(local.context);
    claimed_.push_back(local.context);
    local_.info = std::make_shared<const GroupInfo>(std::move(local));
    if (leaders.index >= 0) {
      world_->claim(leaders.context);
      claimed_.push_back(leaders.context);
      leaders_.info = std::make_shared<const GroupInfo>(std::move(leaders));
    }
  }

  std::unique_ptr<Operation> flat_all_reduce(GroupState& group, const std::shared_ptr<WorkState>& work, const void* in,
                                             void* out, size_t count, DataType type, ReduceOp op, float scale,
                                             size_t bytes) {
    switch (options_.all_reduce_algorithm) {
      case AllReduceAlgorithm::direct:
        return std::make_unique<DirectAllReduce>(ctx(group, work), in, out, count, type, op, scale);
      case AllReduceAlgorithm::direct_rsag:
        return std::make_unique<DirectRsAgAllReduce>(ctx(group, work), in, out, count, type, op, scale);
      case AllReduceAlgorithm::recursive_halving:
        return std::make_unique<RecursiveHalvingAllReduce>(ctx(group, work), in, out, count, type, op, scale);
      case AllReduceAlgorithm::ring:
        return std::make_unique<RingCollective>(ctx(group, work), RingCollective::Kind::all_reduce, in, out, count,
                                                type, op, scale);
      case AllReduceAlgorithm::automatic:
      case AllReduceAlgorithm::shared_memory:  // not reached: all_reduce() refuses it here
        break;
    }
    const int n = group.info->size();
    if (bytes <= options_.small_message_bytes && n > 1)
      return std::make_unique<DirectAllReduce>(ctx(group, work), in, out, count, type, op, scale);
    // Power-of-two groups: every step waits for one partner, not for all peers.
    if (bytes <= options_.recursive_halving_max_bytes && n > 2 && (n & (n - 1)) == 0)
      return std::make_unique<RecursiveHalvingAllReduce>(ctx(group, work), in, out, count, type, op, scale);
    static const long rsag_env = [] { const char* v = std::getenv("DSEEK_COMM_RSAG_MAX"); return v ? std::atol(v) : -1L; }();
    const size_t rsag_max = rsag_env >= 0 ? static_cast<size_t>(rsag_env) : options_.direct_rsag_max_bytes;
    if (bytes <= rsag_max && n > 2)
      return std::make_unique<DirectRsAgAllReduce>(ctx(group, work), in, out, count, type, op, scale);
    return std::make_unique<RingCollective>(ctx(group, work), RingCollective::Kind::all_reduce, in, out, count, type, op,
                                            scale);
  }

  Work point_to_point(bool is_send, void* data, size_t count, DataType type, int peer) {
    check_rank(peer, is_send ? "send peer" : "recv peer");
    if (peer == rank()) throw CommError(ErrorKind::invalid_argument, "send/recv to oneself");
    std::lock_guard lock(mutex_);
    auto work = new_work(std::string(is_send ? "send" : "recv") + "(" + std::to_string(count) + " " + to_string(type) +
                         (is_send ? " to " : " from ") + std::to_string(peer) + ")");
    auto& seqs = is_send ? main_.send_seq : main_.recv_seq;
    const uint32_t pair_seq = seqs[static_cast<size_t>(peer)]++;
    return submit(std::make_unique<PointToPoint>(ctx(main_, work, false), is_send, peer, pair_seq, data,
                                                 count * element_size(type)),
                  work);
  }

  void check_rank(int r, const char* what) const {
    if (r < 0 || r >= size())
      throw CommError(ErrorKind::invalid_argument, std::string(what) + " " + std::to_string(r) + " is not a rank of a group of " +
                                                       std::to_string(size()));
  }

  std::string describe(const char* op, size_t count, DataType type, const ReduceOp* red) const {
    std::string s = std::string(op) + "(" + std::to_string(count) + " " + to_string(type);
    if (red != nullptr) s += std::string(" ") + to_string(*red);
    return s + ") epoch " + std::to_string(options_.epoch) + " rank " + std::to_string(rank()) + "/" +
           std::to_string(size());
  }

  std::shared_ptr<WorkState> new_work(const std::string& name) {
    ++counters_.operations;
    auto work = std::make_shared<WorkState>(name, std::chrono::steady_clock::now() + options_.op_timeout,
                                            options_.observer);
    if (world_->engine->caller_drives()) work->set_driver(world_->engine);  // a wait drives progress from the waiting thread
    return work;
  }

  Work finished(const std::shared_ptr<WorkState>& work) {
    work->complete();
    return Work(work);
  }

  // An operation context on `group`, taking the group's next sequence number.
  OpContext ctx(GroupState& group, const std::shared_ptr<WorkState>& work, bool take_seq = true) {
    OpContext c;
    c.transport = world_->transport.get();
    c.pool = &world_->engine->pool();
    c.group = group.info;
    c.options = options_;
    c.seq = take_seq ? group.next_seq++ : 0;
    c.work = work;
    c.totals = bytes_;
    return c;
  }

  Work submit(std::unique_ptr<Operation> op, const std::shared_ptr<WorkState>& work) {
    world_->engine->submit(std::move(op));
    return Work(work);
  }

  std::shared_ptr<UcxWorld> world_;
  CommOptions options_;
  bool owns_world_;
  std::mutex mutex_;  // issue order = sequence order
  GroupState main_, local_, leaders_;
  bool hierarchical_ = false;
  uint32_t children_ = 0;
  std::vector<uint32_t> claimed_;
  AtomicCounters counters_;
  std::shared_ptr<WorkState> bytes_ = std::make_shared<WorkState>("totals", std::chrono::steady_clock::time_point{});
};

}  // namespace

UcxCommunicatorBuilder::UcxCommunicatorBuilder(int world_rank, int world_size, CommOptions options)
    : rank_(world_rank), size_(world_size), options_(options),
      transport_(std::make_unique<UcxTransport>(world_rank, world_size, options.peer_failure_detection,
                                                options.net_device)) {
  // Measurement knobs: the ring's chunk size and pipeline depth (DSEEK_COMM_CHUNK_BYTES,
  // DSEEK_COMM_PIPELINE_DEPTH), the shared-memory chunk, and the all-reduce algorithm
  // (DSEEK_COMM_ALLREDUCE) override the options.
  if (const char* v = std::getenv("DSEEK_COMM_CHUNK_BYTES")) options_.chunk_bytes = static_cast<size_t>(std::atol(v));
  if (const char* v = std::getenv("DSEEK_COMM_PIPELINE_DEPTH")) options_.pipeline_depth = std::atoi(v);
  if (const char* v = std::getenv("DSEEK_COMM_SHM_CHUNK_BYTES")) options_.shm_chunk_bytes = static_cast<size_t>(std::atol(v));
  if (const char* v = std::getenv("DSEEK_COMM_ALLREDUCE"))
    options_.all_reduce_algorithm = parse_all_reduce_algorithm(v, "DSEEK_COMM_ALLREDUCE");
  if (world_size > kMaxWorldRanks)
    throw CommError(ErrorKind::invalid_argument, "at most " + std::to_string(kMaxWorldRanks) + " ranks");
}

UcxCommunicatorBuilder::~UcxCommunicatorBuilder() = default;

const std::string& UcxCommunicatorBuilder::address() const {
  if (!transport_) throw CommError(ErrorKind::invalid_argument, "builder already connected");
  return transport_->address();
}

std::unique_ptr<Communicator> UcxCommunicatorBuilder::connect(
    const std::vector<std::string>& addresses, const std::vector<std::string>& hosts,
    const std::function<void(Communicator*)>& while_connecting) {
  if (!transport_) throw CommError(ErrorKind::invalid_argument, "builder already connected");
  if (static_cast<int>(hosts.size()) != size_)
    throw CommError(ErrorKind::invalid_argument, "expected " + std::to_string(size_) + " host names");
  transport_->connect(addresses, data_key_);
  auto world = std::make_shared<UcxWorld>();
  // Strangers' messages are dropped once they stayed of no group for max(op_timeout,
  // 1 s) (the rule: UcxTransport::sweep). The world outlives its transport's progress.
  transport_->set_stranger_filter([w = world.get()](uint64_t tag) { return w->ours(tag); },
                                  std::max<std::chrono::milliseconds>(options_.op_timeout, std::chrono::seconds(1)));
  world->transport = std::move(transport_);
  world->engine = std::make_shared<ProgressEngine>(*world->transport);
  {
    // More ranks on this host than cores: waiting ranks yield instead of spinning.
    const std::string& mine = hosts[static_cast<size_t>(rank_)];
    const long local = std::count(hosts.begin(), hosts.end(), mine);
    cpu_set_t set;
    CPU_ZERO(&set);
    long cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (cores <= 0) cores = static_cast<long>(std::thread::hardware_concurrency());
    world->engine->set_oversubscribed(cores > 0 && local > cores);
    world->engine->set_no_spare_core(cores > 0 && local >= cores);
    static const long shm_max_env = [] { const char* v = std::getenv("DSEEK_COMM_SHM_MAX"); return v ? std::atol(v) : -1L; }();
    world->shm_max_bytes = shm_max_env >= 0 ? static_cast<size_t>(shm_max_env) : options_.shm_max_bytes;
  }
  GroupInfo info;
  info.context = derive_context(0, 0, 0);
  info.index = rank_;
  info.hosts = hosts;
  for (int r = 0; r < size_; ++r) info.members.push_back(r);
  auto comm = std::make_unique<UcxCommunicator>(world, std::move(info), options_, true);
  // Declared after `comm`: tells the caller it is gone before it is destroyed.
  struct Announced {
    const std::function<void(Communicator*)>& to;
    ~Announced() {
      if (to) to(nullptr);
    }
  } announced{while_connecting};
  if (while_connecting) while_connecting(comm.get());
  // Wire up and check every rank is there before anyone issues real work.
  comm->barrier().wait();
  const bool one_host = std::all_of(hosts.begin(), hosts.end(), [&](const std::string& h) { return h == hosts[0]; });
  static const bool shm_env = [] { const char* v = std::getenv("DSEEK_COMM_SHM"); return v == nullptr || std::atol(v) != 0; }();
  // Peer failure detection is a transport feature (UCX's PEER mode, over TCP): it and
  // shared memory exclude each other, as they do inside UCX 1.13.
  if (options_.shared_memory && !options_.peer_failure_detection && shm_env && one_host && size_ > 1) {
    // The same name on every rank, unique to this world: a hash of every worker address.
    uint64_t h = 1469598103934665603ULL;
    for (const auto& a : addresses)
      for (unsigned char c : a) h = (h ^ c) * 1099511628211ULL;
    char base[48];
    std::snprintf(base, sizeof base, "/dseek-ar-%016llx", static_cast<unsigned long long>(h));
    world->segments = std::make_unique<SharedSegments>(rank_, size_, options_.shm_chunk_bytes, base,
                                                       [&] { comm->barrier().wait(); });
  }
  return comm;
}

std::unique_ptr<Communicator> connect_ucx(Bootstrap& bootstrap, const std::string& host, const CommOptions& options) {
  UcxCommunicatorBuilder builder(bootstrap.rank(), bootstrap.size(), options);
  // Every rank offers a random data-plane key; rank 0's is the world's (as safe as the
  // bootstrap's own channel: a stranger who knows only a worker address has not got it).
  uint64_t offered = 0;
  if (::getrandom(&offered, sizeof offered, 0) != static_cast<ssize_t>(sizeof offered))
    throw CommError(ErrorKind::transport, "getrandom failed for the data-plane key");
  const auto all = bootstrap.all_gather(
      pack_strings({host, builder.address(), std::string(reinterpret_cast<const char*>(&offered), sizeof offered)}),
      options.op_timeout);
  std::vector<std::string> addresses, hosts;
  for (const auto& record : all) {
    auto parts = unpack_strings(record);
    if (parts.size() != 3 || parts[2].size() != sizeof(uint64_t))
      throw CommError(ErrorKind::invalid_argument, "malformed bootstrap record");
    hosts.push_back(std::move(parts[0]));
    addresses.push_back(std::move(parts[1]));
    if (hosts.size() == 1) {
      uint64_t key = 0;
      std::memcpy(&key, parts[2].data(), sizeof key);
      builder.set_data_key(key);
    }
  }
  return builder.connect(addresses, hosts);
}

}  // namespace dseek::comm
