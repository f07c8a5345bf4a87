// File-based rendezvous (see file_bootstrap.hpp).
#include "comm/bootstrap/file_bootstrap.hpp"

#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "comm/types.hpp"

namespace dseek::comm {

FileBootstrap::FileBootstrap(std::filesystem::path dir, int rank, int size)
    : dir_(std::move(dir)), rank_(rank), size_(size) {
  if (size < 1 || rank < 0 || rank >= size) throw CommError(ErrorKind::invalid_argument, "bad rank/size for bootstrap");
  std::filesystem::create_directories(dir_);
}

std::vector<std::string> FileBootstrap::all_gather(const std::string& mine, std::chrono::milliseconds timeout) {
  const int round = round_++;
  auto name = [&](int r) { return dir_ / ("round" + std::to_string(round) + ".rank" + std::to_string(r)); };
  {
    const auto tmp = name(rank_).string() + ".tmp";
    std::ofstream out(tmp, std::ios::binary);
    out.write(mine.data(), static_cast<std::streamsize>(mine.size()));
    out.close();
    if (!out) throw CommError(ErrorKind::transport, "cannot write " + tmp);
    std::filesystem::rename(tmp, name(rank_));  // readers never see a partial file
  }
  std::vector<std::string> all(static_cast<size_t>(size_));
  std::vector<bool> have(static_cast<size_t>(size_), false);
  int missing = size_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (int r = 0; r < size_; ++r) {
      if (have[static_cast<size_t>(r)]) continue;
      std::ifstream in(name(r), std::ios::binary);
      if (!in) continue;
      all[static_cast<size_t>(r)].assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      have[static_cast<size_t>(r)] = true;
      --missing;
    }
    if (missing == 0) return all;
    if (std::chrono::steady_clock::now() > deadline)
      throw CommError(ErrorKind::timeout, "file bootstrap in " + dir_.string() + ": " + std::to_string(missing) +
                                              " of " + std::to_string(size_) + " ranks did not show up");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace dseek::comm
