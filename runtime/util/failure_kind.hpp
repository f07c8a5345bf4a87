// Which failures a restart can cure. A config, data, device or checkpoint error (and a
// cluster environment that contradicts the config) fails the same way on every start:
// it is permanent, the node exits with exit_code::permanent at once, and neither
// `dseek launch`, the node's supervisor nor a restart loop tries again. Everything else
// (a lost peer, a crashed actor, a full disk, a coordinator not up yet) is retried.
// dseek-node, `dseek launch` and the worker that runs the training all ask here.
#pragma once

#include <exception>
#include <string>

namespace dseek::util {

struct FailureKind {
  std::string name;        // "config error", "data error", ...; "" for the others
  bool permanent = false;
};

FailureKind classify_failure(const std::exception& error);

// "data error: <what>" for a permanent error, else what() alone.
std::string describe_failure(const std::exception& error);

}  // namespace dseek::util
