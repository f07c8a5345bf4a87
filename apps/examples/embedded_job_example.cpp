// A CAF 0.17 program that embeds one node of a multi-node job (actors/node/embedded_node.hpp,
// docs/embedding.md) and steers the whole job from its own actor system, while the job's
// other nodes are standalone dseek-node processes:
//
//   1. One call on the program's config announces dseek's types and loads what a node needs.
//   2. The program spawns its node, which joins the job's coordinator like any dseek-node.
//   3. Once the job has trained PAUSE_AFTER steps, the program pauses it: every node stops
//      at the same step boundary, and the answer is that step.
//   4. Paused, it asks for a checkpoint of the whole job: the answer is the step of the
//      committed checkpoint (written by the job's rank 0, whichever node that is).
//   5. It checks that the job stays put, resumes it, and waits for the job's end: the
//      node's result (exit code, steps, params_sha256) is the program's.
//
//   dseek_embedded_job_example PAUSE_AFTER CONFIG RUN_DIR [section.key=value ...]
//
// For example, node 1 of a 2-node job whose node 0 runs in another terminal:
//
//   export DSEEK_CLUSTER_SECRET=s3cret
//   build/bin/dseek-node --config config/single.toml --run-dir runs/two \
//       --set cluster.nodes=2 --set cluster.coordinator=127.0.0.1:7070 --set train.steps=30
//   build/bin/dseek_embedded_job_example 10 config/single.toml runs/two cluster.nodes=2 \
//       cluster.node_id=1 cluster.coordinator=127.0.0.1:7070 train.steps=30
//
// Exits with the node's exit code (0: the job finished), 2 on a bad command line, 3 on
// a config the node cannot run, 1 when a request failed.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
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

// One request to the node, waited for (with a timeout, as every request should have);
// a caf::error (category "dseek_node") is printed and thrown.
template <class Answer, class... Request>
Answer ask(caf::scoped_actor& self, const node_actor& node, std::chrono::seconds timeout,
           Request... request) {
  Answer answer{};
  self->request(node, timeout, request...)
      .receive([&](Answer& a) { answer = a; },
               [&](caf::error& e) {
                 throw std::runtime_error("the node answered " + self->system().render(e));
               });
  return answer;
}

int run(caf::actor_system& sys, const dseek::config::JobConfig& job, const std::string& run_dir,
        std::int64_t pause_after) {
  caf::scoped_actor self{sys};

  // 2. The node joins the job; this program is its subscriber from the first event.
  node_options options;
  options.run_dir = run_dir;
  options.subscribers.push_back(caf::actor_cast<caf::actor>(self));
  node_actor node = spawn_node(sys, job, options);

  // Until the result comes, this program reads the node's events (each a line of its
  // events.jsonl) and acts on the ones it cares about.
  node_result result;
  bool done = false;
  bool paused_once = false;
  auto on_result = [&](node_result& r) {
    result = std::move(r);
    done = true;
  };
  try {
    while (!done) {
      self->receive(
          [&](node_event& e) {
            if (e.event != "step" || paused_once) return;
            const auto status = ask<node_status>(self, node, 5s, node_status_atom::value);
            if (status.step < pause_after) return;
            paused_once = true;

            // 3. Pause the job at a step boundary: the answer comes once it holds.
            const auto at = ask<std::int64_t>(self, node, 60s, node_pause_atom::value);
            std::cout << "paused: the job holds after step " << at << "\n";

            // 4. A checkpoint of the paused job.
            const auto saved = ask<std::int64_t>(self, node, 120s, node_checkpoint_atom::value);
            std::cout << "checkpoint: step " << saved << " committed\n";

            // 5. Nothing trains while paused; then resume.
            std::this_thread::sleep_for(500ms);
            const auto still = ask<node_status>(self, node, 5s, node_status_atom::value);
            std::cout << "status: " << still.phase << " at step " << still.step << "\n";
            ask<caf::ok_atom>(self, node, 5s, node_resume_atom::value);
            std::cout << "resumed\n";
          },
          on_result);
    }
  } catch (const std::exception& e) {
    // A request failed: stop the node (its tree would keep the actor system up) and
    // wait for its result.
    std::cerr << "example: " << e.what() << "; stopping the node\n";
    self->send(node, node_stop_atom::value);
    while (!done)
      self->receive([](node_event&) {}, on_result,
                    caf::after(300s) >> [&] { done = true; });
    return 1;
  }
  std::cout << "result: exit code " << result.exit_code << ", " << result.steps
            << " steps, final loss " << result.final_loss << ", params_sha256 "
            << result.params_sha256 << (result.reason.empty() ? "" : ", reason: " + result.reason)
            << "\n";
  return result.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: dseek_embedded_job_example PAUSE_AFTER CONFIG RUN_DIR "
                 "[section.key=value ...]\n";
    return 2;
  }
  std::int64_t pause_after = 0;
  try {
    pause_after = std::stoll(argv[1]);
  } catch (const std::exception&) {
    std::cerr << "example: PAUSE_AFTER is a number of steps, not '" << argv[1] << "'\n";
    return 2;
  }
  dseek::config::JobConfig job;
  try {
    job = dseek::config::load_config(argv[2], std::vector<std::string>(argv + 4, argv + argc));
    dseek::config::make_paths_absolute(job);
    dseek::train::check_job(job);
  } catch (const std::exception& e) {
    std::cerr << "example: " << e.what() << "\n";
    return 3;
  }
  host_config cfg{job.cluster};
  caf::actor_system sys{cfg};
  int rc = 1;
  try {
    rc = run(sys, job, std::filesystem::absolute(argv[3]).string(), pause_after);
  } catch (const std::exception& e) {  // spawn_node refused the job
    std::cerr << "example: " << e.what() << "\n";
    return 3;
  }
  std::cout << (rc == 0 ? "ok\n" : "FAILED\n");
  return rc;
}
