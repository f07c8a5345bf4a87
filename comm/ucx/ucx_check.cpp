// Turns a failed UCX status into a CommError with the call site (see ucx_check.hpp).
#include "comm/ucx/ucx_check.hpp"

#include <string>

#include "comm/types.hpp"

namespace dseek::comm {

void throw_ucx_error(const char* call, ucs_status_t status, const char* file, int line, int peer) {
  const ErrorKind kind = (status == UCS_ERR_UNREACHABLE || status == UCS_ERR_CONNECTION_RESET ||
                          status == UCS_ERR_ENDPOINT_TIMEOUT)
                             ? ErrorKind::peer_failed
                             : ErrorKind::transport;
  throw CommError(kind,
                  std::string("UCX error '") + ucs_status_string(status) + "' in " + call +
                      (peer >= 0 ? " to rank " + std::to_string(peer) : std::string()) + " at " +
                      file + ":" + std::to_string(line),
                  peer);
}

}  // namespace dseek::comm
