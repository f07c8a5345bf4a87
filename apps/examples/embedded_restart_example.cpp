// A CAF 0.17 program whose own supervisor runs an embedded dseek node as its child and
// starts it again when it crashes (actors/node/embedded_node.hpp, docs/embedding.md). The
// job's other nodes are standalone dseek-node processes; to them the crash is a lost node,
// and the restarted node rejoins as one that a launcher restarted:
//
//   1. One call on the program's config announces dseek's types and loads what a node needs.
//   2. A dseek supervisor (actors/supervision/supervisor.hpp) with one child, the node.
//      Its start function spawns the job's node with the count of earlier starts as its
//      incarnation (an injected fault fires in incarnation 0 only) and this program as
//      its subscriber. restart = transient: a node that fails is started again, one that
//      ends normally (the job is done) is not.
//   3. The job injects the crash: [[faults]] kind = "crash_actor", actor = "node" at a
//      step. The node actor throws, its whole tree goes down with it, the supervisor
//      starts incarnation 1, which rejoins the job; the job recovers (from a peer's copy
//      of the state) and trains to its end.
//   4. The program prints the events that tell the story and each incarnation's result,
//      and ends with the first result of exit code 0, or when the supervisor gives up.
//
//   dseek_embedded_restart_example CONFIG RUN_DIR [section.key=value ...]
//
// For example, node 1 of a 2-node job whose node 0 runs in another terminal:
//
//   export DSEEK_CLUSTER_SECRET=s3cret
//   build/bin/dseek-node --config config/single.toml --run-dir runs/two \
//       --set cluster.nodes=2 --set cluster.coordinator=127.0.0.1:7070 --set train.steps=30
//   build/bin/dseek_embedded_restart_example config/single.toml runs/two cluster.nodes=2 \
//       cluster.node_id=1 cluster.coordinator=127.0.0.1:7070 train.steps=30 \
//       'faults=[{kind = "crash_actor", actor = "node", node = 1, step = 10}]'
//
// Exits with the last result's exit code (0: the job finished), 2 on a bad command line,
// 3 on a config the node cannot run.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/node/embedded_node.hpp"
#include "actors/supervision/supervisor.hpp"
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

// The events worth a line here (every one is in the node's events.jsonl).
const std::set<std::string> kStory = {"node_started", "fault_injected", "node_failed",
                                      "epoch_started", "recovered", "train_done"};

int run(caf::actor_system& sys, const dseek::config::JobConfig& job, const std::string& run_dir) {
  caf::scoped_actor self{sys};
  const auto main = caf::actor_cast<caf::actor>(self);

  // 2. The supervisor and its one child. The start function runs in the supervisor at
  //    every (re)start; it must not block, and a throw is a failed start.
  auto starts = std::make_shared<std::int64_t>(0);
  supervisor_config tree;
  tree.name = "host";
  tree.max_restarts = 3;
  tree.restart_period = 60s;
  tree.listener = main;  // hears of every restart
  child_spec node_child;
  node_child.name = "dseek-node";
  node_child.restart = restart_policy::transient;
  node_child.shutdown_timeout = 120s;  // an orderly stop writes the final checkpoint
  node_child.start = [job, run_dir, starts, main](caf::actor_system& s) {
    node_options options;
    options.run_dir = run_dir;
    options.incarnation = (*starts)++;
    options.subscribers.push_back(main);
    return caf::actor_cast<caf::actor>(spawn_node(s, job, options));
  };
  tree.children.push_back(std::move(node_child));
  auto supervisor = spawn_supervisor(sys, std::move(tree));
  self->monitor(supervisor);

  // 3-4. The story, until a node's job ends well or the supervisor gives up.
  int exit_code = 1;
  bool done = false;
  while (!done) {
    self->receive(
        [&](node_event& e) {
          if (kStory.count(e.event) > 0) std::cout << "event: " << e.event << " " << e.fields_json << "\n";
        },
        [&](node_result& r) {
          std::cout << "result: exit code " << r.exit_code << ", " << r.steps << " steps, final loss "
                    << r.final_loss << ", params_sha256 " << r.params_sha256
                    << (r.reason.empty() ? "" : ", reason: " + r.reason) << "\n";
          exit_code = r.exit_code;
          // Done when the job ended well, or failed in a way no restart cures (exit 3).
          done = r.exit_code == 0 || r.exit_code == 3;
        },
        [&](child_restarted& r) {
          std::cout << "supervisor: " << r.child << " restarted (" << sys.render(r.reason)
                    << "), restarts " << r.restarts << "\n";
        },
        [&](child_exited&) {},
        [&](caf::down_msg& down) {
          std::cout << "supervisor: gave up (" << sys.render(down.reason) << ")\n";
          done = true;
        });
  }
  // The node has ended normally and is not started again: stop the (empty) tree.
  self->request(supervisor, 130s, shutdown_atom::value)
      .receive([](caf::ok_atom) {}, [&](caf::error& e) { std::cout << sys.render(e) << "\n"; });
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: dseek_embedded_restart_example CONFIG RUN_DIR [section.key=value ...]\n";
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
  host_config cfg{job.cluster};
  caf::actor_system sys{cfg};
  const int rc = run(sys, job, std::filesystem::absolute(argv[2]).string());
  std::cout << (rc == 0 ? "ok\n" : "FAILED\n");
  return rc;
}
