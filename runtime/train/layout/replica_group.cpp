// Implementation of replica_group.hpp.
#include "runtime/train/layout/replica_group.hpp"

#include <stdexcept>
#include <string>

namespace dseek::train {

ReplicaSlice replica_slice(int64_t batch_size, int replicas, int replica) {
  if (replicas < 1 || replica < 0 || replica >= replicas)
    throw std::invalid_argument("replica " + std::to_string(replica) + " of " +
                                std::to_string(replicas) + " is not a valid data-parallel rank");
  if (batch_size % replicas != 0)
    throw std::invalid_argument("train.batch_size (" + std::to_string(batch_size) +
                                ") must be divisible by parallel.data (" +
                                std::to_string(replicas) +
                                "): every replica computes an equal slice of the global batch");
  const int64_t size = batch_size / replicas;
  return {replica * size, size};
}

}  // namespace dseek::train
