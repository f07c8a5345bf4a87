// How ranks exchange what the data plane needs to connect (worker addresses, host
// names) before a communicator exists. Pluggable: the actor layer implements it over its
// coordinator; FileBootstrap and TcpBootstrap serve tests and benchmarks on one host.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace dseek::comm {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank contributes `mine`; returns all contributions indexed by rank. Collective:
  // every rank calls it the same number of times. Throws CommError(timeout) when the
  // others do not show up within `timeout`.
  virtual std::vector<std::string> all_gather(const std::string& mine, std::chrono::milliseconds timeout) = 0;
};

// Packing several strings into one contribution (length-prefixed).
std::string pack_strings(const std::vector<std::string>& parts);
std::vector<std::string> unpack_strings(const std::string& packed);

}  // namespace dseek::comm
