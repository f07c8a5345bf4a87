// The pipeline's driver (see pipeline_driver.hpp).
#include "actors/data/pipeline_driver.hpp"

#include <array>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/system_messages.hpp>

#include "actors/data/prepare_messages.hpp"
#include "actors/data/stage_workers.hpp"
#include "actors/supervision/supervisor.hpp"

namespace dseek::actors {
namespace {

using data::PrepareStage;
using clock = std::chrono::steady_clock;
using Key = std::pair<uint32_t, uint32_t>;  // (file, number)

constexpr size_t stage_index(PrepareStage stage) { return static_cast<size_t>(stage); }

struct busy_work {
  PrepareStage stage;
  piece_ptr input;  // null for decode
  uint32_t file = 0;
  uint64_t bytes = 0;
};

struct file_state {
  bool started = false, done = false, asked = false;
  uint32_t next = 0;   // the next piece to ask for
  caf::actor_addr decoder;  // the last one that read it (keeps the file open)
};

struct stage_counts {
  uint64_t pieces = 0, documents = 0, bytes = 0;
  double busy_seconds = 0;
};

struct driver_state {
  static inline const char* name = "dseek.prepare.driver";

  caf::event_based_actor* self = nullptr;
  context_ptr context;
  std::ostream* log = nullptr;
  caf::actor reply_to;
  supervisor_actor tree;
  bool finished = false;
  clock::time_point start = clock::now();

  uint32_t window = 0;
  bool use_augment = false;
  std::vector<file_state> files;
  uint32_t next_file = 0;
  uint64_t in_flight = 0;  // credits taken: asked of a decoder, not yet written
  uint64_t held_bytes = 0;
  std::optional<Key> end_key;  // --max-bytes reached in this piece: nothing after it

  std::map<caf::actor_addr, busy_work> busy;
  std::array<std::deque<caf::actor>, data::kPrepareStages> idle;
  std::array<std::deque<piece_ptr>, data::kPrepareStages> queue;  // pool stages
  std::map<Key, piece_ptr> dedup_wait, write_wait;                // in-order stages
  Key dedup_next{0, 0}, write_next{0, 0};
  std::array<stage_counts, data::kPrepareStages> counts{};
  std::array<uint64_t, data::kPrepareStages> peak_waiting{};
  uint64_t restarts = 0, peak_pieces = 0, peak_bytes = 0, largest_piece = 0;
  uint64_t finished_file_bytes = 0, total_file_bytes = 0;
  int drawn_lines = 0;  // of the terminal's progress display

  // -- accounting --------------------------------------------------------------------

  void hold(const piece_ptr& piece) {
    const uint64_t bytes = piece->bytes();
    held_bytes += bytes;
    largest_piece = std::max(largest_piece, bytes);
    peak_bytes = std::max(peak_bytes, held_bytes);
  }
  void release(uint64_t bytes) { held_bytes -= bytes; }
  void release(const piece_ptr& piece) { release(piece->bytes()); }

  bool after_end(const Key& key) const { return end_key && key > *end_key; }

  static Key following(const data::Piece& piece) {
    return piece.last || piece.limit_reached ? Key{piece.file + 1, 0}
                                             : Key{piece.file, piece.number + 1};
  }

  // -- dispatch ----------------------------------------------------------------------

  void give(PrepareStage stage, const piece_ptr& piece) {
    caf::actor worker = idle[stage_index(stage)].front();
    idle[stage_index(stage)].pop_front();
    busy[worker.address()] = {stage, piece, piece->file, piece->bytes()};
    self->send(worker, prep_work_atom::value, piece);
  }

  void give_in_order(PrepareStage stage, std::map<Key, piece_ptr>& wait, const Key& next) {
    if (idle[stage_index(stage)].empty()) return;
    auto it = wait.find(next);
    if (it == wait.end()) return;
    if (!it->second->fatal.empty()) return finish(it->second->fatal);
    piece_ptr piece = std::move(it->second);
    wait.erase(it);
    give(stage, piece);
  }

