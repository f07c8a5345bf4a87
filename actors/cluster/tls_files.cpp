// Implementation of tls_files.hpp with OpenSSL's PEM readers and X509_verify_cert (the
// same checks the TLS handshake makes, without a peer).
#include "actors/cluster/tls_files.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

namespace dseek::actors {

namespace {

struct file_closer {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
struct x509_free {
  void operator()(X509* x) const { X509_free(x); }
};
struct key_free {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct store_free {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
struct store_ctx_free {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};
struct chain_free {
  void operator()(STACK_OF(X509)* s) const { sk_X509_pop_free(s, X509_free); }
};

using file_ptr = std::unique_ptr<std::FILE, file_closer>;

// OpenSSL's queued errors as text (and the queue cleared), or "" if none.
std::string openssl_errors() {
  std::string text;
  while (unsigned long code = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof buffer);
    text += (text.empty() ? "" : "; ") + std::string(buffer);
  }
  return text.empty() ? "" : " (OpenSSL: " + text + ")";
}

[[noreturn]] void fail(const char* key, const std::string& file, const std::string& why) {
  throw std::runtime_error(std::string(key) + " = \"" + file + "\": " + why);
}

file_ptr open_file(const char* key, const std::string& file) {
  file_ptr f(std::fopen(file.c_str(), "r"));
  if (!f) fail(key, file, std::string("cannot read it: ") + std::strerror(errno));
  return f;
}

}  // namespace

void check_tls_files(const std::string& ca_file, const std::string& cert_file,
                     const std::string& key_file) {
  ERR_clear_error();
  // The CA: every certificate in the file is trusted.
  open_file("cluster.tls_ca", ca_file);
  std::unique_ptr<X509_STORE, store_free> store(X509_STORE_new());
  if (!store || X509_STORE_load_file(store.get(), ca_file.c_str()) != 1)
    fail("cluster.tls_ca", ca_file, "no PEM CA certificate in it" + openssl_errors());

  // This node's certificate, then any intermediate certificates after it (a chain file).
  auto cert_in = open_file("cluster.tls_cert", cert_file);
  std::unique_ptr<X509, x509_free> cert(PEM_read_X509(cert_in.get(), nullptr, nullptr, nullptr));
  if (!cert) fail("cluster.tls_cert", cert_file, "no PEM certificate in it" + openssl_errors());
  std::unique_ptr<STACK_OF(X509), chain_free> chain(sk_X509_new_null());
  while (X509* more = PEM_read_X509(cert_in.get(), nullptr, nullptr, nullptr))
    sk_X509_push(chain.get(), more);
  ERR_clear_error();  // the end of the file reads as an error

  auto key_in = open_file("cluster.tls_key", key_file);
  std::unique_ptr<EVP_PKEY, key_free> key(
      PEM_read_PrivateKey(key_in.get(), nullptr, nullptr, nullptr));
  if (!key)
    fail("cluster.tls_key", key_file,
         "no unencrypted PEM private key in it" + openssl_errors());
  if (X509_check_private_key(cert.get(), key.get()) != 1)
    fail("cluster.tls_key", key_file,
         "not the key of the certificate in cluster.tls_cert = \"" + cert_file + "\"" +
             openssl_errors());

  // The check the peers' TLS handshake will make: signed by the cluster CA, in date.
  std::unique_ptr<X509_STORE_CTX, store_ctx_free> ctx(X509_STORE_CTX_new());
  if (!ctx || X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), chain.get()) != 1)
    throw std::runtime_error("cannot check the TLS certificate" + openssl_errors());
  if (X509_verify_cert(ctx.get()) != 1)
    fail("cluster.tls_cert", cert_file,
         std::string("not accepted by the cluster CA in cluster.tls_ca = \"") + ca_file +
             "\": " + X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get())));
}

}  // namespace dseek::actors
