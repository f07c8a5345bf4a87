// The entry point of the preparation pipeline (see prepare_pipeline.hpp): settings,
// listing and tokenizer, the actor system, the driver; then, once every piece is
// written, the split, the shards and the index (DatasetBuilder::finish).
#include "actors/data/prepare_pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/system_messages.hpp>

#include "actors/data/pipeline_driver.hpp"
#include "actors/data/prepare_nodes.hpp"
#include "actors/data/prepare_messages.hpp"
#include "actors/message_types.hpp"
#include "runtime/data/token_dataset.hpp"

namespace dseek::actors {

std::string run_pipeline(const context_ptr& context, std::ostream& log) {
  caf::actor_system_config cfg;
  register_supervision_types(cfg);
  cfg.set("scheduler.max-threads", static_cast<size_t>(context->options.workers));
  caf::actor_system sys{cfg};
  caf::scoped_actor main{sys};
  caf::actor driver = spawn_prepare_driver(sys, context, log, main);
  main->monitor(driver);
  std::string error;
  bool done = false;
  while (!done) {
    main->receive(
        [&](prep_done_atom, const std::string& what) {
          error = what;
          done = true;
        },
        [&](caf::down_msg& down) {
          if (down.source != driver.address()) return;
          error = "the pipeline's driver stopped: " + sys.render(down.reason);
          done = true;
        });
  }
  return error;
}

context_ptr make_prepare_context(const data::PrepareOptions& given,
                                 std::filesystem::path& input, std::ostream& log) {
  data::check_prepare_options(given);
  auto context = std::make_shared<prepare_context>();
  data::PrepareOptions& options = context->options;
  options = given;
  if (options.workers == 0) options.workers = std::max(1u, std::thread::hardware_concurrency());
  if (options.window == 0) options.window = std::max(8u, 4 * options.workers);
  options.window = std::max(options.window, 2u);
  // "dir/" and "dir" are the same input and must give the same index.
  const std::vector<std::filesystem::path> inputs = data::prepare_inputs(options);
  input = data::inputs_label(inputs);
  context->tokenizer = data::open_tokenizer(options.tokenizer);
  context->listing = data::list_source_files(inputs, options.filter);
  log << "data prepare: " << context->listing.files.size() << " files under " << input.string()
      << " (" << context->listing.hidden << " hidden or version-control files and "
      << context->listing.filtered << " left out by --include/--exclude), tokenizer "
      << context->tokenizer->name() << ", " << options.workers << " workers\n";
  context->input = options.input_options;
  context->input.reject_nul_in_lines = context->tokenizer->kind() == data::TokenizerKind::bytes;
  context->hasher.emplace(options.clean.minhash_permutations, options.clean.shingle_words);
  context->fim_tokens = data::fim_tokens_for(*context->tokenizer);
  return context;
}

void finish_summary(data::PrepareSummary& summary, const prepare_context& context,
                    uint64_t cached, std::chrono::steady_clock::time_point start) {
  const data::PrepareSummary& pipeline = context.pipeline;
  summary.hidden_files = context.listing.hidden;
  summary.filtered_files = context.listing.filtered;
  summary.workers = pipeline.workers;
  summary.window = pipeline.window;
  summary.peak_pieces = pipeline.peak_pieces;
  summary.peak_bytes = pipeline.peak_bytes;
  summary.largest_piece_bytes = pipeline.largest_piece_bytes;
  summary.restarts = pipeline.restarts;
  summary.cached_files = cached;
  summary.stage_documents = pipeline.stage_documents;
  summary.stage_busy_seconds = pipeline.stage_busy_seconds;
  summary.stage_peak_waiting = pipeline.stage_peak_waiting;
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

data::PrepareSummary prepare_dataset(const data::PrepareOptions& given, std::ostream& log) {
  if (given.nodes > 1) return prepare_on_nodes(given, log);
  const auto start = std::chrono::steady_clock::now();
  std::filesystem::path input;
  context_ptr context = make_prepare_context(given, input, log);
  const data::PrepareOptions& options = context->options;
  data::create_output(options.output);
  try {
    const bool caching = !options.cache_dir.empty();
    context->dedup.emplace(options.clean, options.max_bytes, caching);
    uint64_t cached = 0;
    if (caching) {
      context->cache_keys = data::cache_keys(options, *context->tokenizer, context->listing);
      for (const std::string& key : context->cache_keys) {
        context->cache_hit.push_back(data::cache_has(options.cache_dir, key));
        cached += context->cache_hit.back();
      }
      log << "data prepare: " << cached << " of " << context->cache_keys.size()
          << " files from the cache " << options.cache_dir.string() << "\n";
    }
    context->builder.emplace(options, *context->tokenizer, input);
    const std::string error = run_pipeline(context, log);
    if (!error.empty()) throw data::DataError(error);
    data::PrepareSummary summary = context->builder->finish();
    context->builder.reset();  // removes the token file
    finish_summary(summary, *context, cached, start);
    summary.exact_hashes_held = context->dedup->index().hashes_held();
    summary.node_hashes_held = {summary.exact_hashes_held};
    summary.near_signatures_held = context->dedup->index().signatures_held();
    summary.node_band_entries_held = {summary.near_signatures_held *
                                      context->dedup->index().bands().bands};
    data::write_prepare_report(options, summary, log);
    return summary;
  } catch (...) {
    context->builder.reset();
    data::clear_output(options.output);
    throw;
  }
}

}  // namespace dseek::actors
