// The exchange of `dseek data prepare` across nodes (see prepare_nodes.hpp).
#include "runtime/data/prepare_nodes.hpp"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_set>

#include "runtime/data/band_partition.hpp"
#include "runtime/data/minhash.hpp"
#include "runtime/data/hash_partition.hpp"
#include "runtime/data/piece_cache.hpp"

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

// Node `node`'s failure, when it is one to tell: node 0 tells any (a node that failed
// before it started is why it waits), the others only one of this run (newer than their
// own start: a failed marker of a previous run stays until its node starts again).
// Whether node `node`'s `kind` marker was written after this node started.
bool of_this_run(const PrepareOptions& options, const fs::path& parts, uint32_t node,
                 const char* kind) {
  std::error_code error;
  const auto written = fs::last_write_time(marker_path(parts, node, kind), error);
  const auto started = fs::last_write_time(marker_path(parts, options.node_id, "started"), error);
  return !error && written >= started;
}

bool failed_now(const PrepareOptions& options, const fs::path& parts, uint32_t node,
                std::string& text) {
  if (!read_marker(parts, node, "failed", text)) return false;
  return options.node_id == 0 || of_this_run(options, parts, node, "failed");
}

// Until `take(node, text)` has taken every other node's `kind` marker (it throws when a
// marker is wrong, returns false for one to wait past: a previous run's). `missing(node)`
// says what a node that did not finish has not done.
void wait_for_markers(const PrepareOptions& options, const fs::path& parts, const char* kind,
                      const std::function<bool(uint32_t, const std::string&)>& take,
                      const std::function<std::string(uint32_t)>& missing, std::ostream& log) {
  using clock = std::chrono::steady_clock;
  const uint32_t nodes = options.nodes;
  std::vector<uint32_t> pending;
  for (uint32_t node = 0; node < nodes; ++node)
    if (node != options.node_id) pending.push_back(node);
  const auto start = clock::now();
  auto next_note = start;
  while (!pending.empty()) {
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    std::vector<uint32_t> still;
    for (uint32_t node : pending) {
      const std::string name = node_name(node, nodes);
      std::string text;
      if (failed_now(options, parts, node, text)) throw DataError(name + " failed: " + text);
      if (read_marker(parts, node, kind, text) && take(node, text)) continue;
      if (waited > options.node_wait_s) {
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.0f", options.node_wait_s);
        const std::string where = node_started_where(parts, node);
        throw DataError(name + " has not " + missing(node) + " after " + seconds + " s (" +
                        (where.empty() ? "it has not started: no " +
                                             marker_path(parts, node, "started").string()
                                       : "it last started " + where) +
                        "): did it stop? Start `dseek data prepare` with --nodes " +
                        std::to_string(nodes) + " --node-id " + std::to_string(node) +
                        " on the same --input and --output; a rerun reuses every part "
                        "finished");
      }
      still.push_back(node);
    }
    pending = std::move(still);
    if (pending.empty()) break;
    if (clock::now() >= next_note) {
      log << "data prepare: waiting for " << pending.size() << " of the other nodes (" << kind
          << ")\n"
          << std::flush;
      next_note = clock::now() + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::string unit_name(const SourceFile& unit) {
  if (!unit.range) return unit.relative;
  return unit.relative + " bytes " + std::to_string(unit.range->begin) + ".." +
         std::to_string(unit.range->end);
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

std::string started_marker_text() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "?");
  return "host " + std::string(host) + " pid " + std::to_string(::getpid()) + "\n";
}

std::string node_started_where(const fs::path& parts, uint32_t node) {
  std::string text;
  if (!read_marker(parts, node, "started", text)) return "";
  std::istringstream words(text);
  std::string host_word, host, pid_word, pid;
  if (!(words >> host_word >> host >> pid_word >> pid) || host_word != "host" || pid_word != "pid")
    return "on a host its started marker does not name";
  return "on host " + host + " as pid " + pid;
}

void remove_node_markers(const fs::path& parts, uint32_t node) {
  std::error_code error;
  for (const char* kind : {"done", "dedup", "near", "failed", "started"})
    fs::remove(marker_path(parts, node, kind), error);
}

std::string done_marker_text(const std::string& fingerprint,
                             const std::vector<std::string>& keys) {
  std::string text = fingerprint + "\n";
  for (const std::string& key : keys) text += key + "\n";
  return text;
}

std::string keys_digest(const std::vector<std::string>& keys) {
  std::string all;
  for (const std::string& key : keys) all += key + "\n";
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(all.data(), all.size())));
  return text;
}

