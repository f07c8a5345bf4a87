// `dseek bench allreduce`: all-reduce bandwidth of dseek's data plane (the UCX
// communicator) between N processes on this host, one JSON line per size, in the
// format of the peers in bench/peers/ so bench/allreduce_vs_mpi.sh can set them side by side.
//
//   dseek bench allreduce --ranks N --bytes B[,B2,...] [--iters K] [--warmup W]
//                         [--dtype f32|bf16] [--timeout S] [--bind core|none]
//   dseek bench allreduce --memcpy-bytes B [--iters K]      one-thread memcpy, the ceiling
//
// Sizes take K, M, G suffixes (powers of 1024). The command re-executes this binary N
// times in a hidden worker mode (--worker-rank R): rank 0 binds a TcpBootstrap on a free
// port of 127.0.0.1 and reports the port through a pipe, then the other ranks join it.
// The parent waits for all of them, and kills them all when one fails or --timeout passes.
//
// --bind core (the default) pins each rank's thread to its own core when there are at
// least as many cores as ranks, as mpirun does for its ranks (--bind-to core up to 2
// processes): unpinned, the scheduler keeps two ranks that wake each other on one core
// for a whole run now and then (they almost never migrate), which made the time of a run
// bimodal. Pinned after the communicator is built, so its choices (which count the
// cores the process may use) are the same on every rank.
//
// Timing (the same in every peer): a sum all-reduce in place, `warmup` untimed calls per
// size, then `iters` calls each after a barrier; a call's time is the slowest rank's (one
// max all-reduce of the times at the end); we report the median.
//   algbw = bytes / time,  busbw = algbw * 2(N-1)/N   (the nccl-tests definitions)
#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/bootstrap/tcp_bootstrap.hpp"
#include "comm/communicator.hpp"
#include "comm/ucx/ucx_communicator.hpp"
#include "dseek/commands.hpp"
#include "runtime/util/json_line.hpp"

namespace dseek::tool {

const char* const kBenchAllreduceUsage =
    "usage: dseek bench allreduce --ranks N --bytes B[,B2,...] [--iters K] [--warmup W] "
    "[--dtype f32|bf16] [--timeout S] [--bind core|none]\n"
    "       dseek bench allreduce --memcpy-bytes B [--iters K]\n"
    "sizes take K, M, G suffixes (KiB, MiB, GiB)\n";

namespace {

const std::vector<std::string> kOptions = {"--ranks", "--bytes", "--iters", "--warmup", "--dtype",
                                           "--timeout", "--memcpy-bytes", "--bind", "--help"};

using Clock = std::chrono::steady_clock;

struct Options {
  int ranks = 0;
  std::vector<size_t> sizes;
  int iters = 20;
  int warmup = 5;
  std::string dtype = "f32";
  int timeout_s = 300;
  size_t memcpy_bytes = 0;
  std::string bind = "core";
  // Worker mode (hidden): set by the parent.
  int worker_rank = -1;
  int worker_port = 0;
  int worker_port_fd = -1;
};

size_t parse_size(const std::string& text) {
  if (text.empty() || text[0] < '0' || text[0] > '9')
    throw cli::UsageError("bad size '" + text + "' (a number with K, M or G)");
  size_t used = 0;
  const unsigned long long value = std::stoull(text, &used);
  std::string suffix = text.substr(used);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (!suffix.empty() && (suffix.back() == 'i')) suffix.pop_back();
  size_t scale = 1;
  if (suffix == "K" || suffix == "k") scale = size_t{1} << 10;
  else if (suffix == "M" || suffix == "m") scale = size_t{1} << 20;
  else if (suffix == "G" || suffix == "g") scale = size_t{1} << 30;
  else if (!suffix.empty()) throw cli::UsageError("bad size '" + text + "' (a number with K, M or G)");
  return static_cast<size_t>(value) * scale;
}

std::vector<size_t> parse_sizes(const std::string& list) {
  std::vector<size_t> sizes;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (comma > start) sizes.push_back(parse_size(list.substr(start, comma - start)));
    start = comma + 1;
  }
  return sizes;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// --- worker: one rank --------------------------------------------------------------

// Pins the calling thread to the rank-th core this process may use, when there is one
// core per rank (see --bind above).
void bind_to_core(int rank, int ranks) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < ranks) return;
  int seen = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed) || seen++ != rank) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0)
      throw std::runtime_error(std::string("sched_setaffinity: ") + std::strerror(errno));
    return;
  }
}

