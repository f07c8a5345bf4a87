// CudnnAttention in a build without cuDNN's headers: never available (cudnn_attention.hpp).
#include "gpu/cudnn/cudnn_attention.hpp"

namespace dseek::gpu {

std::unique_ptr<CudnnAttention> CudnnAttention::create(cudaStream_t, Memory, std::string* why_not) {
  if (why_not != nullptr) *why_not = "this build has no cuDNN (cudnn_graph.h was not found)";
  return nullptr;
}

}  // namespace dseek::gpu