std::vector<std::string> wait_for_parts(const PrepareOptions& options, const WorkUnits& units,
                                        const std::vector<std::string>& own_keys,
                                        const std::string& fingerprint, const fs::path& parts,
                                        std::ostream& log) {
  const uint32_t nodes = options.nodes;
  std::vector<std::string> keys(units.units.size());
  for (size_t i = 0; i < own_keys.size(); ++i) keys[i * nodes + options.node_id] = own_keys[i];
  std::vector<bool> stale(nodes, false);
  auto take = [&](uint32_t node, const std::string& text) {
    const std::string name = node_name(node, nodes);
    std::istringstream lines(text);
    std::string theirs;
    std::getline(lines, theirs);
    if (theirs != fingerprint) {
      // A previous run's, whose node has not started again yet: wait for it.
      if (!of_this_run(options, parts, node, "done")) {
        stale[node] = true;
        return false;
      }
      throw DataError(name + " prepared with other settings, node count or input files (its "
                      "fingerprint " + theirs + ", this node's " + fingerprint +
                      "): run every node with the same command but --node-id");
    }
    stale[node] = false;
    for (size_t u = node; u < keys.size(); u += nodes) {
      if (!std::getline(lines, keys[u]) || !cache_has(parts, keys[u])) {
        throw DataError(name + " finished without the part of " + unit_name(units.units[u]) +
                        " in " + parts.string() + ": was that folder changed?");
      }
    }
    return true;
  };
  auto missing = [&](uint32_t node) {
    return "finished" +
           (node < units.units.size() ? " (its first file " + unit_name(units.units[node]) + ")"
                                      : std::string()) +
           (stale[node] ? " (its marker is of an earlier run with other settings or inputs)"
                        : "");
  };
  wait_for_markers(options, parts, "done", take, missing, log);
  return keys;
}

std::vector<uint64_t> wait_for_decisions(const PrepareOptions& options, const char* kind,
                                         const std::string& digest, uint64_t own_count,
                                         const fs::path& parts, std::ostream& log) {
  const bool near = std::string(kind) == "near";
  std::vector<uint64_t> counts(options.nodes, 0);
  counts[options.node_id] = own_count;
  auto take = [&](uint32_t node, const std::string& text) {
    std::istringstream lines(text);
    std::string theirs;
    uint64_t count = 0;
    const bool read = static_cast<bool>(lines >> theirs >> count);
    if (read && theirs != digest && !of_this_run(options, parts, node, kind)) return false;
    if (!read || theirs != digest) {
      throw DataError(node_name(node, options.nodes) + " decided its " +
                      (near ? "LSH bands" : "hash partition") + " over other parts (" + theirs +
                      ", this node's " + digest + "): rerun it");
    }
    counts[node] = count;
    return true;
  };
  auto missing = [near](uint32_t node) {
    const std::string n = std::to_string(node);
    return near ? "decided its LSH bands (near dedup's candidates in the bands that are " + n +
                      " modulo the nodes)"
                : "decided its hash partition (exact dedup of the hashes that are " + n +
                      " modulo the nodes)";
  };
  wait_for_markers(options, parts, kind, take, missing, log);
  return counts;
}

