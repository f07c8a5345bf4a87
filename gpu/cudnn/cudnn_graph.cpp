// The backend graph API behind cudnn_graph.hpp: each tensor and operation one
// descriptor, set attribute by attribute and finalized, as cuDNN's documentation lays
// out (tensor: data type, dimensions, strides, uid, alignment, virtual, by value).
#include "gpu/cudnn/cudnn_graph.hpp"

#include <stdexcept>
#include <utility>

namespace dseek::gpu::cudnn {

namespace {
constexpr int64_t kAlignment = 16;  // bytes; every bound pointer is at least this aligned
}

Shape packed_strides(const Shape& dims) {
  return {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
}

// --- Descriptor -------------------------------------------------------------------------
Descriptor::Descriptor(const Library& lib, cudnnBackendDescriptorType_t type) : lib_(&lib) {
  DSEEK_CUDNN_CHECK(lib, lib.create_descriptor(type, &descriptor_));
}

Descriptor::~Descriptor() {
  if (descriptor_ != nullptr) lib_->destroy_descriptor(descriptor_);
}

Descriptor::Descriptor(Descriptor&& other) noexcept
    : lib_(other.lib_), descriptor_(std::exchange(other.descriptor_, nullptr)) {}

void Descriptor::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                     int64_t count, const void* values) {
  DSEEK_CUDNN_CHECK(*lib_, lib_->set_attribute(descriptor_, name, type, count, values));
}

void Descriptor::set_descriptor(cudnnBackendAttributeName_t name, const Descriptor& value) {
  cudnnBackendDescriptor_t raw = value.get();
  set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

void Descriptor::finalize() { DSEEK_CUDNN_CHECK(*lib_, lib_->finalize(descriptor_)); }

// --- Graph: tensors ---------------------------------------------------------------------
int64_t Graph::add_tensor(int64_t uid, const Shape& dims, const Shape& strides,
                          cudnnDataType_t type, bool is_virtual, bool by_value) {
  if (specs_.count(uid) != 0)
    throw std::logic_error("cudnn graph: tensor uid " + std::to_string(uid) + " used twice");
  Descriptor tensor(*lib_, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  tensor.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  tensor.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
  tensor.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
  tensor.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  const int64_t alignment = kAlignment;
  tensor.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  const bool virtual_flag = is_virtual;
  tensor.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virtual_flag);
  if (by_value) {
    const bool by_value_flag = true;
    tensor.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value_flag);
  }
  tensor.finalize();
  specs_.emplace(uid, Spec{dims, strides, type, is_virtual});
  tensors_.emplace(uid, std::move(tensor));
  return uid;
}

int64_t Graph::tensor(int64_t uid, const Shape& dims, const Shape& strides,
                      cudnnDataType_t type) {
  if (uid >= 1000) throw std::logic_error("cudnn graph: bound tensor uids are below 1000");
  return add_tensor(uid, dims, strides, type, false, false);
}

int64_t Graph::virtual_tensor(const Shape& dims, const Shape& strides, cudnnDataType_t type) {
  return add_tensor(next_virtual_uid_++, dims, strides, type, true, false);
}

int64_t Graph::scalar(float value) {
  const int64_t uid = add_tensor(next_virtual_uid_++, {1, 1, 1, 1}, {1, 1, 1, 1},
                                 CUDNN_DATA_FLOAT, false, true);
  scalar_values_.push_back(std::make_unique<float>(value));
  scalars_[uid] = scalar_values_.back().get();
  return uid;
}

// --- Graph: operations --------------------------------------------------------------------
void Graph::add_operation(Descriptor operation) {
  operation.finalize();
  operations_.push_back(std::move(operation));
}

void Graph::pointwise_into(int64_t y, cudnnPointwiseMode_t mode, int64_t x, int64_t b,
                           int64_t t, cudnnDataType_t compute) {
  add_pointwise(y, mode, x, b, t, compute, -1);
}

void Graph::add_pointwise(int64_t y, cudnnPointwiseMode_t mode, int64_t x, int64_t b, int64_t t,
                          cudnnDataType_t compute, int64_t axis) {
  Descriptor description(*lib_, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  description.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  description.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  if (axis >= 0) description.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
  description.finalize();

  Descriptor operation(*lib_, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  operation.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, description);
  operation.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, tensors_.at(x));
  if (b >= 0) operation.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, tensors_.at(b));
  if (t >= 0) operation.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, tensors_.at(t));
  operation.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, tensors_.at(y));
  descriptors_.push_back(std::move(description));
  add_operation(std::move(operation));
}

int64_t Graph::pointwise(cudnnPointwiseMode_t mode, int64_t x, int64_t b, int64_t t,
                         cudnnDataType_t type, cudnnDataType_t compute) {
  const int64_t y = virtual_tensor(dims(x), strides(x), type);
  pointwise_into(y, mode, x, b, t, compute);
  return y;
}