int run_worker(const Options& o) {
  using namespace dseek::comm;
  // Die with the parent: an orphaned rank would wait for its peers until op_timeout.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  TcpBootstrap bootstrap("127.0.0.1", o.worker_port, o.worker_rank, o.ranks);
  if (o.worker_rank == 0) {
    const std::string port = std::to_string(bootstrap.port()) + "\n";
    if (write(o.worker_port_fd, port.data(), port.size()) != static_cast<ssize_t>(port.size()))
      throw std::runtime_error("cannot report the bootstrap port to the parent");
    close(o.worker_port_fd);
  }
  CommOptions options;
  options.op_timeout = std::chrono::seconds(std::max(10, o.timeout_s));
  auto comm = connect_ucx(bootstrap, "localhost", options);
  if (o.bind == "core") bind_to_core(o.worker_rank, o.ranks);
  const DataType type = o.dtype == "bf16" ? DataType::bf16 : DataType::f32;
  const size_t element = element_size(type);
  for (size_t bytes : o.sizes) {
    const size_t count = std::max<size_t>(1, bytes / element);
    // Written here, so its pages are mapped before the timing. Growth to inf after many
    // sums costs nothing (only denormals are slow) and zero would be a suspicious input.
    std::vector<uint8_t> buffer(count * element);
    if (type == DataType::f32) std::fill_n(reinterpret_cast<float*>(buffer.data()), count, 1.0f);
    else std::fill_n(reinterpret_cast<uint16_t*>(buffer.data()), count, uint16_t{0x3F80});  // bf16 1.0
    for (int i = 0; i < o.warmup; ++i) comm->all_reduce(buffer.data(), count, type, ReduceOp::sum).wait();
    std::vector<float> seconds(static_cast<size_t>(o.iters));
    for (auto& t : seconds) {
      comm->barrier().wait();
      const auto t0 = Clock::now();
      comm->all_reduce(buffer.data(), count, type, ReduceOp::sum).wait();
      t = std::chrono::duration<float>(Clock::now() - t0).count();
    }
    comm->all_reduce(seconds.data(), seconds.size(), DataType::f32, ReduceOp::max).wait();
    if (o.worker_rank != 0) continue;
    const double time = median(std::vector<double>(seconds.begin(), seconds.end()));
    const double real_bytes = static_cast<double>(count * element);
    const double algbw = real_bytes / time / 1e9;
    util::JsonLine line;
    line.add("bench", "allreduce").add("impl", "dseek").add("ranks", o.ranks)
        .add("bytes", static_cast<uint64_t>(count * element)).add("dtype", o.dtype)
        .add("iters", o.iters).add("time_us_median", time * 1e6).add("algbw_gbps", algbw)
        .add("busbw_gbps", algbw * 2.0 * (o.ranks - 1) / o.ranks);
    std::printf("%s\n", line.str().c_str());
    std::fflush(stdout);
  }
  comm->barrier().wait();  // nobody closes its endpoints while a peer still reduces
  return 0;
}

// --- memcpy: the one-core copy ceiling ------------------------------------------------

int run_memcpy(const Options& o) {
  std::vector<char> src(o.memcpy_bytes, 1), dst(o.memcpy_bytes, 0);
  std::vector<double> seconds;
  for (int i = 0; i < 2 + o.iters; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), src.size());
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();
    if (i >= 2) seconds.push_back(t);
    src[static_cast<size_t>(i) % src.size()] = static_cast<char>(dst[0] + i);  // keep the copies live
  }
  const double time = median(seconds);
  util::JsonLine line;
  line.add("bench", "memcpy").add("bytes", static_cast<uint64_t>(o.memcpy_bytes)).add("iters", o.iters)
      .add("time_us_median", time * 1e6).add("gbps", static_cast<double>(o.memcpy_bytes) / time / 1e9);
  std::printf("%s\n", line.str().c_str());
  return 0;
}

// --- parent: start N workers and wait ---------------------------------------------

std::string self_path() {
  std::vector<char> path(4096);
  const ssize_t n = readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0) throw std::runtime_error("cannot find this executable (/proc/self/exe)");
  return std::string(path.data(), static_cast<size_t>(n));
}

pid_t spawn_worker(const std::string& exe, const Options& o, int rank, int port, int port_fd) {
  std::string sizes;
  for (size_t s : o.sizes) {
    if (!sizes.empty()) sizes += ',';
    sizes += std::to_string(s);
  }
  std::vector<std::string> argv{exe, "bench", "allreduce", "--ranks", std::to_string(o.ranks), "--bytes", sizes,
                                "--iters", std::to_string(o.iters), "--warmup", std::to_string(o.warmup),
                                "--dtype", o.dtype, "--timeout", std::to_string(o.timeout_s), "--bind", o.bind,
                                "--worker-rank", std::to_string(rank), "--worker-port", std::to_string(port)};
  if (port_fd >= 0) argv.insert(argv.end(), {"--worker-port-fd", std::to_string(port_fd)});
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    execv(exe.c_str(), cargv.data());
    std::fprintf(stderr, "dseek bench allreduce: exec %s: %s\n", exe.c_str(), std::strerror(errno));
    _exit(127);
  }
  return pid;
}

