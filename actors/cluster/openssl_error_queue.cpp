// Clears OpenSSL's per-thread error queue before each TLS I/O call of libcaf_openssl
// (see openssl_error_queue.hpp): the program's definitions of the four calls below
// interpose libssl's, and forward to them through dlsym(RTLD_NEXT).
#include "actors/cluster/openssl_error_queue.hpp"

#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstdlib>
#include <cstdio>

namespace {

// libssl's definition of `name`, the one after this program's in the search order.
template <class Function>
Function next_definition(const char* name) {
  void* found = ::dlsym(RTLD_NEXT, name);
  if (found == nullptr) {
    std::fprintf(stderr, "dseek: %s not found in libssl (dlsym: %s)\n", name, ::dlerror());
    std::abort();
  }
  return reinterpret_cast<Function>(found);
}

}  // namespace

extern "C" {

int SSL_read(SSL* ssl, void* buf, int num) {
  static const auto next = next_definition<int (*)(SSL*, void*, int)>("SSL_read");
  ::ERR_clear_error();
  return next(ssl, buf, num);
}

int SSL_write(SSL* ssl, const void* buf, int num) {
  static const auto next = next_definition<int (*)(SSL*, const void*, int)>("SSL_write");
  ::ERR_clear_error();
  return next(ssl, buf, num);
}

int SSL_connect(SSL* ssl) {
  static const auto next = next_definition<int (*)(SSL*)>("SSL_connect");
  ::ERR_clear_error();
  return next(ssl);
}

int SSL_accept(SSL* ssl) {
  static const auto next = next_definition<int (*)(SSL*)>("SSL_accept");
  ::ERR_clear_error();
  return next(ssl);
}

}  // extern "C"

namespace dseek::actors {

std::string openssl_error_queue_guard_problem() {
  // The definition a shared library's call binds to: the first in the global scope.
  void* bound = ::dlsym(RTLD_DEFAULT, "SSL_read");
  if (bound == reinterpret_cast<void*>(&SSL_read)) return "";
  return "libcaf_openssl's TLS calls do not reach dseek's OpenSSL error-queue guard "
         "(actors/cluster/openssl_error_queue.hpp): the program does not export SSL_read "
         "(link it with -rdynamic or against libssl), and without the guard CAF 0.17 "
         "drops healthy TLS connections after any peer's failed handshake";
}

}  // namespace dseek::actors
