// The event loop of `dseek launch`: runs the N nodes of a job as local processes, puts
// their output on the launcher's stdout and stderr with a "[node k] " prefix per line,
// restarts a node that dies (up to max_restarts times per node id), and stops the job
// on a failure beyond that, on --timeout, or on SIGINT/SIGTERM (a second one kills).
// cmd_launch.cpp turns the command line and the config into a LaunchPlan; this file
// knows nothing about configs. One ChildProcess (child_process.hpp) per running node,
// one LinePrefixer (line_prefixer.hpp) per node and stream, and one JobConsole
// (job_console.hpp) that writes the lines, or a progress bar for the job on a terminal.
//
// Single-threaded: poll() over every child's pipes and a signalfd (SIGCHLD, SIGINT,
// SIGTERM, SIGHUP), with the nearest deadline as the poll timeout; nothing busy-waits.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "runtime/util/exit_codes.hpp"

namespace dseek::tool::launch {

struct LaunchPlan {
  std::string node_binary;               // the program every node runs
  std::string config_path;
  std::string run_dir;
  int nodes = 1;
  std::string coordinator;               // "127.0.0.1:PORT"
  std::vector<std::string> node_sets;    // --set values for every node, in order
  std::vector<std::string> extra_env;    // "NAME=value" added to every node's environment
  int max_restarts = 3;                  // restarts per node id before it is given up
  // A node given up (past max_restarts) ends the job only when it is the coordinator
  // node or fewer than min_nodes would be left (the job's elastic.min_nodes).
  int min_nodes = 0;  // 0: no consent to shrink (the nodes then end with exit 3)
  int coordinator_node = 0;
  std::chrono::milliseconds timeout{0};  // the whole job; 0 = none
  // After SIGTERM, before SIGKILL; and how long nodes still running (hung, or cut off)
  // get once the job finished on another node before they are stopped.
  std::chrono::milliseconds stop_grace{10'000};
  // One progress bar for the job on the launcher's terminal (job_console.hpp), drawn
  // from the coordinator node's step lines; false: every node's lines as they come.
  bool progress_bar = false;
  // Not a training job when set: every node runs node_binary with these arguments and
  // "--nodes N --node-id K" after them (`dseek launch --nodes N data prepare ...`).
  // Every node then runs to its own end: none is restarted, a failure stops no other
  // node (each one's failure is named), none is stopped for lagging behind one that
  // finished, and the job fails when any node did.
  std::vector<std::string> node_args;
};

// Exit codes of run_local_job() (runtime/util/exit_codes.hpp). A node that exits with
// exit_code::permanent (or usage) is not restarted: the job stops with its status. A
// job stopped orderly by SIGINT or SIGTERM exits 130 or 143 (a node that exits so was
// stopped, not failed: it is not restarted either).
inline constexpr int kJobSucceeded = exit_code::ok;
inline constexpr int kJobFailed = exit_code::failed;
inline constexpr int kJobTimedOut = exit_code::timed_out;
inline constexpr int kJobKilled = exit_code::interrupted;  // a second signal

// Runs the job to its end and returns its exit code; every child is reaped before it
// returns. Leaves SIGCHLD, SIGINT, SIGTERM and SIGHUP blocked and SIGPIPE ignored
// (meant to be the last thing the process does).
int run_local_job(const LaunchPlan& plan);

// The command line of node `node_id` (argv[0] is the node binary): dseek-node's, or
// plan.node_args and the node's place. No secret is ever on it: secrets travel in the
// environment.
std::vector<std::string> node_command_line(const LaunchPlan& plan, int node_id);

}  // namespace dseek::tool::launch
