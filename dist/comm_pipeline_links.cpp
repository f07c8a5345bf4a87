// Implementation of comm_pipeline_links.hpp.
#include "dist/comm_pipeline_links.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "dist/ordered_double_sum.hpp"

namespace dseek::dist {

CommPipelineLinks::CommPipelineLinks(comm::Communicator& comm, comm::Communicator* device)
    : comm_(comm) {
  const int P = comm.size();
  if (P < 2) throw std::invalid_argument("a pipeline needs at least 2 stages (parallel.pipeline)");
  ends_ = comm.subgroup({0, P - 1});
  if (device == nullptr) return;
  if (device->size() != P || device->rank() != comm.rank())
    throw std::logic_error("CommPipelineLinks: the device communicator holds other ranks");
  on_device_ = true;
  ends_on_device_ = device->subgroup({0, P - 1});
  // Stage s hands over to s + 1 and the last to the first (interleaved chunks wrap).
  std::set<std::pair<int, int>> pairs;
  for (int s = 0; s < P; ++s) pairs.emplace(std::min(s, (s + 1) % P), std::max(s, (s + 1) % P));
  const int me = comm.rank();
  for (const auto& [low, high] : pairs) {
    // Every rank cuts both groups, in the same order (a split is collective).
    auto upward = device->subgroup({low, high});
    auto downward = device->subgroup({low, high});
    if (me == low) {
      sends_to_[high] = std::move(upward);
      receives_from_[high] = std::move(downward);
    } else if (me == high) {
      receives_from_[low] = std::move(upward);
      sends_to_[low] = std::move(downward);
    }
  }
}

comm::Communicator& CommPipelineLinks::direction(
    std::map<int64_t, std::unique_ptr<comm::Communicator>>& groups, int64_t peer, const char* what) {
  const auto it = groups.find(peer);
  if (it == groups.end())
    throw std::logic_error(std::string("CommPipelineLinks: no device group to ") + what + " stage " +
                           std::to_string(peer) + " (only ring neighbours exchange backend memory)");
  return *it->second;
}

train::PipelineLinks::Handle CommPipelineLinks::keep(comm::Work work) {
  const Handle handle = next_handle_++;
  pending_.emplace(handle, std::move(work));
  return handle;
}

train::PipelineLinks::Handle CommPipelineLinks::post_send(const float* data, size_t count, int64_t peer) {
  return keep(comm_.send(data, count, comm::DataType::f32, static_cast<int>(peer)));
}

train::PipelineLinks::Handle CommPipelineLinks::post_recv(float* data, size_t count, int64_t peer) {
  return keep(comm_.recv(data, count, comm::DataType::f32, static_cast<int>(peer)));
}

// In a 2-rank group the peer is the rank that is not this one.
train::PipelineLinks::Handle CommPipelineLinks::post_backend_send(const float* data, size_t count,
                                                                  int64_t peer) {
  comm::Communicator& group = direction(sends_to_, peer, "send to");
  return keep(group.send(data, count, comm::DataType::f32, 1 - group.rank()));
}

train::PipelineLinks::Handle CommPipelineLinks::post_backend_recv(float* data, size_t count,
                                                                  int64_t peer) {
  comm::Communicator& group = direction(receives_from_, peer, "receive from");
  return keep(group.recv(data, count, comm::DataType::f32, 1 - group.rank()));
}

void CommPipelineLinks::wait(Handle handle) {
  const auto it = pending_.find(handle);
  if (it == pending_.end()) throw std::logic_error("CommPipelineLinks: unknown transfer handle");
  const comm::Work work = it->second;
  pending_.erase(it);
  work.wait();
}

void CommPipelineLinks::sum_first_and_last(float* data, size_t count) {
  if (!ends_) throw std::logic_error("CommPipelineLinks: a middle stage has no tied embedding");
  ends_->all_reduce(data, count, comm::DataType::f32, comm::ReduceOp::sum).wait();
}

void CommPipelineLinks::sum_first_and_last_backend(float* data, size_t count) {
  if (!ends_on_device_)
    throw std::logic_error("CommPipelineLinks: no device group of the first and last stage");
  ends_on_device_->all_reduce(data, count, comm::DataType::f32, comm::ReduceOp::sum).wait();
}

void CommPipelineLinks::sum_over_stages(std::span<double> values) {
  sum_doubles_in_rank_order(comm_, values, gathered_);
}

void CommPipelineLinks::sum_over_stages(std::span<float> values) {
  if (values.empty()) return;
  comm_.all_reduce(values.data(), values.size(), comm::DataType::f32, comm::ReduceOp::sum).wait();
}

void CommPipelineLinks::broadcast_from_first(std::span<double> values) {
  if (values.empty()) return;
  comm_.broadcast(values.data(), values.size() * sizeof(double), comm::DataType::u8, 0).wait();
}

}  // namespace dseek::dist
