// What a rank does when its epoch's data plane could not connect (control/epoch_loop.hpp):
// the epoch is failed and re-planned, never waited out. The coordinator starts a new
// epoch (asked through the node's agent, replan_atom): with the same members while
// connecting to a peer failed fewer than kConnectAttempts times in a row, after a backoff
// that doubles (kFirstBackoff, at most kMaxBackoff; a link that just came back or a stale
// neighbour entry usually heals in it); at the kConnectAttempts-th failure the peer is
// taken for lost (the coordinator drops it; it joins again like any lost node, and the
// survivors go on without it meanwhile under the usual world policy). The peers that
// wait for this rank in the connect's barrier are aborted by the new epoch.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>

namespace dseek::actors {

constexpr int kConnectAttempts = 3;
constexpr std::chrono::milliseconds kFirstBackoff{250};
constexpr std::chrono::milliseconds kMaxBackoff{2000};

// The next step after a failed connect to one node.
struct ConnectRetry {
  int attempt = 0;                    // failed connects to that node in a row (1-based)
  std::chrono::milliseconds backoff;  // wait this long before asking for a new epoch
  bool drop_peer = false;             // attempt == kConnectAttempts: the node is lost
};

class ConnectRetries {
 public:
  // A connect that could not reach node `node`.
  ConnectRetry failed(int64_t node);
  // A connect that succeeded: every count starts again.
  void connected() { failures_.clear(); }

 private:
  std::map<int64_t, int> failures_;
};

}  // namespace dseek::actors
