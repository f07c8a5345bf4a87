// One node's share of a preparation on several nodes (see prepare_nodes.hpp).
#include "actors/data/prepare_nodes.hpp"

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "actors/data/prepare_pipeline.hpp"
#include "runtime/data/dataset_builder.hpp"
#include "runtime/data/piece_cache.hpp"
#include "runtime/data/prepare_nodes.hpp"
#include "runtime/data/token_dataset.hpp"

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
  log << "data prepare: node " << o.node_id << " of " << o.nodes << ": " << own.files.size()
      << " files are this node's, " << own.files.size() - todo.files.size()
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

  const data::SourceListing full = context->listing;
  const data::Tokenizer& tokenizer = *context->tokenizer;
  const std::string fingerprint = data::part_fingerprint(options, tokenizer, full);
  data::SourceListing own;
  for (uint32_t f = 0; f < full.files.size(); ++f) {
    if (data::owner_node(f, options.nodes) == options.node_id) own.files.push_back(full.files[f]);
  }
  const std::vector<std::string> own_keys = data::part_keys(options, tokenizer, own);

  options.cache_dir = parts;  // the writer's entries are the parts
  try {
    write_parts(context, own, own_keys, parts, log);
    data::write_node_marker(parts, options.node_id, "done",
                            data::done_marker_text(fingerprint, own_keys));
  } catch (const std::exception& failure) {
    try {
      data::write_node_marker(parts, options.node_id, "failed", failure.what());
    } catch (const data::DataError&) {  // the first error is the one to tell
    }
    throw;
  }
  options.cache_dir.clear();
  context->listing = full;

  data::PrepareSummary summary;
  if (options.node_id != 0) {
    finish_summary(summary, *context, 0, start);
    log << "data prepare: node " << options.node_id << " of " << options.nodes
        << " wrote the parts of its " << own.files.size() << " files to " << parts.string()
        << "; node 0 writes the data set\n";
    return summary;
  }
  const std::vector<std::string> keys =
      data::wait_for_parts(options, full, own_keys, fingerprint, parts, log);
  fs::remove(options.output / ".tokens.tmp", error);
  std::optional<data::DatasetBuilder> builder;
  try {
    builder.emplace(options, tokenizer, input);
    data::merge_parts(options, keys, parts, *builder, log);
    summary = builder->finish();
    builder.reset();  // removes the token file
  } catch (...) {
    builder.reset();
    clear_all_but_parts(options.output);
    throw;
  }
  fs::remove_all(parts, error);
  finish_summary(summary, *context, 0, start);
  data::write_prepare_report(options, summary, log);
  return summary;
}

}  // namespace dseek::actors
