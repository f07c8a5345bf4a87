// A cluster CA and node certificates for TLS tests, made with the openssl program
// (EC P-256: fast), and the --set values that make a dseek-node use them.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"

namespace dseek::testing {

struct TestPki {
  explicit TestPki(const std::filesystem::path& where) : dir(where) {
    std::ofstream(dir / "openssl.cnf") << "[req]\n"
                                          "distinguished_name = dn\n"
                                          "prompt = no\n"
                                          "[dn]\n"
                                          "CN = dseek test\n"
                                          "[ca_ext]\n"
                                          "basicConstraints = critical, CA:TRUE\n"
                                          "keyUsage = critical, keyCertSign, cRLSign\n"
                                          "[node_ext]\n"
                                          "basicConstraints = critical, CA:FALSE\n"
                                          "keyUsage = critical, digitalSignature, keyEncipherment\n"
                                          "extendedKeyUsage = serverAuth, clientAuth\n";
  }

  static bool available() { return run_process({"openssl", "version"}, std::chrono::seconds(10)).exit_code == 0; }

  void openssl(std::vector<std::string> args) const {
    args.insert(args.begin(), "openssl");
    auto result = run_process(args, std::chrono::seconds(30));
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
  }

  std::string file(const std::string& name) const { return (dir / name).string(); }

  const std::vector<std::string> ec_key = {"-newkey", "ec", "-pkeyopt",
                                           "ec_paramgen_curve:prime256v1", "-nodes"};

  void make_ca(const std::string& name) const {
    openssl(std::vector<std::string>{"req", "-x509", "-config", file("openssl.cnf"),
                                     "-extensions", "ca_ext", "-days", "2",
                                     "-subj", "/CN=" + name, "-keyout", file(name + ".key"),
                                     "-out", file(name + ".pem")} + ec_key);
  }

  void make_node(const std::string& ca, const std::string& name, int serial) const {
    openssl(std::vector<std::string>{"req", "-new", "-config", file("openssl.cnf"),
                                     "-subj", "/CN=" + name, "-keyout", file(name + ".key"),
                                     "-out", file(name + ".csr")} + ec_key);
    openssl({"x509", "-req", "-in", file(name + ".csr"), "-CA", file(ca + ".pem"),
             "-CAkey", file(ca + ".key"), "-set_serial", std::to_string(serial),
             "-extfile", file("openssl.cnf"), "-extensions", "node_ext", "-days", "2",
             "-out", file(name + ".pem")});
  }

  // The --set values of a node that trusts `ca` and shows certificate `name`.
  std::vector<std::string> settings(const std::string& ca, const std::string& name) const {
    return {"--set", "cluster.tls_ca=\"" + file(ca + ".pem") + "\"",
            "--set", "cluster.tls_cert=\"" + file(name + ".pem") + "\"",
            "--set", "cluster.tls_key=\"" + file(name + ".key") + "\""};
  }

  std::filesystem::path dir;
};


}  // namespace dseek::testing
