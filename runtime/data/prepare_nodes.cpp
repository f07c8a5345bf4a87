// The exchange of `dseek data prepare` across nodes (see prepare_nodes.hpp).
#include "runtime/data/prepare_nodes.hpp"

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/data/piece_cache.hpp"
#include "runtime/data/piece_stages.hpp"

namespace dseek::data {
namespace {

namespace fs = std::filesystem;

fs::path marker_path(const fs::path& parts, uint32_t node, const char* kind) {
  return parts / ("node-" + std::to_string(node) + "." + kind);
}

// The marker's text, or false when there is none.
bool read_marker(const fs::path& parts, uint32_t node, const char* kind, std::string& text) {
  std::ifstream in(marker_path(parts, node, kind));
  if (!in) return false;
  std::ostringstream all;
  all << in.rdbuf();
  text = all.str();
  return true;
}

std::string node_name(uint32_t node, uint32_t nodes) {
  return "node " + std::to_string(node) + " of " + std::to_string(nodes);
}

}  // namespace

fs::path parts_dir(const fs::path& output) { return output / ".parts"; }

void write_node_marker(const fs::path& parts, uint32_t node, const char* kind,
                       const std::string& text) {
  const fs::path path = marker_path(parts, node, kind);
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) throw DataError("cannot write " + tmp.string());
  }
  std::error_code error;
  fs::rename(tmp, path, error);
  if (error) throw DataError("cannot rename " + tmp.string() + ": " + error.message());
}

void remove_node_markers(const fs::path& parts, uint32_t node) {
  std::error_code error;
  for (const char* kind : {"done", "failed"}) fs::remove(marker_path(parts, node, kind), error);
}

std::string done_marker_text(const std::string& fingerprint,
                             const std::vector<std::string>& keys) {
  std::string text = fingerprint + "\n";
  for (const std::string& key : keys) text += key + "\n";
  return text;
}

std::vector<std::string> wait_for_parts(const PrepareOptions& options,
                                        const SourceListing& listing,
                                        const std::vector<std::string>& own_keys,
                                        const std::string& fingerprint, const fs::path& parts,
                                        std::ostream& log) {
  using clock = std::chrono::steady_clock;
  const uint32_t nodes = options.nodes;
  std::vector<std::string> keys(listing.files.size());
  for (size_t i = 0; i < own_keys.size(); ++i) keys[i * nodes] = own_keys[i];
  std::vector<uint32_t> pending;
  for (uint32_t node = 1; node < nodes; ++node) pending.push_back(node);
  const auto start = clock::now();
  auto next_note = start;
  while (!pending.empty()) {
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    std::vector<uint32_t> still;
    for (uint32_t node : pending) {
      const std::string name = node_name(node, nodes);
      std::string text;
      if (read_marker(parts, node, "failed", text)) throw DataError(name + " failed: " + text);
      if (!read_marker(parts, node, "done", text)) {
        if (waited > options.node_wait_s) {
          char seconds[32];
          std::snprintf(seconds, sizeof seconds, "%.0f", options.node_wait_s);
          const std::string first = node < listing.files.size()
                                        ? " (its first file " + listing.files[node].relative + ")"
                                        : "";
          throw DataError(name + " has not finished" + first + " after " + seconds +
                          " s: did it stop? Start `dseek data prepare` with --nodes " +
                          std::to_string(nodes) + " --node-id " + std::to_string(node) +
                          " on the same --input and --output; a rerun reuses every part "
                          "finished");
        }
        still.push_back(node);
        continue;
      }
      std::istringstream lines(text);
      std::string theirs;
      std::getline(lines, theirs);
      if (theirs != fingerprint) {
        throw DataError(name + " prepared with other settings, node count or input files (its "
                        "fingerprint " + theirs + ", this node's " + fingerprint +
                        "): run every node with the same command but --node-id");
      }
      for (size_t f = node; f < keys.size(); f += nodes) {
        if (!std::getline(lines, keys[f]) || !cache_has(parts, keys[f])) {
          throw DataError(name + " finished without the part of " + listing.files[f].relative +
                          " in " + parts.string() + ": was that folder changed?");
        }
      }
    }
    pending = std::move(still);
    if (pending.empty()) break;
    if (clock::now() >= next_note) {
      log << "data prepare: waiting for " << pending.size() << " of the other nodes\n"
          << std::flush;
      next_note = clock::now() + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return keys;
}

void merge_parts(const PrepareOptions& options, const std::vector<std::string>& keys,
                 const fs::path& parts, DatasetBuilder& builder, std::ostream& log) {
  DedupStage dedup(options.clean, options.max_bytes);
  for (uint32_t f = 0; f < keys.size(); ++f) {
    CacheEntryReader reader(parts, keys[f]);
    for (bool last = false; !last;) {
      Piece piece = reader.next();
      piece.file = f;
      piece.cached = false;  // dedup checks it, as the one-node pipeline does
      // A document without tokens was kept by clean (it has a hash) and dropped by
      // tokenize, which the one-node pipeline runs after dedup: dedup sees it as kept.
      std::vector<size_t> no_tokens;
      for (size_t d = 0; d < piece.documents.size(); ++d) {
        PieceDocument& document = piece.documents[d];
        if (document.drop == DropReason::empty && (document.hash_low | document.hash_high)) {
          document.drop = DropReason::kept;
          no_tokens.push_back(d);
        }
      }
      dedup.apply(piece);
      for (size_t d : no_tokens) {
        DropReason& drop = piece.documents[d].drop;
        if (drop == DropReason::kept) drop = DropReason::empty;
      }
      for (const std::string& problem : piece.problems) log << "data prepare: " << problem << "\n";
      builder.add(piece);
      last = piece.last;
    }
  }
}

}  // namespace dseek::data
