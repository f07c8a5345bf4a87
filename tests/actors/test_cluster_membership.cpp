// The cluster membership control plane with real processes on loopback: a
// coordinator and members (dseek_cluster_test_node) join, are killed, come
// back, hang, or bring the wrong secret; the test reads the JSON events each
// process writes and checks membership, epochs and detection latencies.
//
// The coordinator process is not a member: a coordinator and 3 members make
// a world of 3 (coordinator.hpp).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "actors/cluster/cluster_settings.hpp"
#include "spawned_process.hpp"

namespace {

using namespace std::chrono_literals;
using dseek::test::SpawnedProcess;
namespace fs = std::filesystem;

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One JSON line of a node's events file (flat object; see cluster_node_main.cpp).
struct event {
  std::string line;

  std::optional<std::string> raw(const std::string& key) const {
    auto k = "\"" + key + "\":";
    auto pos = line.find(k);
    if (pos == std::string::npos)
      return std::nullopt;
    pos += k.size();
    if (pos < line.size() && line[pos] == '"') {
      std::string out;
      for (auto i = pos + 1; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size())
          ++i;
        out += line[i];
      }
      return out;
    }
    auto end = line.find_first_of(",}", pos);
    return line.substr(pos, end - pos);
  }
  std::string str(const std::string& key) const { return raw(key).value_or(""); }
  std::int64_t num(const std::string& key) const {
    auto v = raw(key);
    return v ? std::stoll(*v) : -1;
  }
  std::string kind() const { return str("event"); }
};

std::vector<event> read_events(const fs::path& file) {
  std::vector<event> out;
  std::ifstream in{file};
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line.back() == '}') // skip a line still being written
      out.push_back(event{line});
  return out;
}

std::optional<event> wait_event(const fs::path& file, const std::function<bool(const event&)>& pred,
                                std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (auto& e : read_events(file))
      if (pred(e))
        return e;
    if (std::chrono::steady_clock::now() >= deadline)
      return std::nullopt;
    std::this_thread::sleep_for(10ms);
  }
}

std::optional<event> last_of(const fs::path& file, const std::string& kind) {
  std::optional<event> out;
  for (auto& e : read_events(file))
    if (e.kind() == kind)
      out = e;
  return out;
}

