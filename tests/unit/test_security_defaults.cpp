// Issue 28's defaults, without processes: the consent to shrink (actors/node/world_outcome)
// and TLS off loopback (actors/cluster/transport_security). The same defaults end to end:
// tests/integration/test_security_defaults.cpp, test_elastic.cpp ("without consent").
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "actors/cluster/transport_security.hpp"
#include "actors/node/world_outcome.hpp"
#include "runtime/config/load.hpp"

using dseek::actors::WorldOutcome;

TEST_CASE("world outcome: finishing on fewer nodes needs elastic.min_nodes", "[security][elastic]") {
  SECTION("no consent (min_nodes 0): 2 of 3 is an error, 3 of 3 is not") {
    WorldOutcome shrunk(3, 0);
    shrunk.observe("epoch_layout", R"({"epoch":1,"world_size":3})");
    shrunk.observe("epoch_layout", R"({"epoch":3,"world_size":2})");
    shrunk.observe("train_done", R"({"step":40})");
    shrunk.observe("epoch_layout", R"({"epoch":4,"world_size":1})");  // after the end: ignored
    const auto why = shrunk.shrink_without_consent();
    CHECK(why.find("the job finished on 2 of 3 configured nodes without consent to shrink") == 0);
    CHECK(why.find("set elastic.min_nodes (e.g. 2)") != std::string::npos);
    WorldOutcome whole(3, 0);
    whole.observe("epoch_layout", R"({"epoch":1,"world_size":3})");
    whole.observe("epoch_layout", R"({"epoch":3,"world_size":2})");
    whole.observe("epoch_layout", R"({"epoch":4,"world_size":3})");  // the lost node rejoined
    whole.observe("train_done", R"({"step":40})");
    CHECK(whole.shrink_without_consent().empty());
  }
  SECTION("consent for 2: 2 of 3 is fine, a standby node's end freezes its world") {
    WorldOutcome consented(3, 2);
    consented.observe("epoch_layout", R"({"epoch":3,"world_size":2})");
    consented.observe("standby_ended", R"({"reason":"node 0 finished the job"})");
    consented.observe("epoch_layout", R"({"epoch":5,"world_size":1})");
    CHECK(consented.shrink_without_consent().empty());
    WorldOutcome below(4, 3);
    below.observe("epoch_layout", R"({"epoch":3,"world_size":2})");
    CHECK(below.shrink_without_consent().find("fewer than elastic.min_nodes (3)") != std::string::npos);
  }
  SECTION("no epoch seen (refused before it planned): nothing to say") {
    CHECK(WorldOutcome(2, 0).shrink_without_consent().empty());
  }
}

TEST_CASE("transport security: TLS is required off loopback, cluster.plaintext opts out",
          "[security][cluster]") {
  using dseek::actors::check_transport_security;
  using dseek::actors::is_loopback_host;
  CHECK(is_loopback_host("127.0.0.1"));
  CHECK(is_loopback_host("127.3.4.5"));
  CHECK(is_loopback_host("::1"));
  CHECK(is_loopback_host("localhost"));
  CHECK_FALSE(is_loopback_host("10.0.0.5"));
  CHECK_FALSE(is_loopback_host("192.0.2.1"));
  CHECK_FALSE(is_loopback_host("no-such-host.invalid"));

  dseek::config::ClusterConfig cluster;
  cluster.nodes = 2;
  CHECK(check_transport_security(cluster).empty());  // the defaults: loopback
  cluster.advertise_host = "10.0.0.5";
  CHECK_THROWS_WITH(check_transport_security(cluster),
                    Catch::Contains("cluster.advertise_host = \"10.0.0.5\" is not loopback) and has no TLS"));
  cluster.plaintext = true;
  CHECK(check_transport_security(cluster).find("warning: cluster.plaintext = true") == 0);
  cluster.plaintext = false;
  cluster.tls_ca = "ca.pem";  // (the files are checked elsewhere: tls_files.hpp)
  CHECK(check_transport_security(cluster).empty());
  cluster.tls_ca.clear();
  cluster.advertise_host = "127.0.0.1";
  cluster.coordinator = "10.0.0.1:7420";
  CHECK_THROWS_AS(check_transport_security(cluster), dseek::config::ConfigError);
  cluster.nodes = 1;  // alone: nothing travels between hosts
  CHECK(check_transport_security(cluster).empty());
}
