// The stages' worker actors (see stage_workers.hpp).
#include "actors/data/stage_workers.hpp"

#include <chrono>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/data/prepare_messages.hpp"
#include "actors/faults/crash_request.hpp"

namespace dseek::actors {
namespace {

using data::PrepareStage;

// A DataError (a disk full, a file that cannot be written) would come back on every
// retry: it ends the run, with its message, instead of crashing the actor.
template <class Work>
piece_ptr run_stage(const piece_ptr& in, Work work) {
  const auto start = std::chrono::steady_clock::now();
  auto out = std::make_shared<data::Piece>();
  try {
    *out = *in;
    work(*out);
    out->work_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } catch (const data::DataError& error) {
    out = std::make_shared<data::Piece>();
    out->file = in->file;
    out->number = in->number;
    out->fatal = error.what();
  }
  return out;
}

// Throws when this is the piece the fault plan crashes.
void maybe_crash(prepare_context& context, PrepareStage stage) {
  const data::PrepareFaults& faults = context.options.faults;
  if (!faults.crash_stage || *faults.crash_stage != stage) return;
  const uint64_t n = ++context.taken[static_cast<size_t>(stage)];
  if (n == faults.crash_at && !context.crashed.exchange(true)) {
    throw_injected_crash(std::string("data prepare ") + data::prepare_stage_name(stage));
  }
}

// Tells the driver the worker is there; an exception ends the worker with its message
// as the exit reason (CAF's default handler keeps only "runtime_error").
void announce(caf::scheduled_actor* self, const caf::actor& driver, PrepareStage stage) {
  self->set_exception_handler([](caf::scheduled_actor*, std::exception_ptr& exception) {
    try {
      std::rethrow_exception(exception);
    } catch (const std::exception& error) {
      return caf::make_error(caf::sec::runtime_error, std::string(error.what()));
    } catch (...) {
      return caf::make_error(caf::sec::runtime_error, std::string("unknown exception"));
    }
  });
  // (The driver is dynamically typed; it tells its workers apart by the sender.)
  caf::unsafe_send_as(self, driver, prep_ready_atom::value, static_cast<uint8_t>(stage));
}

struct decode_state {
  std::unique_ptr<data::FileDecoder> decoder;
  std::unique_ptr<data::CacheEntryReader> cached;  // or the file's cache entry
  uint32_t file = 0, next = 0;
  static inline const char* name = "dseek.prepare.decode";
};

decode_worker_actor::behavior_type decode_worker(
    decode_worker_actor::stateful_pointer<decode_state> self, context_ptr context,
    caf::actor driver) {
  announce(self, driver, PrepareStage::decode);
  return {
      [=](prep_decode_atom, uint32_t file, uint32_t number) {
        maybe_crash(*context, PrepareStage::decode);
        auto& st = self->state;
        const auto start = std::chrono::steady_clock::now();
        const bool from_cache = !context->cache_hit.empty() && context->cache_hit[file];
        auto read = [&]() -> data::Piece {
          if (from_cache) return st.cached->next();
          return st.decoder->next();
        };
        auto piece = std::make_shared<data::Piece>();
        try {
          if ((!st.decoder && !st.cached) || st.file != file || st.next != number) {
            st.decoder.reset();
            st.cached.reset();
            if (from_cache) {
              st.cached = std::make_unique<data::CacheEntryReader>(context->options.cache_dir,
                                                                   context->cache_keys[file]);
            } else {
              st.decoder = std::make_unique<data::FileDecoder>(
                  context->listing.files.at(file), file, context->input,
                  context->options.repair_utf8, context->options.nfc, context->options.piece_bytes);
            }
            st.file = file;
            for (st.next = 0; st.next < number; ++st.next) read();  // redone after a crash
          }
          *piece = read();
          ++st.next;
        } catch (const data::DataError& error) {  // a damaged cache entry
          piece->fatal = std::string(error.what()) + " (remove it, or the cache folder)";
          piece->last = true;
        }
        piece->file = file;
        piece->work_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (piece->last || piece->limit_reached) {
          st.decoder.reset();
          st.cached.reset();
        }
        caf::unsafe_send_as(self, driver, prep_done_atom::value, piece_ptr(std::move(piece)));
      },
  };
}

// A stateless stage: copy the piece, run `work` on the copy, send it back.
template <class Work>
piece_worker_actor::behavior_type piece_worker(piece_worker_actor::pointer self,
                                               PrepareStage stage, context_ptr context,
                                               caf::actor driver, Work work) {
  announce(self, driver, stage);
  return {
      [=](prep_work_atom, const piece_ptr& in) {
        maybe_crash(*context, stage);
        caf::unsafe_send_as(self, driver, prep_done_atom::value, run_stage(in, work));
      },
  };
}

piece_worker_actor::behavior_type dedup_worker(piece_worker_actor::pointer self,
                                               context_ptr context, caf::actor driver) {
  // A predecessor crashed in the middle of a piece: undo what it did of it.
  if (context->dedup_pending && context->dedup) {
    context->dedup->rollback(*context->dedup_pending);
    context->dedup_pending.reset();
  }
  announce(self, driver, PrepareStage::dedup);
  return {
      [=](prep_work_atom, const piece_ptr& in) {
        // A node of several (no dedup here): node 0's merge dedups every node's parts.
        if (!context->dedup) return caf::unsafe_send_as(self, driver, prep_done_atom::value, in);
        context->dedup_pending = context->dedup->mark();
        maybe_crash(*context, PrepareStage::dedup);
        piece_ptr out = run_stage(in, [&](data::Piece& piece) { context->dedup->apply(piece); });
        context->dedup_pending.reset();
        caf::unsafe_send_as(self, driver, prep_done_atom::value, out);
      },
  };
}

// --cache: the writer's pieces of a file go to its entry, committed with its last.
void cache_piece(prepare_context& context, const data::Piece& piece) {
  if (context.cache_keys.empty() || piece.cached) return;
  if (piece.number == 0) {
    context.cache_skip = false;
    context.cache_entry = std::make_unique<data::CacheEntryWriter>(
        context.options.cache_dir, context.cache_keys[piece.file]);
  }
  if (!context.cache_entry || context.cache_skip) return;
  context.cache_entry->append(piece);
  if (piece.last || piece.limit_reached) {
    context.cache_entry->commit();
    context.cache_entry.reset();
  }
}

piece_worker_actor::behavior_type write_worker(piece_worker_actor::pointer self,
                                               context_ptr context, caf::actor driver) {
  if (context->write_pending) {
    if (context->builder) context->builder->rollback(*context->write_pending);
    context->write_pending.reset();
    if (context->cache_entry) {  // its file is not cached in this run
      context->cache_entry.reset();
      context->cache_skip = true;
    }
  }
  announce(self, driver, PrepareStage::write);
  return {
      [=](prep_work_atom, const piece_ptr& in) {
        // A node of several writes its parts only (the cache's entries, cache_piece).
        context->write_pending =
            context->builder ? context->builder->mark() : data::DatasetBuilder::Mark{};
        maybe_crash(*context, PrepareStage::write);
        if (const uint32_t ms = context->options.faults.writer_delay_ms; ms > 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(ms));  // the slow writer
        }
        const auto start = std::chrono::steady_clock::now();
        // The answer: the piece without its documents (the driver logs its problems).
        auto out = std::make_shared<data::Piece>();
        out->file = in->file;
        out->number = in->number;
        out->last = in->last;
        out->limit_reached = in->limit_reached;
        out->problems = in->problems;
        try {
          if (context->builder) context->builder->add(*in);
          cache_piece(*context, *in);
        } catch (const data::DataError& error) {
          out->fatal = error.what();
        }
        context->write_pending.reset();
        out->work_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        caf::unsafe_send_as(self, driver, prep_done_atom::value, piece_ptr(std::move(out)));
      },
  };
}

}  // namespace