std::string slurp(const fs::path& file) {
  std::ifstream in{file};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct cluster_fixture {
  fs::path dir;
  std::uint16_t port = 0;
  SpawnedProcess coordinator;
  std::map<std::int64_t, SpawnedProcess> members;
  int generation = 0; // distinct file names for restarted nodes

  cluster_fixture() {
    std::string tmpl = (fs::temp_directory_path() / "dseek-cluster-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    dir = tmpl;
  }

  ~cluster_fixture() {
    coordinator.kill();
    for (auto& [id, p] : members)
      p.kill();
    if (std::getenv("DSEEK_KEEP_TEST_DIRS") == nullptr) {
      std::error_code ec;
      fs::remove_all(dir, ec);
    } else {
      std::printf("[cluster test] kept %s\n", dir.c_str());
    }
  }

  fs::path coord_events() const { return dir / "coordinator.jsonl"; }

  // Everything the processes wrote, for failure messages.
  std::string logs() const {
    std::string out;
    for (auto& f : fs::directory_iterator(dir))
      out += "== " + f.path().filename().string() + "\n" + slurp(f.path());
    return out;
  }

  std::vector<std::string> common_args() const {
    return {"--host", "127.0.0.1", "--run-for-seconds", "60", "--heartbeat-interval-ms", "250",
            "--heartbeat-timeout-ms", "1500"};
  }

  void start_coordinator() {
    std::vector<std::string> argv{DSEEK_CLUSTER_TEST_NODE, "--role", "coordinator", "--port",
                                  "0", "--events", coord_events().string()};
    for (auto& a : common_args())
      argv.push_back(a);
    coordinator = SpawnedProcess::start(argv, (dir / "coordinator.log").string(),
                                        {"DSEEK_CLUSTER_SECRET=test-secret-42"});
    auto listening = wait_event(coord_events(), [](const event& e) {
      return e.kind() == "listening";
    }, 10s);
    INFO(logs());
    REQUIRE(listening);
    port = static_cast<std::uint16_t>(listening->num("port"));
    REQUIRE(port != 0);
  }

  // Starts member `id`; returns its events file. secret: empty = the good one
  // through the environment.
  // `slot`: the key in `members` (default `id`; another one runs a second process with
  // the same node id).
  // `extra`: more arguments of dseek_cluster_test_node.
  fs::path start_member(std::int64_t id, const std::string& secret = "", std::int64_t slot = -1,
                        const std::vector<std::string>& extra = {}) {
    auto tag = "node" + std::to_string(id) + "." + std::to_string(generation++);
    auto events = dir / (tag + ".jsonl");
    std::vector<std::string> argv{DSEEK_CLUSTER_TEST_NODE, "--role", "member", "--port",
                                  std::to_string(port), "--node-id", std::to_string(id),
                                  "--events", events.string()};
    if (!secret.empty()) {
      argv.push_back("--secret");
      argv.push_back(secret);
    }
    for (auto& a : common_args())
      argv.push_back(a);
    for (auto& a : extra)
      argv.push_back(a);
    members[slot < 0 ? id : slot] = SpawnedProcess::start(argv, (dir / (tag + ".log")).string(),
                                        {"DSEEK_CLUSTER_SECRET=test-secret-42"});
    return events;
  }
};

bool is_epoch(const event& e, std::int64_t world, std::int64_t after_epoch) {
  return e.kind() == "epoch_started" && e.num("world_size") == world
         && e.num("epoch") > after_epoch;
}

} // namespace

TEST_CASE("cluster auth: HMAC proof and host:port parsing", "[actors][cluster]") {
  using namespace dseek::actors;
  auto nonce = make_nonce();
  CHECK(nonce.size() == 64);
  CHECK(make_nonce() != nonce);
  auto mac = join_mac("s3cret", nonce, 7);
  CHECK(mac.size() == 64);
  CHECK(verify_join_mac("s3cret", nonce, 7, mac));
  CHECK_FALSE(verify_join_mac("other", nonce, 7, mac));
  CHECK_FALSE(verify_join_mac("s3cret", nonce, 8, mac));
  CHECK_FALSE(verify_join_mac("s3cret", make_nonce(), 7, mac));
  CHECK_FALSE(verify_join_mac("s3cret", nonce, 7, mac.substr(1)));
  // Known answer: HMAC-SHA256(key "key", message "abc" || "7") (Python's hmac).
  CHECK(join_mac("key", "abc", 7)
        == "a2baa39c07224d93732b41e4d6ac4ec0d935ae7c3c62e31a76969203834aade0");
  auto hp = parse_host_port("10.1.2.3:7420");
  REQUIRE(hp);
  CHECK(hp->host == "10.1.2.3");
  CHECK(hp->port == 7420);
  CHECK_FALSE(parse_host_port("nohost"));
  CHECK_FALSE(parse_host_port("h:99999"));
  CHECK_FALSE(parse_host_port("h:12x"));
  ClusterSettings s;
  s.secret = "x";
  CHECK(resolve_secret(s) == std::optional<std::string>{"x"});
}

TEST_CASE("cluster: a member that cannot reach the coordinator fails naming host:port",
          "[actors][cluster]") {
  cluster_fixture fx;
  // Port 1 on loopback: nobody listens, the connection is refused at once.
  auto events = fx.dir / "lonely.jsonl";
  auto p = SpawnedProcess::start({DSEEK_CLUSTER_TEST_NODE, "--role", "member", "--port", "1",
                                  "--node-id", "5", "--join-retries", "2", "--events",
                                  events.string(), "--secret", "x"},
                                 (fx.dir / "lonely.log").string());
  auto code = p.wait_for(15s);
  INFO(fx.logs());
  REQUIRE(code);
  CHECK(*code == 3);
  auto failed = last_of(events, "agent");
  REQUIRE(failed);
  CHECK(failed->str("kind") == "join_failed");
  CHECK(failed->str("reason").find("127.0.0.1:1") != std::string::npos);
}

TEST_CASE("cluster: join, kill -9, rejoin, SIGSTOP, wrong secret", "[actors][cluster]") {
  cluster_fixture fx;
  auto started = std::chrono::steady_clock::now();
  fx.start_coordinator();

  // -- all 3 join: a world of 3 -------------------------------------------------
  std::map<std::int64_t, fs::path> ev;
  for (std::int64_t id : {1, 2, 3})
    ev[id] = fx.start_member(id);
  auto world3 = wait_event(fx.coord_events(), [](const event& e) { return is_epoch(e, 3, 0); },
                           15s);
  {
    INFO(fx.logs());
    REQUIRE(world3);
    CHECK(world3->str("members") == "1,2,3");
    for (std::int64_t id : {1, 2, 3})
      REQUIRE(wait_event(ev[id], [](const event& e) { return is_epoch(e, 3, 0); }, 5s));
  }
  auto e3 = world3->num("epoch");

  // -- kill -9 node 2: the others see node_lost and a new epoch within 1 s ------
  auto t_kill = wall_ms();
  fx.members[2].signal(SIGKILL);
  for (std::int64_t id : {1, 3}) {
    auto lost = wait_event(ev[id], [](const event& e) {
      return e.kind() == "node_lost" && e.num("lost_node") == 2;
    }, 5s);
    auto epoch = wait_event(ev[id], [e3](const event& e) { return is_epoch(e, 2, e3); }, 5s);
    INFO(fx.logs());
    REQUIRE(lost);
    REQUIRE(epoch);
    CHECK(lost->str("reason").find("down") != std::string::npos);
    auto latency = epoch->num("t_ms") - t_kill;
    std::printf("[cluster test] kill -9 of node 2 -> node %lld saw node_lost after %lld ms, "
                "epoch %lld after %lld ms\n",
                static_cast<long long>(id), static_cast<long long>(lost->num("t_ms") - t_kill),
                static_cast<long long>(epoch->num("epoch")), static_cast<long long>(latency));
    CHECK(latency < 10000);  // from the connection ("down"), not a 30 s collective timeout
  }
  fx.members[2].kill();
  auto e4 = last_of(fx.coord_events(), "epoch_started")->num("epoch");

  // -- node 2 comes back with the same id: it rejoins in a later epoch ----------
  ev[2] = fx.start_member(2);
  {
    auto rejoined = wait_event(fx.coord_events(), [e4](const event& e) {
      return e.kind() == "node_joined" && e.num("node_id") == 2 && e.num("epoch") > e4;
    }, 15s);
    INFO(fx.logs());
    REQUIRE(rejoined);
    CHECK(rejoined->str("rejoined") == "true");
    auto epoch = wait_event(ev[2], [e4](const event& e) { return is_epoch(e, 3, e4); }, 5s);
    REQUIRE(epoch);
    CHECK(epoch->str("members") == "1,2,3");
  }
  auto e5 = last_of(fx.coord_events(), "epoch_started")->num("epoch");

  // -- SIGSTOP node 3: missed heartbeats, detected within 3 s -------------------
  auto t_stop = wall_ms();
  fx.members[3].signal(SIGSTOP);
  {
    auto lost = wait_event(fx.coord_events(), [e5](const event& e) {
      return e.kind() == "node_lost" && e.num("lost_node") == 3 && e.num("epoch") > e5;
    }, 8s);
    INFO(fx.logs());
    REQUIRE(lost);
    CHECK(lost->str("reason").find("heartbeat") != std::string::npos);
    auto latency = lost->num("t_ms") - t_stop;
    std::printf("[cluster test] SIGSTOP of node 3 -> coordinator declared it lost after %lld ms "
                "(%lld ms after its last heartbeat)\n",
                static_cast<long long>(latency), static_cast<long long>(lost->num("detection_ms")));
    CHECK(latency < 10000);  // the heartbeat timeout (above), not a collective's 30 s
    auto at1 = wait_event(ev[1], [](const event& e) {
      return e.kind() == "node_lost" && e.num("lost_node") == 3;
    }, 2s);
    REQUIRE(at1);
    REQUIRE(wait_event(ev[1], [e5](const event& e) { return is_epoch(e, 2, e5); }, 2s));
  }
  auto e6 = last_of(fx.coord_events(), "epoch_started")->num("epoch");

  // -- SIGCONT: the stale node learns it was evicted and rejoins later ----------
  fx.members[3].signal(SIGCONT);
  {
    auto back = wait_event(fx.coord_events(), [e6](const event& e) {
      return e.kind() == "node_joined" && e.num("node_id") == 3 && e.num("epoch") > e6;
    }, 8s);
    INFO(fx.logs());
    REQUIRE(back);
    CHECK(back->str("rejoined") == "true");
    auto evicted = wait_event(ev[3], [](const event& e) {
      return e.kind() == "agent" && e.str("kind") == "evicted";
    }, 2s);
    CHECK(evicted);
    REQUIRE(wait_event(fx.coord_events(), [e6](const event& e) { return is_epoch(e, 3, e6); },
                       2s));
  }
  auto epoch_before = last_of(fx.coord_events(), "epoch_started")->num("epoch");
  auto epoch_before_1 = wait_event(ev[1], [epoch_before](const event& e) {
    return e.kind() == "epoch_started" && e.num("epoch") == epoch_before;
  }, 2s);
  REQUIRE(epoch_before_1);

  // -- a member with the wrong secret: refused; the job is not disturbed --------
  auto bad = fx.start_member(4, "not-the-secret");
  {
    auto code = fx.members[4].wait_for(15s);
    INFO(fx.logs());
    REQUIRE(code);
    CHECK(*code == 2);
    auto refused = last_of(bad, "join_refused");
    REQUIRE(refused);
    CHECK(refused->str("reason").find("auth_failed") != std::string::npos);
    // The mutual challenge: the coordinator's proof over this node's nonce does not
    // verify with the node's (wrong) secret, so the node stops before it proves anything
    // (the coordinator's own refusal of a wrong MAC: the stranger test below).
    CHECK(refused->str("reason").find("did not prove the cluster secret") != std::string::npos);
    // The secret itself appears nowhere in the refused node's output.
    CHECK(slurp(bad).find("not-the-secret") == std::string::npos);
  }
  std::this_thread::sleep_for(600ms); // > 2 heartbeat intervals: nobody was disturbed
  {
    INFO(fx.logs());
    CHECK(last_of(fx.coord_events(), "epoch_started")->num("epoch") == epoch_before);
    for (std::int64_t id : {1, 2, 3}) {
      CHECK(last_of(ev[id], "epoch_started")->num("epoch") == epoch_before);
      CHECK(fx.members[id].running());
      CHECK_FALSE(last_of(ev[id], "join_refused"));
    }
    CHECK(fx.coordinator.running());
  }
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  std::printf("[cluster test] scenario took %lld ms\n", static_cast<long long>(took.count()));
}

namespace {

// A coordinator and members 1 and 2 (their event files in `ev`), once their world of two
// formed; returns the coordinator's epoch then.
std::int64_t start_world_of_two(cluster_fixture& fx, std::map<std::int64_t, fs::path>& ev) {
  fx.start_coordinator();
  for (std::int64_t id : {1, 2}) ev[id] = fx.start_member(id);
  auto world2 = wait_event(fx.coord_events(), [](const event& e) { return is_epoch(e, 2, 0); },
                           15s);
  INFO(fx.logs());
  REQUIRE(world2);
  return last_of(fx.coord_events(), "epoch_started")->num("epoch");
}

}  // namespace

// Issue 28, finding 3: a second process with a node id a live member holds (with the
// right secret) evicted the holder, which rejoined at once and evicted it in turn:
// hundreds of epochs and no step. It is refused while the holder lives and joins once
// the holder is gone.
TEST_CASE("cluster: a second node with a held id is refused, not a replacement, until the "
          "holder is gone",
          "[actors][cluster]") {
  cluster_fixture fx;
  std::map<std::int64_t, fs::path> ev;
  const auto settled = start_world_of_two(fx, ev);

  const std::int64_t duplicate_slot = 101;
  auto dup = fx.start_member(1, "", duplicate_slot);
  {
    auto refused = wait_event(fx.coord_events(), [](const event& e) {
      return e.kind() == "join_refused" && e.num("node_id") == 1;
    }, 15s);
    INFO(fx.logs());
    REQUIRE(refused);
    CHECK(refused->str("reason").find("node_id_taken") != std::string::npos);
    CHECK(refused->str("reason").find("held by a live member") != std::string::npos);
  }
  std::this_thread::sleep_for(1500ms);  // 6 heartbeat intervals, several join retries
  {
    INFO(fx.logs());
    // No epoch changed: the holder was never evicted, nobody was disturbed.
    CHECK(last_of(fx.coord_events(), "epoch_started")->num("epoch") == settled);
    for (std::int64_t id : {1, 2}) {
      CHECK(last_of(ev[id], "epoch_started")->num("epoch") == settled);
      CHECK(fx.members[id].running());
    }
    CHECK_FALSE(last_of(dup, "epoch_started"));
    CHECK(slurp(fx.dir / "coordinator.log").find("refused join of node 1") != std::string::npos);
  }

  // The holder dies: the second process is a replacement now and joins on a retry.
  fx.members[1].signal(SIGKILL);
  {
    auto joined = wait_event(fx.coord_events(), [settled](const event& e) {
      return e.kind() == "node_joined" && e.num("node_id") == 1 && e.num("epoch") > settled;
    }, 15s);
    INFO(fx.logs());
    REQUIRE(joined);
    CHECK(joined->str("rejoined") == "true");
    REQUIRE(wait_event(dup, [settled](const event& e) { return is_epoch(e, 2, settled); }, 5s));
  }
}

// Issue 28, finding 2: the coordinator answered anyone who reached its port: the member
// table, a restart of any member (a new epoch each time), a rank's data-plane address;
// and a flood of hellos from one source filled the table every real join needs.
TEST_CASE("cluster: a stranger on the coordinator's port is refused everything but a join",
          "[actors][cluster]") {
  cluster_fixture fx;
  std::map<std::int64_t, fs::path> ev;
  const auto settled = start_world_of_two(fx, ev);

  const auto probes = fx.dir / "hostile.jsonl";
  auto hostile = SpawnedProcess::start(
      {DSEEK_CLUSTER_TEST_NODE, "--role", "hostile", "--port", std::to_string(fx.port),
       "--node-id", "1", "--events", probes.string()},
      (fx.dir / "hostile.log").string(), {});
  {
    auto code = hostile.wait_for(60s);
    INFO(fx.logs());
    REQUIRE(code);
    CHECK(*code == 0);
    std::map<std::string, std::vector<std::string>> outcomes;
    for (auto& e : read_events(probes))
      if (e.kind() == "probe") outcomes[e.str("name")].push_back(e.str("outcome"));
    REQUIRE(outcomes["members"].size() == 1);
    REQUIRE(outcomes["restarted"].size() == 1);
    REQUIRE(outcomes["rendezvous"].size() == 3);
    for (const auto& name : {"members", "restarted", "rendezvous"})
      for (const auto& outcome : outcomes[name]) {
        INFO(name << ": " << outcome);
        CHECK(outcome.rfind("refused: ", 0) == 0);
        CHECK(outcome.find("not an authenticated member") != std::string::npos);
        CHECK(outcome.find("epoch") == std::string::npos);  // not even the epoch
      }
    REQUIRE(outcomes["join_wrong_mac"].size() == 1);
    CHECK(outcomes["join_wrong_mac"][0].find("auth_failed") != std::string::npos);
    REQUIRE(outcomes["hello_flood"].size() == 1);
    INFO(outcomes["hello_flood"][0]);
    CHECK(outcomes["hello_flood"][0].rfind("answered 8 of 40;", 0) == 0);
    CHECK(outcomes["hello_flood"][0].find("too many pending joins from this source") != std::string::npos);
  }
  // Nothing changed for the members, and a real node still joins after the flood.
  {
    INFO(fx.logs());
    CHECK(last_of(fx.coord_events(), "epoch_started")->num("epoch") == settled);
    for (std::int64_t id : {1, 2})
      CHECK(last_of(ev[id], "epoch_started")->num("epoch") == settled);
    CHECK(slurp(fx.dir / "coordinator.log").find("not an authenticated member") != std::string::npos);
    CHECK(slurp(fx.dir / "coordinator.log").find("refused join of node 7") != std::string::npos);
  }
  ev[3] = fx.start_member(3);
  {
    auto world3 = wait_event(fx.coord_events(), [settled](const event& e) { return is_epoch(e, 3, settled); },
                             15s);
    INFO(fx.logs());
    REQUIRE(world3);
  }
}

// Issue 28, finding 2: connections that never finish the handshake were held for ever
// (CAF's middleman waits on them), and enough of them from one address held the port.
// The handshake gate (actors/cluster/handshake_gate.hpp) closes one after 2 s and takes
// at most 8 pending from one address: 40 silent connections from loopback are all closed
// within a few seconds (32 of them at once), and two real nodes from the same address
// join meanwhile (their agents retry a refused connection).
TEST_CASE("cluster: silent connections are closed by the handshake gate and real joins go on",
          "[actors][cluster]") {
  cluster_fixture fx;
  fx.start_coordinator();
  constexpr int kSilent = 40;
  std::vector<int> silent;
  const auto opened = std::chrono::steady_clock::now();
  for (int i = 0; i < kSilent; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(fx.port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
    silent.push_back(fd);
  }
  std::map<std::int64_t, fs::path> ev;
  for (std::int64_t id : {1, 2}) ev[id] = fx.start_member(id);
  // Each silent connection ends (end of stream or a reset) without this side sending a
  // byte; when, from the opening, is noted.
  std::vector<double> closed_after_s(kSilent, -1.0);
  int open = kSilent;
  while (open > 0 && std::chrono::steady_clock::now() - opened < 10s) {
    std::vector<pollfd> fds;
    for (int i = 0; i < kSilent; ++i)
      if (closed_after_s[i] < 0) fds.push_back({silent[i], POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    for (int i = 0; i < kSilent; ++i) {
      if (closed_after_s[i] >= 0) continue;
      char byte;
      const ssize_t n = ::recv(silent[i], &byte, 1, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        closed_after_s[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - opened).count();
        --open;
      }
    }
  }
  for (int fd : silent) ::close(fd);
  int at_once = 0;
  double last = 0;
  for (double t : closed_after_s) {
    if (t >= 0 && t < 1.0) ++at_once;
    last = std::max(last, t);
  }
  std::printf("[cluster test] %d silent connections: %d closed at once, the last after %.2f s\n",
              kSilent, at_once, last);
  INFO(fx.logs());
  CHECK(open == 0);
  CHECK(at_once >= kSilent - 8);
  CHECK(last < 5.0);
  auto world2 = wait_event(fx.coord_events(), [](const event& e) { return is_epoch(e, 2, 0); }, 20s);
  REQUIRE(world2);
  CHECK(slurp(fx.dir / "coordinator.log").find("handshake gate on port") != std::string::npos);
}

TEST_CASE("cluster: members notice a hung or dead coordinator and exit with a clear error",
          "[actors][cluster]") {
  cluster_fixture fx;
  fx.start_coordinator();
  auto ev1 = fx.start_member(1);
  auto ev2 = fx.start_member(2);
  {
    INFO(fx.logs());
    REQUIRE(wait_event(ev1, [](const event& e) { return is_epoch(e, 2, 0); }, 15s));
    REQUIRE(wait_event(ev2, [](const event& e) { return is_epoch(e, 2, 0); }, 5s));
  }
  // Hung: heartbeat replies stop; each member gives up after the heartbeat
  // timeout (1.5 s) and exits (a supervisor would restart its agent).
  auto t_stop = wall_ms();
  fx.coordinator.signal(SIGSTOP);
  for (auto* ev : {&ev1, &ev2}) {
    auto lost = wait_event(*ev, [](const event& e) {
      return e.kind() == "agent" && e.str("kind") == "coordinator_lost";
    }, 6s);
    INFO(fx.logs());
    REQUIRE(lost);
    CHECK(lost->str("reason").find("127.0.0.1:" + std::to_string(fx.port)) != std::string::npos);
    auto latency = lost->num("t_ms") - t_stop;
    std::printf("[cluster test] SIGSTOP of the coordinator -> member noticed after %lld ms\n",
                static_cast<long long>(latency));
    CHECK(latency < 10000);  // its heartbeat timeout, not a collective's 30 s
  }
  for (std::int64_t id : {1, 2}) {
    auto code = fx.members[id].wait_for(10s); // shutdown must not hang on the stopped peer
    INFO(fx.logs());
    REQUIRE(code);
    CHECK(*code == 4);
  }
  fx.coordinator.kill();
}

TEST_CASE("cluster: a worker's request in flight to a coordinator that dies fails at once",
          "[actors][cluster]") {
  // Member 1 asks (through its agent, as its worker does) for the rendezvous of the epoch
  // of two; member 2 never does, so the request waits at the coordinator. The
  // coordinator is killed: the agent, which passes the answer on, fails the request when
  // it loses the coordinator. Before, the agent delegated it, the answer could no longer
  // come through the dead connection, and the worker waited out the request's timeout
  // (60 s here; a node's rendezvous waits cluster.start_timeout_s, 120 s, which once left
  // a job not started after a node's link dropped at its join: hosts label).
  cluster_fixture fx;
  fx.start_coordinator();
  auto ev1 = fx.start_member(1, "", -1, {"--rendezvous-at-world", "2"});
  auto ev2 = fx.start_member(2);
  {
    INFO(fx.logs());
    REQUIRE(wait_event(ev1, [](const event& e) { return is_epoch(e, 2, 0); }, 15s));
  }
  std::this_thread::sleep_for(700ms);  // the request (asked 200 ms after the epoch) waits there
  {
    INFO(fx.logs());
    CHECK_FALSE(wait_event(ev1, [](const event& e) { return e.kind() == "rendezvous"; }, 100ms));
  }
  const auto killed = wall_ms();
  fx.coordinator.kill();
  auto answer = wait_event(ev1, [](const event& e) { return e.kind() == "rendezvous"; }, 20s);
  INFO(fx.logs());
  REQUIRE(answer);
  CHECK(answer->str("outcome").find("failed") == 0);
  CHECK(answer->str("outcome").find("the coordinator was lost before it answered") != std::string::npos);
  const auto latency = answer->num("t_ms") - killed;
  std::printf("[cluster test] a rendezvous in flight failed %lld ms after the coordinator was killed\n",
              static_cast<long long>(latency));
  CHECK(latency < 5000);
}
