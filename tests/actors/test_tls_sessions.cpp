// TLS connections of libcaf_openssl with dseek's OpenSSL error-queue guard
// (actors/cluster/openssl_error_queue.hpp): a stranger that connects and closes in the
// middle of its handshake leaves "unexpected eof" in the server's I/O thread, and the
// server's healthy connection to a node must go on carrying requests. Without the guard
// the healthy connection is closed at its next read that would block (checked: this test
// fails with the guard's ERR_clear_error calls removed). The guard's own check: a read
// that would block on an established session, with a stale error queued, is an error
// for libssl's SSL_read and "would block" through the guard.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include "actors/cluster/openssl_error_queue.hpp"
#include "support/node_runs.hpp"
#include "support/test_paths.hpp"
#include "support/test_pki.hpp"

using namespace std::chrono_literals;
using dseek::testing::ScratchDir;
using dseek::testing::TestPki;

namespace {

class tls_config : public caf::actor_system_config {
 public:
  tls_config(const TestPki& pki, const std::string& name) {
    load<caf::io::middleman>();
    load<caf::openssl::manager>();
    openssl_cafile = pki.file("ca.pem");
    openssl_certificate = pki.file(name + ".pem");
    openssl_key = pki.file(name + ".key");
  }
};

caf::behavior echo() {
  return {[](int x) { return x; }};
}

}  // namespace

TEST_CASE("tls: a stranger closing mid-handshake does not drop a node's healthy connection",
          "[tls]") {
  REQUIRE(dseek::actors::openssl_error_queue_guard_problem().empty());
  ScratchDir keys("tls-sessions");
  TestPki pki(keys.path());
  pki.make_ca("ca");
  pki.make_node("ca", "server", 1);
  pki.make_node("ca", "client", 2);
  tls_config server_cfg(pki, "server"), client_cfg(pki, "client");
  caf::actor_system server{server_cfg};
  caf::actor_system client{client_cfg};
  const caf::actor echo_actor = server.spawn(echo);
  const auto port = caf::openssl::publish(echo_actor, 0, "127.0.0.1");
  REQUIRE(port);
  auto remote = caf::openssl::remote_actor(client, "127.0.0.1", *port);
  REQUIRE(remote);
  caf::scoped_actor self{client};
  const auto ask = [&](int x) {
    int answer = -1;
    std::string error;
    self->request(*remote, 5s, x).receive([&](int y) { answer = y; },
                                          [&](caf::error& err) { error = client.render(err); });
    INFO("request " << x << ": " << error);
    CHECK(answer == x);
  };
  ask(1);
  for (int stranger = 0; stranger < 3; ++stranger) {
    REQUIRE(dseek::testing::half_tls_handshake(*port));
    std::this_thread::sleep_for(200ms);  // the server reads the stranger's end of file
    ask(10 + stranger);
    ask(20 + stranger);
  }
  caf::anon_send_exit(echo_actor, caf::exit_reason::user_shutdown);
}

TEST_CASE("tls: the guard clears a stale OpenSSL error before a read, libssl's own read "
          "does not", "[tls]") {
  REQUIRE(dseek::actors::openssl_error_queue_guard_problem().empty());
  ScratchDir keys("tls-queue");
  TestPki pki(keys.path());
  pki.make_ca("ca");
  pki.make_node("ca", "server", 1);
  SSL_CTX* server_ctx = SSL_CTX_new(TLS_server_method());
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  REQUIRE(SSL_CTX_use_certificate_chain_file(server_ctx, pki.file("server.pem").c_str()) == 1);
  REQUIRE(SSL_CTX_use_PrivateKey_file(server_ctx, pki.file("server.key").c_str(), SSL_FILETYPE_PEM) == 1);
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) == 0);
  SSL* server = SSL_new(server_ctx);
  SSL* client = SSL_new(client_ctx);
  SSL_set_fd(server, fds[0]);
  SSL_set_fd(client, fds[1]);
  // The handshake, stepped on both ends until each has finished (bounded).
  bool client_done = false, server_done = false;
  for (int round = 0; round < 100 && !(client_done && server_done); ++round) {
    if (!client_done) client_done = SSL_connect(client) == 1;
    if (!server_done) server_done = SSL_accept(server) == 1;
  }
  REQUIRE(client_done);
  REQUIRE(server_done);
  char byte = 0;
  // The session tickets the server sent, read with an empty queue; then nothing to read.
  REQUIRE(SSL_get_error(client, SSL_read(client, &byte, 1)) == SSL_ERROR_WANT_READ);
  auto* libssl_read = reinterpret_cast<int (*)(SSL*, void*, int)>(::dlsym(RTLD_NEXT, "SSL_read"));
  REQUIRE(libssl_read != nullptr);
  REQUIRE(libssl_read != &SSL_read);
  // A read that would block, with another session's end of file still queued.
  const auto read_error = [&](int (*read)(SSL*, void*, int)) {
    ERR_raise(ERR_LIB_SSL, SSL_R_UNEXPECTED_EOF_WHILE_READING);
    const int error = SSL_get_error(client, read(client, &byte, 1));
    ERR_clear_error();
    return error;
  };
  CHECK(read_error(libssl_read) == SSL_ERROR_SSL);        // CAF would close the session
  CHECK(read_error(&SSL_read) == SSL_ERROR_WANT_READ);    // through the guard: wait for data
  SSL_free(client);
  SSL_free(server);
  ::close(fds[0]);
  ::close(fds[1]);
  SSL_CTX_free(client_ctx);
  SSL_CTX_free(server_ctx);
}