  void give_pool(PrepareStage stage) {
    auto& q = queue[stage_index(stage)];
    while (!idle[stage_index(stage)].empty() && !q.empty()) {
      piece_ptr piece = std::move(q.front());
      q.pop_front();
      give(stage, piece);
    }
  }

  // The lowest file not fully read (the in-order stages wait for it).
  uint32_t lowest_open_file() const {
    for (uint32_t f = 0; f < next_file; ++f)
      if (!files[f].done) return f;
    return next_file;
  }

  bool reading_stopped() const { return end_key.has_value(); }

  void ask_decoder(uint32_t f) {
    auto& pool = idle[stage_index(PrepareStage::decode)];
    // Prefer the decoder that has the file open.
    auto chosen = pool.begin();
    for (auto it = pool.begin(); it != pool.end(); ++it)
      if (it->address() == files[f].decoder) chosen = it;
    caf::actor worker = *chosen;
    pool.erase(chosen);
    file_state& file = files[f];
    file.started = true;
    file.asked = true;
    file.decoder = worker.address();
    ++in_flight;
    peak_pieces = std::max(peak_pieces, in_flight);
    busy[worker.address()] = {PrepareStage::decode, nullptr, f, 0};
    self->send(worker, prep_decode_atom::value, f, file.next);
  }

  void give_decode() {
    auto& pool = idle[stage_index(PrepareStage::decode)];
    while (!pool.empty() && !reading_stopped()) {
      const uint32_t lowest = lowest_open_file();
      auto allowed = [&](uint32_t f) { return in_flight < (f == lowest ? window : window - 1); };
      std::optional<uint32_t> pick;
      uint32_t open = 0;
      for (uint32_t f = lowest; f < next_file && !pick; ++f) {
        if (files[f].done) continue;
        ++open;
        if (!files[f].asked && allowed(f)) pick = f;
      }
      // A new file while fewer are open than there are decoders.
      const size_t decoders = context->options.workers;
      if (!pick && next_file < files.size() && open < decoders && allowed(next_file)) {
        pick = next_file++;
      }
      if (!pick) return;
      ask_decoder(*pick);
    }
  }

  // Pieces waiting for a worker of `stage` (or for their turn at an in-order stage).
  uint64_t waiting(PrepareStage stage) const {
    switch (stage) {
      case PrepareStage::dedup: return dedup_wait.size();
      case PrepareStage::write: return write_wait.size();
      default: return queue[stage_index(stage)].size();
    }
  }

  void pump() {
    if (finished) return;
    give_in_order(PrepareStage::write, write_wait, write_next);
    if (use_augment) give_pool(PrepareStage::augment);
    give_pool(PrepareStage::tokenize);
    give_in_order(PrepareStage::dedup, dedup_wait, dedup_next);
    if (finished) return;  // a --strict error reached its turn
    give_pool(PrepareStage::clean);
    give_decode();
    // What is left waiting once every idle worker has been given a piece.
    for (size_t s = 0; s < data::kPrepareStages; ++s)
      peak_waiting[s] = std::max(peak_waiting[s], waiting(static_cast<PrepareStage>(s)));
    if (write_next.first >= files.size() ||
        (end_key && write_next > *end_key && in_flight == 0)) {
      finish("");
    }
  }

  // -- results -----------------------------------------------------------------------

