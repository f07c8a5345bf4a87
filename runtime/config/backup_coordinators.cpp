// Implementation of backup_coordinators.hpp.
#include "runtime/config/backup_coordinators.hpp"

#include <charconv>
#include <set>
#include <stdexcept>

namespace dseek::config {
namespace {

bool parse_int(std::string_view text, int64_t& out) {
  if (text.empty()) return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc{} && end == text.data() + text.size();
}

BackupCoordinator parse_entry(const std::string& entry) {
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument("entry \"" + entry + "\" is not NODE@HOST:PORT: " + why);
  };
  const auto at = entry.find('@');
  if (at == std::string::npos) throw bad("no '@' between the node id and the address");
  BackupCoordinator backup;
  if (!parse_int(std::string_view(entry).substr(0, at), backup.node_id) || backup.node_id < 0)
    throw bad("the node id is not a number >= 0");
  backup.address = entry.substr(at + 1);
  const auto colon = backup.address.rfind(':');
  int64_t port = 0;
  if (colon == std::string::npos || colon == 0) throw bad("no host:port after the '@'");
  if (!parse_int(std::string_view(backup.address).substr(colon + 1), port) || port < 1 ||
      port > 65535)
    throw bad("the port is not 1 .. 65535");
  return backup;
}

}  // namespace

std::vector<BackupCoordinator> parse_backup_coordinators(const std::string& text) {
  std::vector<BackupCoordinator> backups;
  std::set<int64_t> nodes;
  std::string entry;
  auto take = [&] {
    if (entry.empty()) return;
    backups.push_back(parse_entry(entry));
    if (!nodes.insert(backups.back().node_id).second)
      throw std::invalid_argument("node " + std::to_string(backups.back().node_id) +
                                  " is listed twice");
    entry.clear();
  };
  for (const char c : text) {
    if (c == ' ' || c == ',' || c == '\t') take();
    else entry += c;
  }
  take();
  return backups;
}

}  // namespace dseek::config
