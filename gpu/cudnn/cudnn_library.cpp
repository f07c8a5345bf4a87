// Loads libcudnn_graph.so.9 once per process (cudnn_library.hpp). cuDNN itself loads
// its engine libraries (runtime-compiled engines, heuristics) from the same search path
// when a plan first needs them.
#include "gpu/cudnn/cudnn_library.hpp"

#include <dlfcn.h>

#include <mutex>
#include <stdexcept>

namespace dseek::gpu::cudnn {

namespace {

constexpr const char* kLibraryName = "libcudnn_graph.so.9";

struct Loaded {
  Library library;
  bool ok = false;
  std::string why_not;
};

template <typename Function>
bool resolve(void* handle, const char* name, Function& out, std::string& why_not) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    why_not = std::string(kLibraryName) + " has no " + name;
    return false;
  }
  out = reinterpret_cast<Function>(symbol);
  return true;
}

Loaded load() {
  Loaded loaded;
  void* handle = dlopen(kLibraryName, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    loaded.why_not = error != nullptr ? error : std::string("dlopen(") + kLibraryName + ") failed";
    return loaded;
  }
  Library& lib = loaded.library;
  std::string& why = loaded.why_not;
  loaded.ok = resolve(handle, "cudnnGetVersion", lib.get_version, why) &&
              resolve(handle, "cudnnGetErrorString", lib.get_error_string, why) &&
              resolve(handle, "cudnnGetLastErrorString", lib.get_last_error_string, why) &&
              resolve(handle, "cudnnCreate", lib.create, why) &&
              resolve(handle, "cudnnDestroy", lib.destroy, why) &&
              resolve(handle, "cudnnSetStream", lib.set_stream, why) &&
              resolve(handle, "cudnnBackendCreateDescriptor", lib.create_descriptor, why) &&
              resolve(handle, "cudnnBackendDestroyDescriptor", lib.destroy_descriptor, why) &&
              resolve(handle, "cudnnBackendSetAttribute", lib.set_attribute, why) &&
              resolve(handle, "cudnnBackendGetAttribute", lib.get_attribute, why) &&
              resolve(handle, "cudnnBackendFinalize", lib.finalize, why) &&
              resolve(handle, "cudnnBackendExecute", lib.execute, why);
  if (loaded.ok && lib.get_version() / 10000 != CUDNN_MAJOR) {
    loaded.ok = false;
    loaded.why_not = std::string(kLibraryName) + " is cuDNN " +
                     std::to_string(lib.get_version()) + "; dseek was built against cuDNN " +
                     std::to_string(CUDNN_MAJOR) + ".x";
  }
  return loaded;  // the handle stays open for the process
}

}  // namespace

const Library* library(std::string* why_not) {
  static const Loaded loaded = load();  // thread-safe initialisation
  if (!loaded.ok) {
    if (why_not != nullptr) *why_not = loaded.why_not;
    return nullptr;
  }
  return &loaded.library;
}

void throw_cudnn_error(const Library& lib, cudnnStatus_t status, const char* file, int line,
                       const char* call) {
  char message[1024] = {0};
  lib.get_last_error_string(message, sizeof message);
  std::string text = std::string(file) + ":" + std::to_string(line) + ": " +
                     lib.get_error_string(status);
  if (message[0] != '\0') text += std::string(": ") + message;
  text += std::string(" in `") + call + "`";
  throw std::runtime_error(text);
}

}  // namespace dseek::gpu::cudnn