  void on_done(const caf::strong_actor_ptr& sender, piece_ptr out) {
    const auto from = caf::actor_cast<caf::actor_addr>(sender);
    auto it = busy.find(from);
    if (it == busy.end()) return;  // a late answer of a worker already replaced
    const busy_work work = it->second;
    busy.erase(it);
    idle[stage_index(work.stage)].push_back(caf::actor_cast<caf::actor>(sender));
    release(work.bytes);
    stage_counts& c = counts[stage_index(work.stage)];
    ++c.pieces;
    c.documents += (work.input ? work.input : out)->documents.size();
    for (const auto& d : (work.input ? work.input : out)->documents) c.bytes += d.text_bytes;
    c.busy_seconds += out->work_seconds;  // the workers time their own work
    // A stage's error ends the run; a file's (--strict) when its turn comes in corpus
    // order, so the error reported is the first in the corpus, whatever the workers.
    if (!out->fatal.empty() && work.stage != PrepareStage::decode) return finish(out->fatal);
    if (work.stage == PrepareStage::decode) {
      file_state& file = files[out->file];
      file.asked = false;
      ++file.next;
      if (out->last || (out->cached && out->limit_reached)) {
        file.done = true;
        finished_file_bytes += file_size(out->file);
      }
    }
    const Key key{out->file, out->number};
    if (work.stage == PrepareStage::write) {
      --in_flight;
      for (const std::string& problem : out->problems) *log << "data prepare: " << problem << "\n";
      write_next = following(*out);
      return pump();
    }
    if (after_end(key)) {  // beyond --max-bytes: dropped unread
      --in_flight;
      return pump();
    }
    hold(out);
    switch (work.stage) {
      case PrepareStage::decode:
        if (out->fatal.empty() && !out->cached) {
          queue[stage_index(PrepareStage::clean)].push_back(out);
        } else {
          dedup_wait[key] = out;  // cached: cleaned in the run that cached it
        }
        break;
      case PrepareStage::clean: dedup_wait[key] = out; break;
      case PrepareStage::dedup:
        dedup_next = following(*out);
        if (out->limit_reached && !end_key) stop_after(key);
        if (out->cached) {
          write_wait[key] = out;  // tokenized and augmented in the run that cached it
        } else {
          queue[stage_index(PrepareStage::tokenize)].push_back(out);
        }
        break;
      case PrepareStage::tokenize:
        if (use_augment) {
          queue[stage_index(PrepareStage::augment)].push_back(out);
        } else {
          write_wait[key] = out;
        }
        break;
      case PrepareStage::augment: write_wait[key] = out; break;
      case PrepareStage::write: break;
    }
    pump();
  }

  // --max-bytes reached in `key`: nothing after it is read or kept.
  void stop_after(const Key& key) {
    end_key = key;
    auto drop_after = [&](auto& container) {
      for (auto it = container.begin(); it != container.end();) {
        const piece_ptr& piece = container_piece(*it);
        if (after_end({piece->file, piece->number})) {
          release(piece);
          --in_flight;
          it = container.erase(it);
        } else {
          ++it;
        }
      }
    };
    for (auto& q : queue) drop_after(q);
    drop_after(dedup_wait);
    drop_after(write_wait);
  }
  static const piece_ptr& container_piece(const piece_ptr& p) { return p; }
  static const piece_ptr& container_piece(const std::pair<const Key, piece_ptr>& p) {
    return p.second;
  }

  uint64_t file_size(uint32_t f) const {
    const data::SourceFile& file = context->listing.files[f];
    if (file.range) return file.range->end - file.range->begin;  // a node's byte range
    std::error_code error;
    const auto size = std::filesystem::file_size(file.path, error);
    return error ? 0 : size;
  }

  // A worker went down: its piece goes back to be given again.
  void on_down(const caf::down_msg& down) {
    if (tree && down.source == tree.address()) {
      if (!finished) finish("the prepare supervisor stopped: " + self->system().render(down.reason));
      return;
    }
    for (auto& pool : idle) {
      for (auto it = pool.begin(); it != pool.end(); ++it) {
        if (it->address() == down.source) {
          pool.erase(it);
          break;
        }
      }
    }
    if (finished) return;
    ++restarts;
    *log << "data prepare: a " << "stage actor stopped (" << self->system().render(down.reason)
         << "); its supervisor restarts it\n";
    auto it = busy.find(down.source);
    if (it == busy.end()) return;
    const busy_work work = it->second;
    busy.erase(it);
    *log << "data prepare: giving its piece of file " << work.file << " again ("
         << data::prepare_stage_name(work.stage) << ")\n";
    switch (work.stage) {
      case PrepareStage::decode:
        files[work.file].asked = false;
        files[work.file].decoder = {};
        --in_flight;
        break;
      case PrepareStage::dedup: dedup_wait[{work.input->file, work.input->number}] = work.input; break;
      case PrepareStage::write: write_wait[{work.input->file, work.input->number}] = work.input; break;
      default: queue[stage_index(work.stage)].push_front(work.input); break;
    }
    pump();
  }

