// Point-to-point messages (see point_to_point.hpp).
#include "comm/point_to_point.hpp"

namespace dseek::comm {

void PointToPoint::start() {
  io_ = is_send_ ? p2p_send(peer_, pair_seq_, data_, bytes_) : p2p_recv(peer_, pair_seq_, data_, bytes_);
}

}  // namespace dseek::comm
