// libFuzzer target: the /metrics endpoint's HTTP request parser
// (metrics::answer_http_request) on arbitrary request heads, as a client on the network
// sends them. It must answer every input with a well-formed response.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "runtime/metrics/metrics_http_server.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view head(reinterpret_cast<const char*>(data), size);
  const std::string reply = dseek::metrics::answer_http_request(head, [] {
    return std::string("dseek_up 1\n");
  });
  if (reply.rfind("HTTP/1.1 ", 0) != 0 || reply.find("\r\n\r\n") == std::string::npos) std::abort();
  return 0;
}