void kill_all(std::vector<pid_t>& pids) {
  for (pid_t p : pids)
    if (p > 0) kill(p, SIGKILL);
  for (pid_t& p : pids)
    if (p > 0) {
      waitpid(p, nullptr, 0);
      p = -1;
    }
}

// Rank 0's bootstrap port, read from the pipe; -1 if rank 0 died or took too long.
int read_port(int fd, Clock::time_point deadline) {
  std::string text;
  char buf[32];
  while (text.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return -1;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000))) <= 0) continue;
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return -1;  // EOF: rank 0 exited before it had a port
    text.append(buf, static_cast<size_t>(n));
  }
  return std::stoi(text);
}

int run_parent(const Options& o) {
  const std::string exe = self_path();
  const auto deadline = Clock::now() + std::chrono::seconds(o.timeout_s);
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  fcntl(fds[0], F_SETFD, FD_CLOEXEC);  // only rank 0 keeps the write end
  std::vector<pid_t> pids(static_cast<size_t>(o.ranks), -1);
  pids[0] = spawn_worker(exe, o, 0, 0, fds[1]);
  close(fds[1]);
  const int port = read_port(fds[0], std::min(deadline, Clock::now() + std::chrono::seconds(60)));
  close(fds[0]);
  if (port <= 0) {
    kill_all(pids);
    std::fprintf(stderr, "dseek bench allreduce: rank 0 did not report its bootstrap port\n");
    return 1;
  }
  for (int r = 1; r < o.ranks; ++r) pids[static_cast<size_t>(r)] = spawn_worker(exe, o, r, port, -1);

  int running = o.ranks;
  while (running > 0) {
    for (size_t r = 0; r < pids.size(); ++r) {
      if (pids[r] <= 0) continue;
      int status = 0;
      const pid_t done = waitpid(pids[r], &status, WNOHANG);
      if (done == 0) continue;
      pids[r] = -1;
      --running;
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        kill_all(pids);  // the others would wait for the dead rank until op_timeout
        std::fprintf(stderr, "dseek bench allreduce: rank %zu failed (%s %d)\n", r,
                     WIFEXITED(status) ? "exit status" : "signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return 1;
      }
    }
    if (running > 0 && Clock::now() > deadline) {
      kill_all(pids);
      std::fprintf(stderr, "dseek bench allreduce: timed out after %d s (--timeout), ranks killed\n", o.timeout_s);
      return 1;
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

}  // namespace

int cmd_bench_allreduce(const Args& args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    std::string value;
    auto number = [&](int& out) {
      try {
        size_t used = 0;
        out = std::stoi(value, &used);
        if (used != value.size()) throw std::invalid_argument(value);
      } catch (const std::logic_error&) {
        throw cli::UsageError(arg + " needs a number, not '" + value + "'");
      }
    };
    if (cli::take_value(args, i, "--ranks", value)) number(o.ranks);
    else if (cli::take_value(args, i, "--bytes", value)) o.sizes = parse_sizes(value);
    else if (cli::take_value(args, i, "--iters", value)) number(o.iters);
    else if (cli::take_value(args, i, "--warmup", value)) number(o.warmup);
    else if (cli::take_value(args, i, "--dtype", value)) o.dtype = value;
    else if (cli::take_value(args, i, "--timeout", value)) number(o.timeout_s);
    else if (cli::take_value(args, i, "--memcpy-bytes", value)) o.memcpy_bytes = parse_size(value);
    else if (cli::take_value(args, i, "--bind", value)) o.bind = value;
    // Worker mode (hidden): set by the parent.
    else if (cli::take_value(args, i, "--worker-rank", value)) number(o.worker_rank);
    else if (cli::take_value(args, i, "--worker-port", value)) number(o.worker_port);
    else if (cli::take_value(args, i, "--worker-port-fd", value)) number(o.worker_port_fd);
    else cli::unknown("option", arg, kOptions);
  }
  if (o.iters < 1 || o.warmup < 0 || o.timeout_s < 1)
    throw cli::UsageError("--iters must be >= 1, --warmup >= 0, --timeout >= 1");
  if (o.memcpy_bytes > 0) return run_memcpy(o);
  if (o.ranks < 1 || o.sizes.empty())
    throw cli::UsageError("--ranks N (>= 1) and --bytes are required");
  if (o.bind != "core" && o.bind != "none")
    throw cli::UsageError("--bind must be core or none, not '" + o.bind + "'");
  if (o.dtype != "f32" && o.dtype != "bf16")
    throw cli::UsageError("--dtype must be f32 or bf16, not '" + o.dtype + "'");
  if (o.worker_rank >= 0) {
    try {
      return run_worker(o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dseek bench allreduce: rank %d: %s\n", o.worker_rank, e.what());
      return 1;
    }
  }
  return run_parent(o);
}

}  // namespace dseek::tool
