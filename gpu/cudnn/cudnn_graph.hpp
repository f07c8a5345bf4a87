// A small builder over cuDNN's backend graph API: tensors, pointwise / reduction /
// matmul / reshape operations, and the execution plan that cuDNN's heuristics pick for
// the whole graph, as the cudnn-frontend library does (not installed here). Tensors
// are 4-d ([batch, heads, rows, columns]); a virtual tensor lives only inside the fused
// kernel; a by-value scalar is passed from host memory at execution.
//
// The graph's descriptors live as long as the plan built from them (Plan owns them).
#pragma once

#include <cudnn_graph.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpu/cudnn/cudnn_library.hpp"

namespace dseek::gpu::cudnn {

using Shape = std::array<int64_t, 4>;

// One backend descriptor, destroyed with its owner.
class Descriptor {
 public:
  Descriptor(const Library& lib, cudnnBackendDescriptorType_t type);
  ~Descriptor();
  Descriptor(Descriptor&& other) noexcept;
  Descriptor& operator=(Descriptor&&) = delete;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return descriptor_; }
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
           const void* values);
  void set_descriptor(cudnnBackendAttributeName_t name, const Descriptor& value);
  void finalize();

 private:
  const Library* lib_;
  cudnnBackendDescriptor_t descriptor_ = nullptr;
};

class Graph;

// A finalized execution plan and everything it was built from.
class Plan {
 public:
  int64_t workspace_bytes() const { return workspace_bytes_; }
  // Runs the plan on the handle's stream. `bound` maps every non-virtual, not by-value
  // tensor's uid to its device pointer.
  void execute(cudnnHandle_t handle, const std::map<int64_t, void*>& bound, void* workspace);

 private:
  friend class Graph;
  const Library* lib_ = nullptr;
  std::shared_ptr<Graph> graph_;  // keeps the tensors and operations alive
  std::unique_ptr<Descriptor> plan_;
  int64_t workspace_bytes_ = 0;
};

class Graph : public std::enable_shared_from_this<Graph> {
 public:
  explicit Graph(const Library& lib) : lib_(&lib) {}

  // A tensor in device memory, bound by `uid` at execution (uids below 1000).
  int64_t tensor(int64_t uid, const Shape& dims, const Shape& strides, cudnnDataType_t type);
  // A tensor that lives only inside the fused kernel.
  int64_t virtual_tensor(const Shape& dims, const Shape& strides,
                         cudnnDataType_t type = CUDNN_DATA_FLOAT);
  // A scalar passed by value (broadcast over every element).
  int64_t scalar(float value);

  // y = mode(x[, b[, t]]) into a new virtual tensor shaped like x, of `type`.
  int64_t pointwise(cudnnPointwiseMode_t mode, int64_t x, int64_t b = -1, int64_t t = -1,
                    cudnnDataType_t type = CUDNN_DATA_FLOAT,
                    cudnnDataType_t compute = CUDNN_DATA_FLOAT);
  // The same into an existing tensor y.
  void pointwise_into(int64_t y, cudnnPointwiseMode_t mode, int64_t x, int64_t b = -1,
                      int64_t t = -1, cudnnDataType_t compute = CUDNN_DATA_FLOAT);
  // y = GEN_INDEX(x) along `axis`, int32, shaped like x.
  int64_t index(int64_t x, int64_t axis);
  // y = reduce(x) over the axes where y has size 1.
  void reduction_into(int64_t y, cudnnReduceTensorOp_t op, int64_t x);
  // c = a @ b over the last two axes (fp32 accumulation).
  void matmul_into(int64_t c, int64_t a, int64_t b);
  // y = x seen with y's dimensions and strides.
  void reshape_into(int64_t y, int64_t x);

  const Shape& dims(int64_t uid) const { return specs_.at(uid).dims; }
  const Shape& strides(int64_t uid) const { return specs_.at(uid).strides; }

  // The operation graph, cuDNN's heuristics (mode A) and the first of their engine
  // configurations that finalizes. Throws std::runtime_error naming what failed, with
  // `what` (e.g. "attention forward B=16 T=1024 ...") in front.
  Plan build(cudnnHandle_t handle, const std::string& what);

 private:
  friend class Plan;
  struct Spec {
    Shape dims;
    Shape strides;
    cudnnDataType_t type;
    bool is_virtual;
  };
  int64_t add_tensor(int64_t uid, const Shape& dims, const Shape& strides, cudnnDataType_t type,
                     bool is_virtual, bool by_value);
  void add_operation(Descriptor operation);
  // One pointwise operation; axis >= 0 only for GEN_INDEX.
  void add_pointwise(int64_t y, cudnnPointwiseMode_t mode, int64_t x, int64_t b, int64_t t,
                     cudnnDataType_t compute, int64_t axis);

  const Library* lib_;
  std::map<int64_t, Spec> specs_;
  std::map<int64_t, Descriptor> tensors_;
  std::vector<Descriptor> descriptors_;  // pointwise / matmul / reduction descriptors
  std::vector<Descriptor> operations_;
  std::vector<std::unique_ptr<float>> scalar_values_;  // stable host addresses
  std::map<int64_t, const float*> scalars_;
  std::unique_ptr<Descriptor> operation_graph_;
  std::vector<Descriptor> engine_configs_;
  int64_t next_virtual_uid_ = 1000;
};

// Packed strides of dims (row-major, last axis contiguous).
Shape packed_strides(const Shape& dims);

}  // namespace dseek::gpu::cudnn
