// One node's share of a preparation on several nodes (see prepare_nodes.hpp).
#include "actors/data/prepare_nodes.hpp"

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "actors/data/prepare_pipeline.hpp"
#include "runtime/data/band_partition.hpp"
#include "runtime/data/dataset_builder.hpp"
#include "runtime/data/hash_partition.hpp"
#include "runtime/data/piece_cache.hpp"
#include "runtime/data/prepare_nodes.hpp"
#include "runtime/data/token_dataset.hpp"
#include "runtime/data/work_units.hpp"

namespace dseek::actors {
namespace {

namespace fs = std::filesystem;

// The output may hold the parts, and the token file of an interrupted merge, only.
void check_output(const fs::path& output) {
  std::error_code error;
  if (fs::exists(output, error) && !fs::is_directory(output, error)) {
    throw data::DataError("output " + output.string() + " exists and is not a directory");
  }
  for (const auto& entry : fs::directory_iterator(output, error)) {
    const std::string name = entry.path().filename().string();
    if (name != ".parts" && name != ".tokens.tmp") {
      throw data::DataError("output directory " + output.string() + " holds " + name +
                            ": not empty (only the parts of an unfinished run, .parts, may "
                            "be there)");
    }
  }
}

// Everything in the output but the parts.
void clear_all_but_parts(const fs::path& output) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(output, error)) {
    if (entry.path().filename() != ".parts") fs::remove_all(entry.path(), error);
  }
}

// This node's files whose part is not written yet, and their keys.
void unfinished(const data::SourceListing& own, const std::vector<std::string>& own_keys,
                const fs::path& parts, data::SourceListing& todo,
                std::vector<std::string>& todo_keys) {
  todo.files.clear();
  todo_keys.clear();
  for (size_t f = 0; f < own.files.size(); ++f) {
    if (data::cache_has(parts, own_keys[f])) continue;
    todo.files.push_back(own.files[f]);
    todo_keys.push_back(own_keys[f]);
  }
}

// Runs the pipeline over this node's unfinished files, each into its part. A file whose
// writer crashed is not in its part (the cache drops such an entry): it runs again.
void write_parts(const context_ptr& context, const data::SourceListing& own,
                 const std::vector<std::string>& own_keys, const fs::path& parts,
                 std::ostream& log) {
  data::SourceListing todo;
  std::vector<std::string> todo_keys;
  unfinished(own, own_keys, parts, todo, todo_keys);
  const data::PrepareOptions& o = context->options;
  size_t ranges = 0;
  for (const data::SourceFile& unit : own.files) ranges += unit.range.has_value();
  log << "data prepare: node " << o.node_id << " of " << o.nodes << ": " << own.files.size()
      << (ranges > 0 ? " files and byte ranges of files (" + std::to_string(ranges) +
                           " ranges) are this node's, "
                     : std::string(" files are this node's, ")) << own.files.size() - todo.files.size()
      << " of them finished before\n";
  for (int attempt = 0; attempt < 3 && !todo.files.empty(); ++attempt) {
    if (attempt > 0) {
      log << "data prepare: " << todo.files.size() << " files again (a writer crashed in "
          << "them: their parts were not written)\n";
    }
    context->listing.files = todo.files;
    context->cache_keys = todo_keys;
    context->cache_entry.reset();
    context->cache_skip = false;
    const std::string error = run_pipeline(context, log);
    if (!error.empty()) throw data::DataError(error);
    unfinished(own, own_keys, parts, todo, todo_keys);
  }
  if (!todo.files.empty()) {
    throw data::DataError("the part of " + todo.files.front().relative + " was not written "
                          "after 3 runs of the pipeline");
  }
}

}  // namespace

