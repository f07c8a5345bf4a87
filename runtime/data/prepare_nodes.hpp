// `dseek data prepare` on several nodes: the exchange through the output folder, which
// every node sees (a cluster file system, or one host). Every node cuts the same input
// list into the same units of work (work_units.hpp: a file, or a byte range of a large
// one) and owns those whose index is its id modulo the node count. It runs decode,
// clean, tokenize and augment on its units (actors/data/prepare_nodes.cpp) and writes
// each unit's pieces, before dedup, as one part OUTPUT/.parts/<key>.piece (the cache's
// entry format, written as .tmp and renamed when the unit is done; the key is the
// file's bytes, the range and the settings, so a rerun skips every part already there)
// its summary <key>.hashes (hash_partition.hpp) and, with near dedup, its signatures
// <key>.minhash (band_partition.hpp). Then it leaves a marker:
// node-<id>.done with the run's fingerprint and its parts' keys, or node-<id>.failed
// with its error. Every node waits for every done marker (wait_for_parts), then decides
// exact dedup for its partition of the hashes (dups-<id>.list, marker node-<id>.dedup
// with the number of hashes it held). With near dedup every node then waits for every
// dedup marker, lists the candidates of its LSH bands (band_partition.hpp: near-<id>.list,
// marker node-<id>.near with its band entries). Node 0 waits for the last markers
// (wait_for_decisions), then merge_parts decides both dedups and runs the writer over all
// parts in corpus order, reading the lists in step: duplicates across nodes are caught,
// and the shards and the index are the bytes a one-node run writes, for any number of
// nodes and workers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/data/dataset_builder.hpp"
#include "runtime/data/prepare.hpp"
#include "runtime/data/source_files.hpp"
#include "runtime/data/work_units.hpp"

namespace dseek::data {

std::filesystem::path parts_dir(const std::filesystem::path& output);

// A node's marker: kind "done" (text: the fingerprint and keys), "dedup" (its partition
// decided), "near" (its LSH bands listed), "failed" (text: the error) or "started" (written first: a failed marker
// older than it is a previous run's).
void write_node_marker(const std::filesystem::path& parts, uint32_t node, const char* kind,
                       const std::string& text);
// The started marker's text: where this process runs, "host NAME pid PID\n" (the pid is
// the one its host's PID namespace gives it). With several hosts sharing the folder, a
// node that has not finished is named with the host it last started on.
std::string started_marker_text();
// "on host NAME as pid PID" from node `node`'s started marker, or "" without one.
std::string node_started_where(const std::filesystem::path& parts, uint32_t node);
void remove_node_markers(const std::filesystem::path& parts, uint32_t node);

// The text of a node's done marker: the fingerprint, then the keys of its parts.
std::string done_marker_text(const std::string& fingerprint,
                             const std::vector<std::string>& keys);
// A digest of every unit's key (a dedup marker holds it: its list is of these parts).
std::string keys_digest(const std::vector<std::string>& keys);

// Until every other node's done marker is there: the keys of every unit's part (this
// node's own, `own_keys`, given; so a node reads only its own files). Throws DataError
// naming the node when a node failed (its error; for nodes other than 0 only a failure
// of this run), finished in this run with another fingerprint (other settings or
// inputs; a previous run's marker is waited past) or without a part, or has not
// finished after options.node_wait_s.
std::vector<std::string> wait_for_parts(const PrepareOptions& options, const WorkUnits& units,
                                        const std::vector<std::string>& own_keys,
                                        const std::string& fingerprint,
                                        const std::filesystem::path& parts, std::ostream& log);

// Until every other node's `kind` marker is there ("dedup": its hash partition decided;
// "near": its LSH bands), for these parts (the digest); the count each node's marker
// holds (hashes, band entries; this node's `own_count` first). Throws as wait_for_parts.
std::vector<uint64_t> wait_for_decisions(const PrepareOptions& options, const char* kind,
                                         const std::string& digest, uint64_t own_count,
                                         const std::filesystem::path& parts, std::ostream& log);

// What near dedup held in node 0's merge: the most signatures at once (the candidate
// read back: 1 or 0), those read back in all, the longest candidate list of a document,
// and the kept bits (one per document).
struct NearMergeFigures {
  uint64_t signatures_held = 0, signatures_read = 0, candidates_peak = 0, kept_bits = 0;
};

// Dedup and write over every part in corpus order, into `builder`: exact dedup from the
// nodes' duplicate lists, near dedup from their candidate lists (band_partition.hpp),
// each when on; a file's byte ranges are one file to the writer.
NearMergeFigures merge_parts(const PrepareOptions& options, const WorkUnits& units,
                             const std::vector<std::string>& keys,
                             const std::filesystem::path& parts, DatasetBuilder& builder,
                             std::ostream& log);

}  // namespace dseek::data
