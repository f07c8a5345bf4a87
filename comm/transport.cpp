// Releasing an Io goes back to the transport that made it (it may still be in flight).
#include "comm/transport.hpp"

namespace dseek::comm {

void IoRelease::operator()(Io* io) const {
  if (io == nullptr) return;
  if (io->owner != nullptr) io->owner->release(io);
  else delete io;
}

}  // namespace dseek::comm
