// Turns a failed UCX status into a CommError with the call site (see ucx_check.hpp).
#include "comm/ucx/ucx_check.hpp"

#include <string>

#include "comm/types.hpp"

namespace dseek::comm {

void throw_ucx_error(const char* call, ucs_status_t status, const char* file, int line) {
  const ErrorKind kind = (status == UCS_ERR_UNREACHABLE || status == UCS_ERR_CONNECTION_RESET ||
                          status == UCS_ERR_ENDPOINT_TIMEOUT)
                             ? ErrorKind::peer_failed
                             : ErrorKind::transport;
  throw CommError(kind, std::string("UCX error '") + ucs_status_string(status) + "' in " + call +
                            " at " + file + ":" + std::to_string(line));
}

}  // namespace dseek::comm