caf::actor spawn_stage_worker(caf::actor_system& sys, PrepareStage stage,
                              const context_ptr& context, const caf::actor& driver) {
  switch (stage) {
    case PrepareStage::decode:
      return caf::actor_cast<caf::actor>(sys.spawn(decode_worker, context, driver));
    case PrepareStage::clean:
      return caf::actor_cast<caf::actor>(sys.spawn(piece_worker<std::function<void(data::Piece&)>>, stage, context, driver,
                       std::function<void(data::Piece&)>([context](data::Piece& piece) {
                         data::clean_piece(piece, context->options.clean, *context->hasher);
                       })));
    case PrepareStage::dedup:
      return caf::actor_cast<caf::actor>(sys.spawn(dedup_worker, context, driver));
    case PrepareStage::tokenize:
      return caf::actor_cast<caf::actor>(sys.spawn(piece_worker<std::function<void(data::Piece&)>>, stage, context, driver,
                       std::function<void(data::Piece&)>([context](data::Piece& piece) {
                         data::tokenize_piece(piece, *context->tokenizer);
                       })));
    case PrepareStage::augment:
      return caf::actor_cast<caf::actor>(sys.spawn(piece_worker<std::function<void(data::Piece&)>>, stage, context, driver,
                       std::function<void(data::Piece&)>([context](data::Piece& piece) {
                         data::augment_piece(piece, context->options.fim, context->fim_tokens);
                       })));
    case PrepareStage::write:
      return caf::actor_cast<caf::actor>(sys.spawn<caf::detached>(write_worker, context, driver));
  }
  return {};
}

}  // namespace dseek::actors
