// Implementation of ring_exchange.hpp.
#include "dist/ring_exchange.hpp"

#include <algorithm>

namespace dseek::dist {

float* pack_ranges(const std::vector<model::ParamRange>& ranges, const float* from, float* packed) {
  for (const auto& range : ranges) packed = std::copy_n(from + range.offset, range.count, packed);
  return packed;
}

const float* unpack_ranges(const std::vector<model::ParamRange>& ranges, const float* packed,
                           float* to) {
  for (const auto& range : ranges) {
    std::copy_n(packed, range.count, to + range.offset);
    packed += range.count;
  }
  return packed;
}

void exchange_with_neighbours(comm::Communicator& comm, const std::vector<float>& outgoing,
                              int to, std::vector<float>& incoming, int from) {
  // Both posted before either is waited for: with two ranks the peers are the same
  // node, and each must be sending while the other receives.
  auto received = comm.recv(incoming.data(), incoming.size(), comm::DataType::f32, from);
  auto sent = comm.send(outgoing.data(), outgoing.size(), comm::DataType::f32, to);
  try {
    received.wait();
    sent.wait();
  } catch (...) {
    // The data plane may still write into `incoming` or read `outgoing` until both
    // transfers have ended: end them (the epoch is over anyway) before the buffers can go.
    comm.abort("the ring's exchange failed");
    for (auto* work : {&received, &sent}) {
      try {
        work->wait();
      } catch (...) {  // expected: aborted
      }
    }
    throw;
  }
}

}  // namespace dseek::dist
