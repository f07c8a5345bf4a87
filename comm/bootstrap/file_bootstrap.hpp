// Bootstrap through a shared directory: each rank writes its contribution to a file
// (atomically, by rename) and polls until every rank's file is there. For tests and
// benchmarks on one host (or a shared file system).
#pragma once

#include <filesystem>

#include "comm/bootstrap/bootstrap.hpp"

namespace dseek::comm {

class FileBootstrap final : public Bootstrap {
 public:
  FileBootstrap(std::filesystem::path dir, int rank, int size);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<std::string> all_gather(const std::string& mine, std::chrono::milliseconds timeout) override;

 private:
  std::filesystem::path dir_;
  int rank_, size_;
  int round_ = 0;  // each all_gather uses its own file names
};

}  // namespace dseek::comm