int64_t Graph::index(int64_t x, int64_t axis) {
  const int64_t y = virtual_tensor(dims(x), strides(x), CUDNN_DATA_INT32);
  add_pointwise(y, CUDNN_POINTWISE_GEN_INDEX, x, -1, -1, CUDNN_DATA_FLOAT, axis);
  return y;
}

void Graph::reduction_into(int64_t y, cudnnReduceTensorOp_t op, int64_t x) {
  Descriptor description(*lib_, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  description.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &op);
  description.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  description.finalize();
  Descriptor operation(*lib_, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  operation.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_DESC, description);
  operation.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, tensors_.at(x));
  operation.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, tensors_.at(y));
  descriptors_.push_back(std::move(description));
  add_operation(std::move(operation));
}

void Graph::matmul_into(int64_t c, int64_t a, int64_t b) {
  Descriptor description(*lib_, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  description.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  description.finalize();
  Descriptor operation(*lib_, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  operation.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_ADESC, tensors_.at(a));
  operation.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_BDESC, tensors_.at(b));
  operation.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_CDESC, tensors_.at(c));
  operation.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_DESC, description);
  descriptors_.push_back(std::move(description));
  add_operation(std::move(operation));
}

void Graph::reshape_into(int64_t y, int64_t x) {
  Descriptor operation(*lib_, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  operation.set_descriptor(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, tensors_.at(x));
  operation.set_descriptor(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, tensors_.at(y));
  add_operation(std::move(operation));
}

// --- Graph: plan --------------------------------------------------------------------------
Plan Graph::build(cudnnHandle_t handle, const std::string& what) {
  try {
    operation_graph_ = std::make_unique<Descriptor>(*lib_, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    std::vector<cudnnBackendDescriptor_t> raw_operations;
    for (const Descriptor& operation : operations_) raw_operations.push_back(operation.get());
    operation_graph_->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                          static_cast<int64_t>(raw_operations.size()), raw_operations.data());
    operation_graph_->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    operation_graph_->finalize();

    Descriptor heuristics(*lib_, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heuristics.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *operation_graph_);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    heuristics.finalize();
    int64_t count = 0;
    DSEEK_CUDNN_CHECK(*lib_, lib_->get_attribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                                 nullptr));
    if (count <= 0) throw std::runtime_error("cuDNN's heuristics offer no engine for this graph");
    for (int64_t i = 0; i < count; ++i)
      engine_configs_.emplace_back(*lib_, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    std::vector<cudnnBackendDescriptor_t> raw_configs;
    for (const Descriptor& config : engine_configs_) raw_configs.push_back(config.get());
    int64_t returned = 0;
    DSEEK_CUDNN_CHECK(*lib_, lib_->get_attribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned,
                                                 raw_configs.data()));

    std::string refusals;
    for (int64_t i = 0; i < returned; ++i) {
      auto plan = std::make_unique<Descriptor>(*lib_, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
      plan->set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, engine_configs_[i]);
      const cudnnStatus_t status = lib_->finalize(plan->get());
      if (status != CUDNN_STATUS_SUCCESS) {
        char message[512] = {0};
        lib_->get_last_error_string(message, sizeof message);
        refusals += "; config " + std::to_string(i) + ": " + lib_->get_error_string(status) +
                    (message[0] != '\0' ? std::string(" (") + message + ")" : std::string());
        continue;
      }
      Plan result;
      result.lib_ = lib_;
      DSEEK_CUDNN_CHECK(*lib_, lib_->get_attribute(plan->get(),
                                                   CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                   CUDNN_TYPE_INT64, 1, nullptr,
                                                   &result.workspace_bytes_));
      result.plan_ = std::move(plan);
      result.graph_ = shared_from_this();
      return result;
    }
    throw std::runtime_error("no engine configuration of " + std::to_string(returned) +
                             " finalized" + refusals);
  } catch (const std::exception& error) {
    throw std::runtime_error(what + ": " + error.what());
  }
}

void Plan::execute(cudnnHandle_t handle, const std::map<int64_t, void*>& bound, void* workspace) {
  std::vector<int64_t> uids;
  std::vector<void*> pointers;
  for (const auto& [uid, pointer] : bound) {
    uids.push_back(uid);
    pointers.push_back(pointer);
  }
  for (const auto& [uid, value] : graph_->scalars_) {
    uids.push_back(uid);
    pointers.push_back(const_cast<float*>(value));
  }
  Descriptor pack(*lib_, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
           static_cast<int64_t>(uids.size()), uids.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
           static_cast<int64_t>(pointers.size()), pointers.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize();
  DSEEK_CUDNN_CHECK(*lib_, lib_->execute(handle, plan_->get(), pack.get()));
}

}  // namespace dseek::gpu::cudnn
