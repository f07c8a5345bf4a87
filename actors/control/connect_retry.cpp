// Implementation of connect_retry.hpp.
#include "actors/control/connect_retry.hpp"

#include <algorithm>

namespace dseek::actors {

ConnectRetry ConnectRetries::failed(int64_t node) {
  ConnectRetry next;
  next.attempt = ++failures_[node];
  next.backoff = std::min(kMaxBackoff, kFirstBackoff * (1 << std::min(next.attempt - 1, 8)));
  next.drop_peer = next.attempt >= kConnectAttempts;
  if (next.drop_peer) failures_.erase(node);
  return next;
}

}  // namespace dseek::actors
