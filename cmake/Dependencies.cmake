# Third-party dependencies. All of them come from Debian 12 packages; scripts/bootstrap.sh
# installs them. Each one is exposed as an imported target (the package's own target where it
# ships a usable one, a `kiln::` target otherwise), and components link them per target.

# The message printed when a required package is missing.
function(kiln_missing_dependency what package)
  message(FATAL_ERROR
    "${what} was not found. Install the Debian package(s): ${package} "
    "(scripts/bootstrap.sh installs every build dependency).")
endfunction()

# LLVM 14: code generation and the JIT
# Debian builds LLVM as one shared library (libLLVM-14.so), which links much faster than the
# component archives; the component archives are the fallback for an LLVM built without it.
find_package(LLVM 14 CONFIG HINTS /usr/lib/llvm-14/lib/cmake/llvm)
if(NOT LLVM_FOUND)
  kiln_missing_dependency("LLVM 14" llvm-14-dev)
endif()
separate_arguments(KILN_LLVM_DEFINITIONS NATIVE_COMMAND "${LLVM_DEFINITIONS}")
add_library(kiln::llvm INTERFACE IMPORTED)
target_include_directories(kiln::llvm SYSTEM INTERFACE ${LLVM_INCLUDE_DIRS})
target_compile_options(kiln::llvm INTERFACE ${KILN_LLVM_DEFINITIONS})
if(TARGET LLVM AND LLVM_LINK_LLVM_DYLIB)
  target_link_libraries(kiln::llvm INTERFACE LLVM)
  set(KILN_LLVM_LINKAGE "shared libLLVM")
else()
  llvm_map_components_to_libnames(KILN_LLVM_LIBS
    core support irreader analysis passes orcjit native nativecodegen)
  target_link_libraries(kiln::llvm INTERFACE ${KILN_LLVM_LIBS})
  set(KILN_LLVM_LINKAGE "component libraries")
endif()

# protobuf and gRPC: the service contracts in proto/
find_package(Protobuf)
if(NOT Protobuf_FOUND OR NOT Protobuf_PROTOC_EXECUTABLE)
  kiln_missing_dependency("protobuf (library and protoc)" "libprotobuf-dev protobuf-compiler")
endif()
find_package(gRPC CONFIG)
if(NOT gRPC_FOUND)
  kiln_missing_dependency("gRPC" "libgrpc++-dev protobuf-compiler-grpc")
endif()
if(NOT TARGET gRPC::grpc_cpp_plugin)
  kiln_missing_dependency("grpc_cpp_plugin" protobuf-compiler-grpc)
endif()

# XGBoost: the cost model
# Debian's XGBoost CMake config also requires the command-line tool (/usr/bin/xgboost), so the
# C API library and header are located directly.
find_path(KILN_XGBOOST_INCLUDE_DIR xgboost/c_api.h)
find_library(KILN_XGBOOST_LIBRARY NAMES xgboost)
if(NOT KILN_XGBOOST_INCLUDE_DIR OR NOT KILN_XGBOOST_LIBRARY)
  kiln_missing_dependency("XGBoost (xgboost/c_api.h, libxgboost.so)" libxgboost-dev)
endif()
add_library(kiln::xgboost SHARED IMPORTED)
set_target_properties(kiln::xgboost PROPERTIES
  IMPORTED_LOCATION "${KILN_XGBOOST_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${KILN_XGBOOST_INCLUDE_DIR}")

# SQLite: the tuning log
find_package(SQLite3)
if(NOT SQLite3_FOUND)
  kiln_missing_dependency("SQLite 3" libsqlite3-dev)
endif()

# Small libraries for the tools and services
find_package(CLI11 CONFIG)
if(NOT CLI11_FOUND)
  kiln_missing_dependency("CLI11" libcli11-dev)
endif()
find_package(nlohmann_json 3 CONFIG)
if(NOT nlohmann_json_FOUND)
  kiln_missing_dependency("nlohmann_json" nlohmann-json3-dev)
endif()
find_package(fmt CONFIG)
if(NOT fmt_FOUND)
  kiln_missing_dependency("fmt" libfmt-dev)
endif()
find_package(spdlog CONFIG)
if(NOT spdlog_FOUND)
  kiln_missing_dependency("spdlog" libspdlog-dev)
endif()
# cpp-httplib: the daemons' /metrics endpoint. Debian ships it as a header and a shared library
# built with its TLS and compression options, which its pkg-config file carries.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(KILN_HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
endif()
if(NOT KILN_HTTPLIB_FOUND)
  kiln_missing_dependency("cpp-httplib" libcpp-httplib-dev)
endif()
add_library(kiln::httplib INTERFACE IMPORTED)
target_link_libraries(kiln::httplib INTERFACE PkgConfig::KILN_HTTPLIB)

