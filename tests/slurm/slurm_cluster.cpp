// Implementation of slurm_cluster.hpp.
#include "slurm_cluster.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "support/node_runs.hpp"
#include "support/process.hpp"

namespace dseek::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

std::string tail_of(const fs::path& file, size_t lines) {
  const auto all = read_lines(file);
  std::string out = "--- " + file.filename().string() + "\n";
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i)
    out += all[i] + "\n";
  return out;
}

// Stops a daemon by its pid: SIGTERM, then SIGKILL when it did not exit in 10 s.
void stop(dseek::test::SpawnedProcess& daemon) {
  if (!daemon.running()) return;
  ::kill(daemon.pid(), SIGTERM);
  if (!daemon.wait_for(10s)) daemon.kill();
}

bool wait_until(const std::function<bool()>& ready, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

}  // namespace

bool can_run_slurm() { return ::geteuid() == 0; }

void skip_unless_root() {
  if (can_run_slurm()) return;
  std::printf("SKIPPED: the Slurm tests start munged, slurmctld and slurmd, which needs root "
              "(euid %u)\n", static_cast<unsigned>(::geteuid()));
  std::fflush(stdout);
  std::exit(77);
}

int free_port_between(int lo, int hi) {
  std::mt19937 random(static_cast<unsigned>(::getpid()) ^
                      static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uniform_int_distribution<int> pick(lo, hi);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = pick(random);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    if (free) return port;
  }
  FAIL("no free port in " << lo << ".." << hi);
  return 0;
}

fs::path write_minimal_slurm_conf(const fs::path& dir) {
  const auto conf = dir / "minimal-slurm.conf";
  std::ofstream(conf) << "ClusterName=dseektest\nSlurmctldHost=localhost\nNodeName=localhost\n";
  return conf;
}

