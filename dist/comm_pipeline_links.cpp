// Implementation of comm_pipeline_links.hpp.
#include "dist/comm_pipeline_links.hpp"

#include <stdexcept>

#include "dist/ordered_double_sum.hpp"

namespace dseek::dist {

CommPipelineLinks::CommPipelineLinks(comm::Communicator& comm) : comm_(comm) {
  if (comm.size() < 2)
    throw std::invalid_argument("a pipeline needs at least 2 stages (parallel.pipeline)");
  ends_ = comm.subgroup({0, comm.size() - 1});
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