NearMergeFigures merge_parts(const PrepareOptions& options, const WorkUnits& units,
                             const std::vector<std::string>& keys, const fs::path& parts,
                             DatasetBuilder& builder, std::ostream& log) {
  const CleanSettings& clean = options.clean;
  std::optional<DuplicateLists> duplicates;
  if (clean.exact_dedup) duplicates.emplace(parts, options.nodes);
  // Near dedup: the nodes' candidate lists in step, the signatures read back.
  std::optional<NearCandidateLists> near_lists;
  std::optional<PartSignatures> signatures;
  if (clean.near_dedup) {
    near_lists.emplace(parts, options.nodes);
    signatures.emplace(parts, keys, clean.minhash_permutations);
  }
  // One bit per document read so far: kept. A later exact copy of a document near dedup
  // dropped is a near duplicate too (on one node, the dropped copy is not remembered, the
  // later ones meet the same earlier document).
  std::vector<std::vector<bool>> kept(keys.size());
  auto was_kept = [&](const DocPosition& at) {
    if (at.unit >= kept.size() || at.ordinal >= kept[at.unit].size()) {
      throw DataError("a duplicate list names a document not read before it: rerun the nodes");
    }
    return static_cast<bool>(kept[at.unit][at.ordinal]);
  };
  NearMergeFigures figures;
  std::vector<uint64_t> candidates;
  std::vector<uint32_t> candidate_signature;
  const std::vector<uint32_t>& unit_file = units.file;
  for (size_t begin = 0; begin < keys.size();) {
    size_t end = begin;
    while (end < keys.size() && unit_file[end] == unit_file[begin]) ++end;
    std::vector<FileOutcome> outcomes;
    for (size_t u = begin; u < end; ++u) outcomes.push_back(read_unit_outcome(parts, keys[u]));
    const FileOutcome outcome = combined_outcome(outcomes);
    const bool dropped = file_dropped(outcome);  // the writer drops the file's documents
    uint32_t number = 0;
    for (size_t u = begin; u < end; ++u) {
      CacheEntryReader reader(parts, keys[u]);
      uint64_t ordinal = 0;
      for (bool last = false; !last;) {
        Piece piece = reader.next();
        last = piece.last;
        // A file's byte ranges are one file to the writer, as on one node.
        piece.file = unit_file[u];
        piece.number = number++;
        piece.cached = false;
        piece.last = last && u + 1 == end;
        if (piece.last) piece.outcome = outcome;
        for (PieceDocument& document : piece.documents) {
          const DocPosition at{u, ordinal++};
          kept[u].push_back(false);
          // Passed clean (hashed): kept, or without tokens (tokenize, after dedup on
          // one node, drops those; dedup saw them as kept).
          if (dropped || (document.hash_low | document.hash_high) == 0) continue;
          DropReason verdict = DropReason::kept;
          DocPosition first;
          if (duplicates && duplicates->duplicate(at, first)) {
            verdict = was_kept(first) ? DropReason::exact_duplicate : DropReason::near_duplicate;
          } else if (near_lists && !document.signature.empty()) {
            // As one node: near when a kept earlier document sharing a bucket is close.
            near_lists->candidates(at, candidates);
            figures.candidates_peak =
                std::max<uint64_t>(figures.candidates_peak, candidates.size());
            for (uint64_t candidate : candidates) {
              const DocPosition earlier = unpacked_position(candidate);
              if (!(earlier < at) || !was_kept(earlier)) continue;
              signatures->read(earlier, candidate_signature);
              figures.signatures_held = 1;  // one read back at a time
              if (estimated_jaccard(document.signature, candidate_signature) >=
                  clean.near_threshold) {
                verdict = DropReason::near_duplicate;
                break;
              }
            }
          }
          if (verdict == DropReason::kept) {
            kept[u].back() = true;
          } else {
            document.drop = verdict;
          }
          document.signature = {};
        }
        for (const std::string& problem : piece.problems) log << "data prepare: " << problem << "\n";
        builder.add(piece);
      }
    }
    begin = end;
  }
  if (signatures) figures.signatures_read = signatures->reads();
  for (const std::vector<bool>& bits : kept) figures.kept_bits += bits.size();
  return figures;
}

}  // namespace dseek::data