  // -- progress and the end ----------------------------------------------------------

  // The ETA from the input files' bytes finished so far, or "" before the first.
  std::string eta(double seconds) const {
    if (finished_file_bytes == 0 || total_file_bytes <= finished_file_bytes) return "";
    const double rate = static_cast<double>(finished_file_bytes) / seconds;
    char text[64];
    std::snprintf(text, sizeof text, ", ETA %.0f s",
                  static_cast<double>(total_file_bytes - finished_file_bytes) / rate);
    return text;
  }

  // On a terminal: a line for the run and one per stage (documents, their rate, MB/s),
  // redrawn in place every second.
  void progress_on_terminal(double seconds) {
    std::string text;
    if (drawn_lines > 0) text += "\x1b[" + std::to_string(drawn_lines) + "A";
    char line[256];
    std::snprintf(line, sizeof line, "\x1b[2Kdata prepare: %.0f s, %u/%zu files%s\n", seconds,
                  static_cast<unsigned>(write_next.first), files.size(), eta(seconds).c_str());
    text += line;
    drawn_lines = 1;
    for (size_t s = 0; s < data::kPrepareStages; ++s) {
      if (s == stage_index(PrepareStage::augment) && !use_augment) continue;
      std::snprintf(line, sizeof line,
                    "\x1b[2K  %-9s %10llu documents %8.0f/s %8.1f MB/s %4llu waiting\n",
                    data::prepare_stage_name(static_cast<PrepareStage>(s)),
                    static_cast<unsigned long long>(counts[s].documents),
                    static_cast<double>(counts[s].documents) / seconds,
                    static_cast<double>(counts[s].bytes) / 1e6 / seconds,
                    static_cast<unsigned long long>(waiting(static_cast<PrepareStage>(s))));
      text += line;
      ++drawn_lines;
    }
    *log << text << std::flush;
  }

  void progress() {
    if (finished || !context->options.progress) return;
    const double seconds = std::chrono::duration<double>(clock::now() - start).count();
    if (context->options.progress_terminal) return progress_on_terminal(seconds);
    char line[512];
    int n = std::snprintf(line, sizeof line, "data prepare: %.0f s, %u/%zu files",
                          seconds, static_cast<unsigned>(write_next.first), files.size());
    for (size_t s = 0; s < data::kPrepareStages; ++s) {
      if (s == stage_index(PrepareStage::augment) && !use_augment) continue;
      n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n),
                         " | %s %llu (%.0f/s, %llu waiting)",
                         data::prepare_stage_name(static_cast<PrepareStage>(s)),
                         static_cast<unsigned long long>(counts[s].documents),
                         static_cast<double>(counts[s].documents) / seconds,
                         static_cast<unsigned long long>(waiting(static_cast<PrepareStage>(s))));
    }
    const double mb_per_s = static_cast<double>(counts[0].bytes) / 1e6 / seconds;
    n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n), " documents; %.1f MB/s",
                       mb_per_s);
    *log << line << eta(seconds) << "\n" << std::flush;
  }

  void finish(const std::string& error) {
    if (finished) return;
    finished = true;
    data::PrepareSummary& s = context->pipeline;
    s.pieces = counts[stage_index(PrepareStage::write)].pieces;
    s.workers = context->options.workers;
    s.window = window;
    s.peak_pieces = peak_pieces;
    s.peak_bytes = peak_bytes;
    s.largest_piece_bytes = largest_piece;
    s.restarts = restarts;
    for (size_t i = 0; i < data::kPrepareStages; ++i) {
      s.stage_documents[i] = counts[i].documents;
      s.stage_busy_seconds[i] = counts[i].busy_seconds;
      s.stage_peak_waiting[i] = peak_waiting[i];
    }
    auto reply = [this, error] {
      self->send(reply_to, prep_done_atom::value, error);
      self->quit();
    };
    self->request(tree, std::chrono::seconds(60), shutdown_atom::value)
        .then([reply](caf::ok_atom) { reply(); }, [reply](caf::error&) { reply(); });
  }
};

