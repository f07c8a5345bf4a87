// Implementation of ordered_double_sum.hpp.
#include "dist/ordered_double_sum.hpp"

#include <cstring>

namespace dseek::dist {

void sum_doubles_in_rank_order(comm::Communicator& comm, std::span<double> values,
                               std::vector<unsigned char>& scratch) {
  if (values.empty()) return;
  const size_t slot = values.size() * sizeof(double);
  const size_t ranks = static_cast<size_t>(comm.size());
  const size_t mine = static_cast<size_t>(comm.rank()) * slot;
  scratch.resize(ranks * slot);
  std::memcpy(scratch.data() + mine, values.data(), slot);
  comm.all_gather(scratch.data() + mine, scratch.data(), ranks * slot, comm::DataType::u8).wait();
  for (size_t i = 0; i < values.size(); ++i) {
    double sum = 0.0;
    for (size_t r = 0; r < ranks; ++r) {
      double value;
      std::memcpy(&value, scratch.data() + r * slot + i * sizeof(double), sizeof value);
      sum += value;
    }
    values[i] = sum;
  }
}

}  // namespace dseek::dist
