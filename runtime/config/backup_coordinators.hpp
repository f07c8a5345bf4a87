// cluster.backup_coordinators: where the job's coordinator moves when the node that runs
// it is lost for good. The key is one string of "NODE@HOST:PORT" entries separated by
// spaces or commas, in order of succession ("1@10.0.0.2:7420 2@10.0.0.3:7420"): node
// NODE may run the job's coordinator at HOST:PORT (one of its own addresses). Parsed once
// here; the actors see the list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dseek::config {

struct BackupCoordinator {
  int64_t node_id = 0;
  std::string address;  // host:port
};

// The entries of `text` in order; throws std::invalid_argument naming the entry that is
// not NODE@HOST:PORT (a port 1..65535) or a node listed twice.
std::vector<BackupCoordinator> parse_backup_coordinators(const std::string& text);

}  // namespace dseek::config