using driver_actor = caf::stateful_actor<driver_state>;

supervisor_config stage_supervisor(PrepareStage stage, uint32_t count, const context_ptr& context,
                                   const caf::actor& driver) {
  supervisor_config cfg;
  cfg.name = data::prepare_stage_name(stage);
  cfg.strategy = restart_strategy::one_for_one;
  cfg.max_restarts = 5;
  cfg.restart_period = std::chrono::seconds(10);
  for (uint32_t i = 0; i < count; ++i) {
    child_spec child;
    child.name = cfg.name + "-" + std::to_string(i);
    child.shutdown_timeout = std::chrono::seconds(30);  // the writer may be in a slow write
    child.start = [stage, context, driver](caf::actor_system& sys) {
      return spawn_stage_worker(sys, stage, context, driver);
    };
    cfg.children.push_back(std::move(child));
  }
  return cfg;
}

caf::behavior driver_fun(driver_actor* self, context_ptr context, std::ostream* log,
                         caf::actor reply_to) {
  auto& st = self->state;
  st.self = self;
  st.context = context;
  st.log = log;
  st.reply_to = std::move(reply_to);
  const uint32_t workers = context->options.workers;
  st.window = context->options.window;
  st.use_augment = context->options.fim.rate > 0.0;
  st.files.resize(context->listing.files.size());
  for (uint32_t f = 0; f < st.files.size(); ++f) st.total_file_bytes += st.file_size(f);

  self->set_down_handler([self](caf::down_msg& down) { self->state.on_down(down); });
  supervisor_config top;
  top.name = "prepare";
  top.strategy = restart_strategy::one_for_one;
  top.max_restarts = 3;
  const caf::actor me = caf::actor_cast<caf::actor>(self);
  for (PrepareStage stage : {PrepareStage::decode, PrepareStage::clean, PrepareStage::dedup,
                             PrepareStage::tokenize, PrepareStage::augment, PrepareStage::write}) {
    if (stage == PrepareStage::augment && !st.use_augment) continue;
    const bool single = stage == PrepareStage::dedup || stage == PrepareStage::write;
    top.children.push_back(
        supervisor_child(stage_supervisor(stage, single ? 1 : workers, context, me)));
  }
  st.tree = spawn_supervisor(self->system(), std::move(top));
  self->monitor(st.tree);
  self->send(self, prep_tick_atom::value);
  return {
      [self](prep_ready_atom, uint8_t stage) {
        auto& s = self->state;
        const caf::actor worker = caf::actor_cast<caf::actor>(self->current_sender());
        if (stage >= data::kPrepareStages || !worker) return;
        self->monitor(worker);
        s.idle[stage].push_back(worker);
        s.pump();
      },
      [self](prep_done_atom, piece_ptr& piece) {
        self->state.on_done(self->current_sender(), std::move(piece));
      },
      [self](prep_tick_atom) {
        auto& s = self->state;
        if (s.finished) return;
        if (std::chrono::duration<double>(clock::now() - s.start).count() > 0.5) s.progress();
        self->delayed_send(self, std::chrono::seconds(1), prep_tick_atom::value);
      },
  };
}

}  // namespace

caf::actor spawn_prepare_driver(caf::actor_system& sys, context_ptr context, std::ostream& log,
                                caf::actor reply_to) {
  // Detached: the workers keep the scheduler's threads busy, and the driver answers
  // them at once, so no worker waits for its next piece.
  return sys.spawn<caf::detached>(driver_fun, std::move(context), &log, std::move(reply_to));
}

}  // namespace dseek::actors
