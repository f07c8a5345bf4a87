// A plain CAF 0.17 program that embeds a whole dseek node (actors/node/embedded_node.hpp,
// docs/embedding.md) in its own actor system:
//
//   1. One call on the program's config announces dseek's message types and loads what
//      a node needs (the middleman; libcaf_openssl when the job uses TLS).
//   2. The program spawns the node of a one-node job: it starts training at once.
//   3. The program's own actor, subscribed from the node's first event, prints every
//      event (the same records as the node's events.jsonl) and, at the end, the result.
//   4. Meanwhile the program asks the node for its status once a second.
//   5. The node tells the result (exit code, steps, final loss, params_sha256) and
//      exits; the program ends with the node's exit code.
//
//   dseek_embedded_node_example CONFIG RUN_DIR [section.key=value ...]
//
// For example, a short run of the laptop job:
//
//   build/bin/dseek_embedded_node_example config/single.toml runs/embedded train.steps=20
//
// Exits with the node's exit code (0: the job finished), 2 on a bad command line, 3 on
// a config the node cannot run.
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/node/embedded_node.hpp"
#include "runtime/config/absolute_paths.hpp"
#include "runtime/config/load.hpp"
#include "runtime/train/check_job.hpp"

namespace {

using namespace dseek::actors;
using namespace std::chrono_literals;

// 1. The program's config: dseek's types and modules, for this job's cluster section.
class host_config : public caf::actor_system_config {
 public:
  explicit host_config(const dseek::config::ClusterConfig& cluster) {
    register_node_types(*this, cluster);
  }
};

// 3. This program's own actor: prints what the node says, passes the result to `main`.
caf::behavior event_printer(caf::event_based_actor* self, caf::actor main) {
  return {
      [](const node_event& e) { std::cout << "event: " << e.event << " " << e.fields_json << "\n"; },
      [self, main](const node_result& r) {
        std::cout << "result: exit code " << r.exit_code << ", " << r.steps << " steps, final loss "
                  << r.final_loss << ", params_sha256 " << r.params_sha256
                  << (r.reason.empty() ? "" : ", reason: " + r.reason) << "\n";
        self->send(main, r);
        self->quit();
      },
  };
}

int run(caf::actor_system& sys, const dseek::config::JobConfig& job, const std::string& run_dir) {
  caf::scoped_actor self{sys};
  auto printer = sys.spawn(event_printer, caf::actor_cast<caf::actor>(self));

  // 2. The node, with the printer subscribed from the first event.
  node_options options;
  options.run_dir = run_dir;
  options.subscribers.push_back(printer);
  node_actor node;
  try {
    node = spawn_node(sys, job, options);  // throws on a config this node cannot run
  } catch (...) {
    caf::anon_send_exit(printer, caf::exit_reason::kill);  // else the system waits for it
    throw;
  }

  // 4. Until the result comes: the node's status once a second (a request with a timeout;
  //    a failure would come back as a caf::error).
  bool done = false;
  node_result result;
  while (!done) {
    self->receive(
        [&](node_result& r) {
          result = std::move(r);
          done = true;
        },
        caf::after(1s) >> [&] {
          self->request(node, 5s, node_status_atom::value)
              .receive(
                  [](const node_status& s) {
                    std::cout << "status: " << s.phase << ", epoch " << s.epoch << ", world "
                              << s.world_size << ", step " << s.step << ", loss " << s.loss
                              << ", " << s.tokens_per_s << " tokens/s\n";
                  },
                  // The node ended between the result and this request: the result is next.
                  [&](caf::error& e) { std::cout << "status: " << sys.render(e) << "\n"; });
        });
  }
  // 5. The node has told its result; its actor exits right after.
  return result.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: dseek_embedded_node_example CONFIG RUN_DIR [section.key=value ...]\n";
    return 2;
  }
  dseek::config::JobConfig job;
  try {
    job = dseek::config::load_config(argv[1], std::vector<std::string>(argv + 3, argv + argc));
    dseek::config::make_paths_absolute(job);
    dseek::train::check_job(job);
  } catch (const std::exception& e) {
    std::cerr << "example: " << e.what() << "\n";
    return 3;
  }
  int rc = 1;
  try {
    host_config cfg{job.cluster};
    caf::actor_system sys{cfg};
    rc = run(sys, job, std::filesystem::absolute(argv[2]).string());
  } catch (const std::exception& e) {  // spawn_node refused the job
    std::cerr << "example: " << e.what() << "\n";
    return 3;
  }
  std::cout << (rc == 0 ? "ok\n" : "FAILED\n");
  return rc;
}
