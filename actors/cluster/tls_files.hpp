// The TLS files of a node (cluster.tls_ca, tls_cert, tls_key), checked before the actor
// system uses them. libcaf_openssl reads them only when the first connection is made,
// and a file it cannot load then throws inside its middleman actor, which terminates the
// process without naming the file. This check names the key and the file, and also
// catches what would fail every connection later: a key that does not belong to the
// certificate, or a certificate that the cluster CA did not sign (or that expired).
// No CAF here.
#pragma once

#include <string>

namespace dseek::actors {

// Throws std::runtime_error naming the config key, the file and what is wrong.
void check_tls_files(const std::string& ca_file, const std::string& cert_file,
                     const std::string& key_file);

}  // namespace dseek::actors
