// Runs operations one after another as one operation: the building block of composite
// collectives such as the hierarchical all-reduce. The parts are built when the caller
// issues the operation, so each part's sequence number is fixed in issue order.
#pragma once

#include <memory>
#include <vector>

#include "comm/operation.hpp"

namespace dseek::comm {

class SequenceOperation final : public Operation {
 public:
  SequenceOperation(OpContext ctx, std::vector<std::unique_ptr<Operation>> parts)
      : Operation(std::move(ctx)), parts_(std::move(parts)) {}
  void start() override;
  bool advance() override;

 private:
  std::vector<std::unique_ptr<Operation>> parts_;
  size_t current_ = 0;
};

}  // namespace dseek::comm
