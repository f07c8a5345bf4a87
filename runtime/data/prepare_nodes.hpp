// `dseek data prepare` on several nodes: the exchange through the output folder, which
// every node sees (a cluster file system, or one host). Every node lists the same input
// files and owns those whose index is its id modulo the node count (owner_node). It runs
// decode, clean, tokenize and augment on its files (actors/data/prepare_nodes.cpp) and
// writes each file's pieces, before dedup, as one part OUTPUT/.parts/<key>.piece (the
// cache's entry format, written as .tmp and renamed when the file is done; the key is
// the file's bytes and the settings, so a rerun skips every part already there). Then
// it leaves a marker: node-<id>.done with the run's fingerprint and its parts' keys, or
// node-<id>.failed with its error. Node 0 waits for every marker (wait_for_parts), then
// merge_parts runs
// the in-order stages, dedup and write, over all parts in corpus order: duplicates
// across nodes are caught, and the shards and the index are the bytes a one-node run
// writes, for any number of nodes and workers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/data/dataset_builder.hpp"
#include "runtime/data/prepare.hpp"
#include "runtime/data/source_files.hpp"

namespace dseek::data {

std::filesystem::path parts_dir(const std::filesystem::path& output);

inline uint32_t owner_node(uint32_t file, uint32_t nodes) { return file % nodes; }

// A node's marker: kind "done" (text: the fingerprint) or "failed" (text: the error).
void write_node_marker(const std::filesystem::path& parts, uint32_t node, const char* kind,
                       const std::string& text);
void remove_node_markers(const std::filesystem::path& parts, uint32_t node);

// The text of a node's done marker: the fingerprint, then the keys of its parts.
std::string done_marker_text(const std::string& fingerprint,
                             const std::vector<std::string>& keys);

// Until every other node's done marker is there: the keys of every file's part (node
// 0's own, `own_keys`, given; so node 0 reads only its own files). Throws DataError
// naming the node when a node failed (its error), finished with another fingerprint
// (other settings or inputs) or without a part, or has not finished after
// options.node_wait_s.
std::vector<std::string> wait_for_parts(const PrepareOptions& options,
                                        const SourceListing& listing,
                                        const std::vector<std::string>& own_keys,
                                        const std::string& fingerprint,
                                        const std::filesystem::path& parts, std::ostream& log);

// Dedup and write over every part in corpus order, into `builder`.
void merge_parts(const PrepareOptions& options, const std::vector<std::string>& keys,
                 const std::filesystem::path& parts, DatasetBuilder& builder,
                 std::ostream& log);

}  // namespace dseek::data
