// SHA-256 of a byte range, as lowercase hex (OpenSSL's EVP): the params_sha256 of the
// train_done event, which tests compare bit for bit across runs.
#pragma once

#include <cstddef>
#include <string>

namespace dseek::util {

std::string sha256_hex(const void* data, size_t bytes);

}  // namespace dseek::util
