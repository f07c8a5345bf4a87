// TLS between nodes whenever any of a node's addresses is off loopback (issue 28,
// "security defaults"): cluster.coordinator's host and cluster.advertise_host. A job
// that spans hosts without cluster.tls_* refuses to start, unless cluster.plaintext =
// true, the explicit opt-out, which is warned about at start. A job on loopback only
// (dseek launch, a test) needs nothing. No CAF here.
#pragma once

#include <string>

#include "runtime/config/job_config.hpp"

namespace dseek::actors {

// Whether `host` is a loopback address (127.0.0.0/8, ::1) or a name that stands for
// loopback addresses only (localhost).
bool is_loopback_host(const std::string& host);

// Throws config::ConfigError (exit 3) for a job off loopback without TLS and without
// the opt-out; returns the warning to print for the opt-out ("" when none is due).
std::string check_transport_security(const config::ClusterConfig& cluster);

}  // namespace dseek::actors
