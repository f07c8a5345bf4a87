// The one error check for UCX calls: DSEEK_UCX_CHECK(call) throws a CommError naming the
// call, the UCX status and the file and line (like NCCL's NCCLCHECK).
#pragma once

#include <ucs/type/status.h>

namespace dseek::comm {

// `peer` >= 0: the call concerned that rank (named in the message and CommError::peer()).
[[noreturn]] void throw_ucx_error(const char* call, ucs_status_t status, const char* file, int line,
                                  int peer = -1);

}  // namespace dseek::comm

#define DSEEK_UCX_CHECK(call)                                                      \
  do {                                                                             \
    ucs_status_t dseek_ucx_status_ = (call);                                       \
    if (dseek_ucx_status_ != UCS_OK && dseek_ucx_status_ != UCS_INPROGRESS)        \
      ::dseek::comm::throw_ucx_error(#call, dseek_ucx_status_, __FILE__, __LINE__); \
  } while (0)
