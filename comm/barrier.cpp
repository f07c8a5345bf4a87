// Dissemination barrier (see barrier.hpp).
#include "comm/barrier.hpp"

namespace dseek::comm {

void Barrier::start() {
  if (ranks() > 1) post_round();
}

void Barrier::post_round() {
  const int n = ranks(), r = rank();
  send_ = send_to((r + distance_) % n, round_, &out_token_, 1);
  recv_ = recv_from((r - distance_ + n) % n, round_, &in_token_, 1);
}

bool Barrier::advance() {
  if (ranks() == 1) return true;
  for (;;) {
    const bool sent = collect(send_, true);
    const bool received = collect(recv_, false);
    if (!sent || !received) return false;
    distance_ *= 2;
    ++round_;
    if (distance_ >= ranks()) return true;
    post_round();
  }
}

}  // namespace dseek::comm
