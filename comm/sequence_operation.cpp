// Sequential composition of operations (see sequence_operation.hpp).
#include "comm/sequence_operation.hpp"

namespace dseek::comm {

void SequenceOperation::start() {
  if (!parts_.empty()) parts_[0]->start();
}

bool SequenceOperation::advance() {
  while (current_ < parts_.size()) {
    if (!parts_[current_]->advance()) return false;
    parts_[current_].reset();  // give its staging buffers back before the next part
    if (++current_ < parts_.size()) parts_[current_]->start();
  }
  return true;
}

}  // namespace dseek::comm