# Peers measured by the benchmarks: OpenBLAS and oneDNN
# Debian's OpenBLAS config sets variables only (for the variant selected by update-alternatives).
find_package(OpenBLAS CONFIG QUIET)
if(OpenBLAS_FOUND)
  set(KILN_OPENBLAS_INCLUDE_DIRS ${OpenBLAS_INCLUDE_DIRS})
  set(KILN_OPENBLAS_LIBRARIES ${OpenBLAS_LIBRARIES})
else()
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(KILN_OPENBLAS_PC QUIET openblas)
  endif()
  if(NOT KILN_OPENBLAS_PC_FOUND)
    kiln_missing_dependency("OpenBLAS" libopenblas-dev)
  endif()
  set(KILN_OPENBLAS_INCLUDE_DIRS ${KILN_OPENBLAS_PC_INCLUDE_DIRS})
  set(KILN_OPENBLAS_LIBRARIES ${KILN_OPENBLAS_PC_LINK_LIBRARIES})
endif()
add_library(kiln::openblas INTERFACE IMPORTED)
target_include_directories(kiln::openblas SYSTEM INTERFACE ${KILN_OPENBLAS_INCLUDE_DIRS})
target_link_libraries(kiln::openblas INTERFACE ${KILN_OPENBLAS_LIBRARIES})

# Debian's oneDNN is built with its OpenCL GPU runtime, so its config needs the OpenCL loader and
# headers (ocl-icd-opencl-dev, opencl-c-headers) as well.
find_package(dnnl CONFIG)
if(NOT dnnl_FOUND)
  kiln_missing_dependency("oneDNN" "libdnnl-dev ocl-icd-opencl-dev opencl-c-headers")
endif()

# Tests and benchmarks
if(KILN_BUILD_TESTS)
  find_package(GTest CONFIG)
  if(NOT GTest_FOUND OR NOT TARGET GTest::gmock)
    kiln_missing_dependency("GoogleTest/GoogleMock" "libgtest-dev libgmock-dev")
  endif()
endif()
if(KILN_BUILD_BENCH)
  find_package(benchmark CONFIG)
  if(NOT benchmark_FOUND)
    kiln_missing_dependency("Google Benchmark" libbenchmark-dev)
  endif()
endif()

# CUDA (optional): NVRTC for the CUDA code generator
# Kiln builds and passes its tests without CUDA. With the toolkit present, kiln::cuda carries the
# toolkit headers (NVRTC and the driver API), libnvrtc and the KILN_HAVE_CUDA=1 definition. The
# driver library itself is not linked here: NVRTC compiles without a GPU or a driver.
option(KILN_ENABLE_CUDA "Use the CUDA toolkit (NVRTC) when it is found" ON)
set(KILN_HAVE_CUDA OFF)
if(KILN_ENABLE_CUDA)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND CUDA_nvrtc_LIBRARY)
    set(KILN_HAVE_CUDA ON)
    add_library(kiln::cuda INTERFACE IMPORTED)
    # libnvrtc itself rather than CUDA::nvrtc, which also links the driver stub (libcuda.so):
    # a binary that needs libcuda.so.1 does not start on a machine without the NVIDIA driver.
    target_link_libraries(kiln::cuda INTERFACE ${CUDA_nvrtc_LIBRARY})
    target_include_directories(kiln::cuda SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
    target_compile_definitions(kiln::cuda INTERFACE KILN_HAVE_CUDA=1)
    # The toolkit's include directories, '|'-separated, for the headers NVRTC compiles with (cuda_fp16.h).
    string(REPLACE ";" "|" KILN_CUDA_INCLUDE_DIRS "${CUDAToolkit_INCLUDE_DIRS}")
    target_compile_definitions(kiln::cuda INTERFACE "KILN_CUDA_INCLUDE_DIRS=\"${KILN_CUDA_INCLUDE_DIRS}\"")
  endif()
endif()

if(KILN_HAVE_CUDA)
  set(KILN_CUDA_SUMMARY "CUDA ${CUDAToolkit_VERSION} (NVRTC)")
else()
  set(KILN_CUDA_SUMMARY "CUDA not used")
endif()
message(STATUS "Kiln dependencies: LLVM ${LLVM_PACKAGE_VERSION} (${KILN_LLVM_LINKAGE}), "
  "gRPC ${gRPC_VERSION}, protobuf ${Protobuf_VERSION}, XGBoost ${KILN_XGBOOST_LIBRARY}, "
  "SQLite ${SQLite3_VERSION}, oneDNN ${dnnl_VERSION}, OpenBLAS ${OpenBLAS_VERSION}, "
  "${KILN_CUDA_SUMMARY}")
