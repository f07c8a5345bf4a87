// A real one-node Slurm cluster for a test: munged, slurmctld and slurmd of Debian's
// munge and slurm-wlm, run as root in the foreground (each its own process group) with
// every file in a scratch directory and every port on loopback picked free. The node is
// "localhost" (NodeAddr 127.0.0.1, CPUs=2), so a job's SLURM_JOB_NODELIST is
// "localhost". The destructor cancels what still runs and stops the three daemons by
// their pids (SIGTERM, then SIGKILL after 10 s), also when the test failed.
//
// Settings found to work on these machines (shared/notes/platform.md):
// ProctrackType=proctrack/linuxproc, TaskPlugin=task/none, SlurmUser=root, munged as the
// munge user with its socket in a directory it owns (0711: slurm must reach the socket).
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "spawned_process.hpp"
#include "support/test_paths.hpp"

namespace dseek::testing {

// Whether this process can run the daemons (it is root); the tests skip otherwise.
bool can_run_slurm();
// Exits 77 (ctest's SKIP_RETURN_CODE) after saying why, when can_run_slurm() is false.
void skip_unless_root();

class SlurmCluster {
 public:
  // `first_job_id`: the id of the first job (Slurm's FirstJobId).
  explicit SlurmCluster(int first_job_id = 1);
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  // The variables a Slurm client (srun, sbatch, squeue) needs: SLURM_CONF.
  std::vector<std::string> client_env() const;
  const std::filesystem::path& dir() const { return dir_.path(); }
  // The daemons' logs' last lines, for a failing test's message.
  std::string logs() const;
  // Waits until every job ended (true), or `timeout` passed.
  bool wait_until_idle(std::chrono::milliseconds timeout) const;

 private:
  ScratchDir dir_;
  std::filesystem::path conf_;
  dseek::test::SpawnedProcess munged_, slurmctld_, slurmd_;
};

// Writes a slurm.conf with only what `scontrol show hostnames` needs into `dir`; returns
// its path (for the host list comparison, which needs no daemon).
std::filesystem::path write_minimal_slurm_conf(const std::filesystem::path& dir);

// A port in [lo, hi] that was free on 127.0.0.1 a moment ago.
int free_port_between(int lo, int hi);

}  // namespace dseek::testing
