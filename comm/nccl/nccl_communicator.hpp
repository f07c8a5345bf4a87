// The NCCL backend: the same Communicator interface over NCCL for buffers in GPU memory.
// Operations run on the communicator's own CUDA stream; a watcher thread turns their
// completion events into Work completions, enforces each operation's deadline and polls
// NCCL's asynchronous errors; a timeout, an error or abort() aborts the NCCL
// communicator (ncclCommAbort), so no rank waits forever in a dead collective.
// Built only when CUDA is found (DSEEK_HAVE_NCCL).
#pragma once

#include <memory>

#include "comm/communicator.hpp"

namespace dseek::comm {

class Bootstrap;

// Creates the NCCL communicator of bootstrap.size() ranks on CUDA device `device`; rank 0
// makes the unique id and the bootstrap spreads it.
std::unique_ptr<Communicator> connect_nccl(Bootstrap& bootstrap, int device, const CommOptions& options = {});

}  // namespace dseek::comm
