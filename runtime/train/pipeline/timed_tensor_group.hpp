// The model's tensor group with the time spent in its all-reduces counted: they block
// the step, so that time is exposed communication (the step's comm_ms), not compute.
#pragma once

#include <chrono>
#include <cstddef>
#include <utility>

#include "runtime/model/tensor_group.hpp"

namespace dseek::train {

class TimedTensorGroup final : public model::TensorGroup {
 public:
  explicit TimedTensorGroup(model::TensorGroup& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void all_reduce_sum(float* data, size_t count) override {
    timed([&] { inner_.all_reduce_sum(data, count); });
  }
  bool sums_backend_memory() const override { return inner_.sums_backend_memory(); }
  void all_reduce_backend_sum(float* data, size_t count) override {
    timed([&] { inner_.all_reduce_backend_sum(data, count); });
  }
  // The milliseconds spent since the last call.
  double take_spent_ms() { return std::exchange(spent_ms_, 0.0); }

 private:
  template <class Body>
  void timed(Body&& body) {
    const auto start = std::chrono::steady_clock::now();
    body();
    spent_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count();
  }

  model::TensorGroup& inner_;
  double spent_ms_ = 0.0;
};

}  // namespace dseek::train
