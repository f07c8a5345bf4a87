# Finds dseek's libraries and wraps the ones without CMake support as imported targets.
# Facts behind the choices are in shared/notes/platform.md (CMake section).

find_package(Threads REQUIRED)
find_package(OpenSSL REQUIRED)

# OpenBLAS: BLAS::BLAS comes without an include dir; cblas.h lives in the pthread variant's dir.
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_path(DSEEK_CBLAS_INCLUDE cblas.h
  PATHS /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/openblas /usr/include
  NO_DEFAULT_PATH REQUIRED)
add_library(dseek::blas INTERFACE IMPORTED)
target_link_libraries(dseek::blas INTERFACE BLAS::BLAS)
target_include_directories(dseek::blas INTERFACE ${DSEEK_CBLAS_INCLUDE})

# oneDNN (Debian's libdnnl-dev 2.6): the CPU backend's bf16 matmuls. Its CMake config
# wants OpenCL's headers (the GPU runtime Debian built it with), so find it by hand. It
# runs on OpenMP (libgomp): the backend sets each pool thread's OpenMP thread count.
find_path(DSEEK_DNNL_INCLUDE oneapi/dnnl/dnnl.hpp REQUIRED)
find_library(DSEEK_DNNL_LIB dnnl REQUIRED)
add_library(dseek::dnnl INTERFACE IMPORTED)
target_link_libraries(dseek::dnnl INTERFACE ${DSEEK_DNNL_LIB} gomp)
target_include_directories(dseek::dnnl INTERFACE ${DSEEK_DNNL_INCLUDE})

find_package(tomlplusplus REQUIRED)
find_package(CapnProto CONFIG REQUIRED)
find_package(Catch2 REQUIRED)
# ONNX's protobuf classes (Debian's libonnx-dev 1.12, with libprotobuf-dev): the ONNX
# export (runtime/export/). Its config wants protobuf::libprotobuf, which FindProtobuf gives.
find_package(Protobuf REQUIRED)
find_package(ONNX CONFIG REQUIRED)

# xxHash: a plain library and header.
find_path(DSEEK_XXHASH_INCLUDE xxhash.h REQUIRED)
find_library(DSEEK_XXHASH_LIB xxhash REQUIRED)
add_library(dseek::xxhash INTERFACE IMPORTED)
target_include_directories(dseek::xxhash INTERFACE ${DSEEK_XXHASH_INCLUDE})
target_link_libraries(dseek::xxhash INTERFACE ${DSEEK_XXHASH_LIB})

# CAF 0.17.6 ships no CMake config: wrap it as the target names newer CAF exports.
find_path(DSEEK_CAF_INCLUDE caf/all.hpp REQUIRED)
find_library(DSEEK_CAF_CORE caf_core REQUIRED)
find_library(DSEEK_CAF_IO caf_io REQUIRED)
find_library(DSEEK_CAF_OPENSSL caf_openssl REQUIRED)
if(NOT TARGET CAF::core)
  add_library(CAF::core SHARED IMPORTED)
  set_target_properties(CAF::core PROPERTIES IMPORTED_LOCATION ${DSEEK_CAF_CORE}
    INTERFACE_INCLUDE_DIRECTORIES ${DSEEK_CAF_INCLUDE} INTERFACE_LINK_LIBRARIES Threads::Threads)
  add_library(CAF::io SHARED IMPORTED)
  set_target_properties(CAF::io PROPERTIES IMPORTED_LOCATION ${DSEEK_CAF_IO}
    INTERFACE_LINK_LIBRARIES CAF::core)
  add_library(CAF::openssl SHARED IMPORTED)
  set_target_properties(CAF::openssl PROPERTIES IMPORTED_LOCATION ${DSEEK_CAF_OPENSSL}
    INTERFACE_LINK_LIBRARIES "CAF::io;OpenSSL::SSL;OpenSSL::Crypto")
endif()

# CUDA is optional. check_language(CUDA) is slow and drops the host compiler, so look
# for nvcc directly (platform notes).
set(DSEEK_CUDA_ENABLED OFF)
if(NOT DSEEK_WITH_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "DSEEK_WITH_CUDA must be AUTO, ON or OFF, not '${DSEEK_WITH_CUDA}'")
endif()
if(NOT DSEEK_WITH_CUDA STREQUAL "OFF")
  find_program(DSEEK_NVCC nvcc PATHS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin)
  if(DSEEK_NVCC)
    set(CMAKE_CUDA_COMPILER ${DSEEK_NVCC})
    set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)  # cudart once, not twice
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc's C++20 flag.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(DSEEK_CUDA_ENABLED ON)
  elseif(DSEEK_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DSEEK_WITH_CUDA=ON but nvcc was not found (looked in PATH and /usr/local/cuda/bin)")
  endif()
endif()
