// libFuzzer target: the join handshake and the cluster messages as they arrive from the
// network. The input is read by CAF's binary deserializer (the wire format) as what a
// node sends: hello (node id, node nonce), a join proof (node id, host, nonce, MAC; the
// agent is this target's own actor), and an epoch_started as a stranger might send it to a
// node agent. The hello and the proof go to a fresh coordinator in this process; a
// refusal is the expected answer, a join without the secret or a crash is a bug.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include <caf/all.hpp>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/cluster/coordinator.hpp"

namespace {

using namespace std::chrono_literals;
namespace actors = dseek::actors;

struct Runtime {
  Runtime() {
    actors::register_cluster_types(cfg);
    cfg.set("scheduler.max-threads", 1);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
};

// Never destroyed: an actor system torn down by exit handlers, after CAF's own statics,
// crashes in ~actor_system (the first "finding" of this target, in the harness).
Runtime& runtime() {
  static Runtime* r = new Runtime;
  return *r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto& sys = *runtime().sys;
  caf::binary_deserializer source(sys, reinterpret_cast<const char*>(data), size);
  std::int64_t hello_id = 0, proof_id = 0;
  std::string node_nonce, host, nonce, mac;
  bool use_issued_nonce = false;
  if (source(hello_id, node_nonce, proof_id, host, nonce, mac, use_issued_nonce)) return 0;

  actors::coordinator_config cc;
  cc.settings.secret = "fuzz-secret";
  cc.log = false;
  auto coordinator = actors::spawn_coordinator(sys, cc);
  if (!coordinator) std::abort();
  caf::scoped_actor self{sys};
  actors::join_challenge challenge;
  self->request(*coordinator, 2s, actors::hello_atom::value, hello_id, node_nonce)
      .receive([&](actors::join_challenge& c) { challenge = c; }, [](caf::error&) {});
  actors::join_proof proof{proof_id, host, use_issued_nonce ? challenge.nonce : nonce, mac,
                           caf::actor_cast<caf::actor>(self)};
  self->request(*coordinator, 2s, actors::join_atom::value, proof)
      .receive(
          [&](actors::epoch_started&) {
            // Admitted: only with the secret's MAC, which the input cannot hold.
            if (!actors::verify_join_mac("fuzz-secret", proof.nonce, proof.node_id, mac)) std::abort();
          },
          [](caf::error&) {});
  // A stranger's epoch_started, read from the rest of the input, sent to the coordinator
  // (which takes no such message) and checked for a consistent decode.
  actors::epoch_started stray;
  if (!source(stray)) self->send(*coordinator, stray);
  self->send_exit(*coordinator, caf::exit_reason::user_shutdown);
  return 0;
}