data::PrepareSummary prepare_on_nodes(const data::PrepareOptions& given, std::ostream& log) {
  const auto start = std::chrono::steady_clock::now();
  fs::path input;
  context_ptr context = make_prepare_context(given, input, log);
  data::PrepareOptions& options = context->options;
  const fs::path parts = data::parts_dir(options.output);
  check_output(options.output);
  std::error_code error;
  fs::create_directories(parts, error);
  if (error) throw data::DataError("cannot create " + parts.string() + ": " + error.message());
  data::remove_node_markers(parts, options.node_id);
  data::write_node_marker(parts, options.node_id, "started", data::started_marker_text());
  log << "data prepare: node " << options.node_id << " of " << options.nodes << " runs "
      << data::node_started_where(parts, options.node_id) << " (parts and markers in "
      << parts.string() << ")\n";

  const data::SourceListing full = context->listing;
  const data::Tokenizer& tokenizer = *context->tokenizer;
  const data::WorkUnits units = data::split_into_units(full, options);
  data::SourceListing all_units;
  all_units.files = units.units;
  const std::string fingerprint = data::part_fingerprint(options, tokenizer, all_units);
  data::SourceListing own;
  for (uint32_t u = 0; u < units.units.size(); ++u) {
    if (data::unit_owner(u, options.nodes) == options.node_id) own.files.push_back(units.units[u]);
  }
  const std::vector<std::string> own_keys = data::part_keys(options, tokenizer, own);
  if (units.ranges > 0) {
    log << "data prepare: " << full.files.size() << " files in " << units.units.size()
        << " units of work, " << units.ranges << " of them byte ranges of a file\n";
  }

  data::PrepareSummary summary;
  uint64_t held = 0, band_entries = 0;
  std::vector<uint64_t> node_held(options.nodes, 0);
  std::vector<std::string> keys;
  const data::CleanSettings& clean = options.clean;
  options.cache_dir = parts;  // the writer's entries are the parts
  try {
    write_parts(context, own, own_keys, parts, log);
    for (const std::string& key : own_keys) {
      data::write_unit_summary(parts, key);
      if (clean.near_dedup) data::write_unit_signatures(parts, key, clean.minhash_permutations);
    }
    data::write_node_marker(parts, options.node_id, "done",
                            data::done_marker_text(fingerprint, own_keys));
    // Every node's parts are there: decide this node's partition of the hashes, then
    // its LSH bands. (Without dedup only node 0 needs them: the others are done.)
    if (clean.exact_dedup || clean.near_dedup || options.node_id == 0) {
      keys = data::wait_for_parts(options, units, own_keys, fingerprint, parts, log);
    }
    const std::string digest = data::keys_digest(keys);
    if (clean.exact_dedup) {
      held = data::decide_partition(parts, keys, units.file, options.node_id, options.nodes);
      data::write_node_marker(parts, options.node_id, "dedup",
                              digest + " " + std::to_string(held) + "\n");
      log << "data prepare: node " << options.node_id << " of " << options.nodes
          << ": exact dedup of its hash partition held " << held << " document hashes\n";
      // Node 0 needs every list; the bands need them too (exact copies are in no bucket).
      if (clean.near_dedup || options.node_id == 0) {
        node_held = data::wait_for_decisions(options, "dedup", digest, held, parts, log);
      }
    }
    if (clean.near_dedup) {
      band_entries = data::decide_bands(parts, keys, units.file, clean, options.node_id,
                                        options.nodes);
      data::write_node_marker(parts, options.node_id, "near",
                              digest + " " + std::to_string(band_entries) + "\n");
      log << "data prepare: node " << options.node_id << " of " << options.nodes
          << ": near dedup of its LSH bands held " << band_entries << " bucket entries\n";
    }
  } catch (const std::exception& failure) {
    try {
      data::write_node_marker(parts, options.node_id, "failed", failure.what());
    } catch (const data::DataError&) {  // the first error is the one to tell
    }
    throw;
  }
  options.cache_dir.clear();
  context->listing = full;

  summary.exact_hashes_held = held;
  summary.node_band_entries_held = {band_entries};
  summary.byte_ranges = units.ranges;
  if (options.node_id != 0) {
    finish_summary(summary, *context, 0, start);
    log << "data prepare: node " << options.node_id << " of " << options.nodes
        << " wrote the parts of its " << own.files.size() << " files to " << parts.string()
        << "; node 0 writes the data set\n";
    return summary;
  }
  std::vector<uint64_t> node_entries(options.nodes, 0);
  if (clean.near_dedup) {
    node_entries = data::wait_for_decisions(options, "near", data::keys_digest(keys),
                                            band_entries, parts, log);
  }
  fs::remove(options.output / ".tokens.tmp", error);
  std::optional<data::DatasetBuilder> builder;
  data::NearMergeFigures near;
  try {
    builder.emplace(options, tokenizer, input);
    near = data::merge_parts(options, units, keys, parts, *builder, log);
    summary = builder->finish();
    builder.reset();  // removes the token file
  } catch (...) {
    builder.reset();
    clear_all_but_parts(options.output);
    throw;
  }
  fs::remove_all(parts, error);
  finish_summary(summary, *context, 0, start);
  summary.exact_hashes_held = held;
  summary.node_hashes_held = node_held;
  summary.near_signatures_held = near.signatures_held;
  summary.node_band_entries_held = node_entries;
  summary.near_signatures_read = near.signatures_read;
  summary.near_candidates_peak = near.candidates_peak;
  summary.near_kept_bits = near.kept_bits;
  summary.byte_ranges = units.ranges;
  data::write_prepare_report(options, summary, log);
  return summary;
}

}  // namespace dseek::actors
