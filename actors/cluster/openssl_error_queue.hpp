// A guard for libcaf_openssl 0.17's TLS sessions: OpenSSL's SSL_get_error() reports
// SSL_ERROR_SSL whenever the thread's error queue is not empty, so an I/O call must
// start with an empty queue. CAF 0.17 never clears it, and Debian's build (logging
// compiled out) never drains it either: one peer that closes mid-handshake leaves
// "unexpected eof while reading" in the multiplexer thread's queue, and the next
// healthy session whose read would block is closed as failed (remote_link_unreachable:
// a node declared lost at formation in ~1 of 10 TLS jobs on the hosts test bed, none
// in plaintext). This file defines SSL_read, SSL_write, SSL_connect and SSL_accept in
// the program, which the dynamic linker binds libcaf_openssl's calls to: each clears
// the queue and calls libssl's own.
#pragma once

#include <string>

namespace dseek::actors {

// "" when libcaf_openssl's calls reach the guard; else why not (a program that does not
// export the guard's symbols), for the node to refuse TLS with.
std::string openssl_error_queue_guard_problem();

}  // namespace dseek::actors
