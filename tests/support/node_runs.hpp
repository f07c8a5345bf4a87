// What the integration tests share to run dseek-node as a user would: the built
// binaries, a small prepared data set of real text, a tiny job's command line, and
// readers for the events.jsonl a run leaves behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace dseek::testing {

std::string bin(const char* name);  // build/bin/<name>

// 3 MB of the Python standard library's sources, prepared once per test process.
const std::filesystem::path& prepared_text();

// dseek-node on config/single.toml shrunk to a model that trains in seconds, on
// prepared_text(), with plain progress lines; `extra` arguments come last (a later
// --set wins).
std::vector<std::string> tiny_job(const std::filesystem::path& run_dir, int steps,
                                  const std::vector<std::string>& extra = {});
// `dseek launch --nodes N` of the same tiny job (config, data, model, --set values), its
// nodes writing to run_dir/node-<id>/; `extra` comes last.
std::vector<std::string> tiny_launch(const std::filesystem::path& run_dir, int nodes, int steps,
                                     const std::vector<std::string>& extra = {});
// A TCP port on 127.0.0.1 that was free a moment ago (for a coordinator the test starts).
int free_port();
// Whether a listening socket could take 127.0.0.1:`port` now.
bool port_free(int port);
// P such that P and P + 1 were free a moment ago (the /metrics ports of nodes 0 and 1).
int free_port_pair();
// A stranger on 127.0.0.1:`port`: connects, sends the first bytes of a TLS ClientHello
// and closes, so the server's TLS handshake reads an unexpected end of file. Whether it
// got through (no REQUIRE: callable from a thread; the port may have closed).
bool half_tls_handshake(int port);

std::vector<std::string> read_lines(const std::filesystem::path& file);
// The lines of `lines` whose event is `event`.
std::vector<std::string> events_named(const std::vector<std::string>& lines,
                                      const std::string& event);
// The events `event` of node 0 (or of node `node_id`) of the run in `run_dir`; only whole
// lines, so that a file being written can be read.
std::vector<std::string> node_events(const std::filesystem::path& run_dir,
                                     const std::string& event);
std::vector<std::string> node_events(const std::filesystem::path& run_dir, int node_id,
                                     const std::string& event);
// Node `node_id`'s resumed events that read a checkpoint (a resume from memory has no
// "path").
std::vector<std::string> checkpoint_reads(const std::filesystem::path& run_dir, int node_id);
// Polls node `node_id`'s events until one named `event` satisfies `match` (any, when
// empty) and returns it; "" after `timeout`.
std::string wait_for_event(const std::filesystem::path& run_dir, int node_id,
                           const std::string& event, std::chrono::milliseconds timeout,
                           const std::function<bool(const std::string&)>& match = {});
// A field of one JSON event line (REQUIREs that it is there).
double number_field(const std::string& line, const std::string& key);
std::string string_field(const std::string& line, const std::string& key);

// What the multi-node tests (`dseek launch` jobs) share.

// `a` followed by `b`: tiny_launch(..., kOneThread + faults("...")).
std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b);
// --set faults=[...] from the inline TOML tables in `tables`.
std::vector<std::string> faults(const std::string& tables);
// The environment that makes the launcher run this build's dseek-node, whatever the
// environment says.
std::vector<std::string> launch_env();
// The first event `event` of node `node_id` whose number field `key` is `value`; "" if none.
std::string event_with(const std::filesystem::path& run_dir, int node_id, const std::string& event,
                       const std::string& key, double value);
// Node `node_id`'s first fault_injected event of kind `kind`; "" if none.
std::string fault_of(const std::filesystem::path& run_dir, int node_id, const std::string& kind);
// How node `node_id` learned that the SDC audit evicted a node: its one sdc_detected
// event, or, on a rank whose data plane the re-plan aborted in the verdict's last
// collective (the others already had it), the training_interrupted that names the audit;
// "" if neither.
std::string sdc_eviction_seen(const std::filesystem::path& run_dir, int node_id);
// A running dseek-node with this pid (not a zombie, not a reused pid).
bool node_process_alive(pid_t pid);
// The pids of node `node_id`'s processes (one per incarnation: its node_started events).
std::vector<pid_t> node_pids(const std::filesystem::path& run_dir, int node_id);
// Every node process of the run is gone; any that is not is killed, so that a failing
// test leaves nothing behind either (CHECKs).
void require_no_node_left(const std::filesystem::path& run_dir, int nodes);
// Node `node_id`'s params_sha256, CHECKing that its one train_done event is at `steps`.
std::string final_params_sha256(const std::filesystem::path& run_dir, int node_id, int steps);

}  // namespace dseek::testing