SlurmCluster::SlurmCluster(int first_job_id) : dir_("slurm") {
  const fs::path base = dir_.path();
  fs::permissions(base, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  const passwd* munge = ::getpwnam("munge");
  REQUIRE(munge != nullptr);  // Debian's munge package makes the user
  // munged refuses a socket directory others cannot enter, and its key must be its own.
  const fs::path munge_dir = base / "munge";
  fs::create_directories(munge_dir);
  {
    std::ifstream random("/dev/urandom", std::ios::binary);
    std::string key(1024, '\0');
    random.read(key.data(), static_cast<std::streamsize>(key.size()));
    std::ofstream(munge_dir / "munge.key", std::ios::binary) << key;
  }
  fs::permissions(munge_dir / "munge.key", fs::perms::owner_read | fs::perms::owner_write);
  REQUIRE(::chown(munge_dir.c_str(), munge->pw_uid, munge->pw_gid) == 0);
  REQUIRE(::chown((munge_dir / "munge.key").c_str(), munge->pw_uid, munge->pw_gid) == 0);
  fs::permissions(munge_dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  const fs::path socket = munge_dir / "munge.socket";
  munged_ = dseek::test::SpawnedProcess::start(
      {"setpriv", "--reuid=munge", "--regid=munge", "--init-groups", "munged", "--foreground",
       "--socket=" + socket.string(), "--key-file=" + (munge_dir / "munge.key").string(),
       "--pid-file=" + (munge_dir / "munged.pid").string(),
       "--log-file=" + (munge_dir / "munged.log").string(),
       "--seed-file=" + (munge_dir / "munged.seed").string()},
      (base / "munged.out").string());
  INFO(tail_of(base / "munged.out", 20) << tail_of(munge_dir / "munged.log", 20));
  REQUIRE(wait_until([&] { return fs::exists(socket); }, 10s));

  const int controller_port = free_port_between(40000, 44999);
  const int node_port = free_port_between(45000, 49999);
  conf_ = base / "slurm.conf";
  fs::create_directories(base / "state");
  fs::create_directories(base / "spool");
  // slurmctld runs only on the host its SlurmctldHost names: this machine's short name,
  // reached at 127.0.0.1. The node is "localhost" (slurmd -N).
  char host[256] = {};
  REQUIRE(::gethostname(host, sizeof host - 1) == 0);
  std::string controller(host);
  controller = controller.substr(0, controller.find('.'));
  std::ofstream(conf_) << "ClusterName=dseektest\n"
                       << "SlurmctldHost=" << controller << "(127.0.0.1)\n"
                       << "SlurmctldPort=" << controller_port << "\n"
                       << "SlurmdPort=" << node_port << "\n"
                       << "AuthType=auth/munge\nCredType=cred/munge\n"
                       << "AuthInfo=socket=" << socket.string() << "\n"
                       << "SlurmUser=root\nSlurmdUser=root\n"
                       << "StateSaveLocation=" << (base / "state").string() << "\n"
                       << "SlurmdSpoolDir=" << (base / "spool").string() << "\n"
                       << "SlurmctldPidFile=" << (base / "slurmctld.pid").string() << "\n"
                       << "SlurmdPidFile=" << (base / "slurmd.pid").string() << "\n"
                       << "SlurmctldLogFile=" << (base / "slurmctld.log").string() << "\n"
                       << "SlurmdLogFile=" << (base / "slurmd.log").string() << "\n"
                       << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
                       << "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
                       << "MpiDefault=none\nReturnToService=2\nJobRequeue=1\n"
                       << "FirstJobId=" << first_job_id << "\n"
                       << "JobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\n"
                       << "JobAcctGatherType=jobacct_gather/none\n"
                       << "CommunicationParameters=NoInAddrAny\n"
                       << "SlurmctldTimeout=30\nSlurmdTimeout=30\nKillWait=5\n"
                       << "NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN\n"
                       << "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE "
                          "State=UP\n";
  slurmctld_ = dseek::test::SpawnedProcess::start(
      {"slurmctld", "-D", "-i", "-f", conf_.string()}, (base / "slurmctld.out").string());
  slurmd_ = dseek::test::SpawnedProcess::start(
      {"slurmd", "-D", "-N", "localhost", "-f", conf_.string()}, (base / "slurmd.out").string());
  const auto env = client_env();
  const bool up = wait_until(
      [&] {
        if (!slurmctld_.running() || !slurmd_.running()) return false;
        const auto state = run_process({"sinfo", "-h", "-o", "%T"}, 10s, env);
        return state.exit_code == 0 && state.output.find("idle") != std::string::npos;
      },
      40s);
  INFO(logs());
  REQUIRE(slurmctld_.running());
  REQUIRE(slurmd_.running());
  REQUIRE(up);
}

SlurmCluster::~SlurmCluster() {
  // What a failed test left running goes first, while the daemons can still end it.
  if (slurmctld_.running()) {
    run_process({"scancel", "--full", "--user=root"}, 10s, client_env());
    wait_until_idle(15s);
  }
  stop(slurmd_);
  stop(slurmctld_);
  stop(munged_);
}

std::vector<std::string> SlurmCluster::client_env() const {
  return {"SLURM_CONF=" + conf_.string()};
}

std::string SlurmCluster::logs() const {
  const fs::path base = dir_.path();
  return tail_of(base / "slurmctld.log", 15) + tail_of(base / "slurmctld.out", 5) +
         tail_of(base / "slurmd.log", 15) + tail_of(base / "slurmd.out", 5) +
         tail_of(base / "munge" / "munged.log", 5);
}

bool SlurmCluster::wait_until_idle(std::chrono::milliseconds timeout) const {
  const auto env = client_env();
  // Every state, then only final ones: squeue's default list leaves out a job being
  // requeued (REQUEUED), which would look like no job at all.
  static const std::set<std::string> kFinal = {"COMPLETED", "FAILED",   "CANCELLED",
                                               "TIMEOUT",   "NODE_FAIL", "OUT_OF_MEMORY",
                                               "BOOT_FAIL", "DEADLINE", "PREEMPTED"};
  return wait_until(
      [&] {
        const auto jobs = run_process({"squeue", "-h", "--states=all", "-o", "%T"}, 10s, env);
        if (jobs.exit_code != 0) return false;
        std::istringstream states(jobs.output);
        for (std::string state; states >> state;)
          if (kFinal.count(state) == 0) return false;
        return true;
      },
      timeout);
}

}  // namespace dseek::testing
