//===- Kernels.cpp - the CUDA runtime's modules and launches --------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Loading and unloading GPU modules (cubin, or PTX through the JIT), kernel
// lookup, and launches: plain, in thread-block clusters, and programmatic
// (kernels named `<name>__pdl`, moe-gpu-programmatic-launch).
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include "moe-mlir/Runtime/MoeCudaRuntime.h"

#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <unordered_set>

using namespace moe::cuda_runtime;

namespace {

/// Checks that every launch dimension fits the driver's `unsigned int`.
bool checkLaunchDims(const char *where, std::initializer_list<intptr_t> dims) {
  for (intptr_t dim : dims) {
    if (dim < 1 || static_cast<uint64_t>(dim) > UINT32_MAX) {
      recordError("launch dimension %lld is out of range [1, 2^32) (in %s)",
                  static_cast<long long>(dim), where);
      return false;
    }
  }
  return true;
}

/// Kernels may use more than the default 48 KiB of dynamic shared memory only
/// after opting in per function.
bool prepareSharedMemory(CUfunction function, int32_t sharedMemBytes,
                         const char *where) {
  constexpr int32_t kDefaultDynamicSharedLimit = 48 * 1024;
  if (sharedMemBytes < 0) {
    recordError("negative dynamic shared memory size %d (in %s)",
                sharedMemBytes, where);
    return false;
  }
  if (sharedMemBytes <= kDefaultDynamicSharedLimit)
    return true;
  return checkCu(cuFuncSetAttribute(
                     function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                     sharedMemBytes),
                 "cuFuncSetAttribute", where);
}

} // namespace

extern "C" void *mgpuModuleLoad(void *data, int64_t sizeBytes) {
  if (!data || sizeBytes <= 0) {
    recordError("empty GPU binary (in %s)", __func__);
    return nullptr;
  }
  ContextGuard guard(__func__);
  if (!guard.ok())
    return nullptr;
  CUmodule module = nullptr;
  if (!CU_CHECK(cuModuleLoadData, &module, data))
    return nullptr;
  return module;
}

extern "C" void *mgpuModuleLoadJIT(void *ptx, int32_t optLevel) {
  if (!ptx) {
    recordError("empty PTX (in %s)", __func__);
    return nullptr;
  }
  ContextGuard guard(__func__);
  if (!guard.ok())
    return nullptr;
  char log[2048] = {0};
  CUjit_option options[] = {CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {reinterpret_cast<void *>(static_cast<uintptr_t>(
                        optLevel < 0 ? 0 : (optLevel > 4 ? 4 : optLevel))),
                    log, reinterpret_cast<void *>(sizeof(log) - 1)};
  CUmodule module = nullptr;
  CUresult result = cuModuleLoadDataEx(&module, ptx, 3, options, values);
  if (result != CUDA_SUCCESS) {
    if (log[0])
      std::fprintf(stderr, "moe-cuda-runtime: PTX JIT log:\n%s\n", log);
    checkCu(result, "cuModuleLoadDataEx", __func__);
    return nullptr;
  }
  return module;
}

extern "C" void mgpuModuleUnload(void *module) {
  if (!module)
    return;
  // Runs from a global destructor; at process exit the driver may already be
  // gone, which unloads everything anyway.
  CUresult result = cuModuleUnload(static_cast<CUmodule>(module));
  if (result != CUDA_ERROR_DEINITIALIZED)
    checkCu(result, "cuModuleUnload", __func__);
}

namespace {
/// Kernels named `<name>__pdl` (moe-gpu-programmatic-launch) wait for
/// their predecessor on the device (griddepcontrol.wait) and are launched
/// with programmatic stream serialization: they may start while the
/// previous kernel on the stream finishes.
std::mutex programmaticMutex;
std::unordered_set<CUfunction> programmaticKernels;

bool isProgrammatic(CUfunction function) {
  std::lock_guard<std::mutex> lock(programmaticMutex);
  return programmaticKernels.count(function) != 0;
}

/// cuLaunchKernelEx with the given attributes plus, for a programmatic
/// kernel, programmatic stream serialization.
bool launchEx(CUfunction function, intptr_t gridX, intptr_t gridY,
              intptr_t gridZ, intptr_t blockX, intptr_t blockY, intptr_t blockZ,
              int32_t sharedMemBytes, void *stream, void **params, void **extra,
              CUlaunchAttribute *attributes, unsigned numAttributes,
              const char *where) {
  CUlaunchAttribute all[2];
  std::memset(all, 0, sizeof(all));
  unsigned n = 0;
  for (unsigned i = 0; i < numAttributes && n < 2; ++i)
    all[n++] = attributes[i];
  if (isProgrammatic(function) && n < 2) {
    all[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    all[n].value.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  CUlaunchConfig config;
  std::memset(&config, 0, sizeof(config));
  config.gridDimX = static_cast<unsigned>(gridX);
  config.gridDimY = static_cast<unsigned>(gridY);
  config.gridDimZ = static_cast<unsigned>(gridZ);
  config.blockDimX = static_cast<unsigned>(blockX);
  config.blockDimY = static_cast<unsigned>(blockY);
  config.blockDimZ = static_cast<unsigned>(blockZ);
  config.sharedMemBytes = static_cast<unsigned>(sharedMemBytes);
  config.hStream = resolveStream(stream);
  config.attrs = all;
  config.numAttrs = n;
  return checkCu(cuLaunchKernelEx(&config, function, params, extra),
                 "cuLaunchKernelEx", where);
}
} // namespace

extern "C" void *mgpuModuleGetFunction(void *module, const char *name) {
  if (!module) {
    recordError("no module to look up kernel '%s' in; did its load fail? "
                "(in %s)",
                name ? name : "", __func__);
    return nullptr;
  }
  CUfunction function = nullptr;
  if (!CU_CHECK(cuModuleGetFunction, &function, static_cast<CUmodule>(module),
                name))
    return nullptr;
  size_t length = std::strlen(name);
  if (length > 5 && std::strcmp(name + length - 5, "__pdl") == 0) {
    std::lock_guard<std::mutex> lock(programmaticMutex);
    programmaticKernels.insert(function);
  }
  return function;
}

extern "C" void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                                 intptr_t gridZ, intptr_t blockX,
                                 intptr_t blockY, intptr_t blockZ,
                                 int32_t sharedMemBytes, void *stream,
                                 void **params, void **extra,
                                 int64_t /*paramsCount*/) {
  if (skippedAfterFailure())
    return;
  if (!function) {
    recordError("kernel function is null, launch skipped; did the module "
                "load fail? (in %s)",
                __func__);
    return;
  }
  if (gridX == 0 || gridY == 0 || gridZ == 0)
    return;
  if (!checkLaunchDims(__func__, {gridX, gridY, gridZ, blockX, blockY, blockZ}))
    return;
  ContextGuard guard(__func__);
  if (!guard.ok())
    return;
  auto cuFunction = static_cast<CUfunction>(function);
  if (!prepareSharedMemory(cuFunction, sharedMemBytes, __func__))
    return;
  if (isProgrammatic(cuFunction)) {
    launchEx(cuFunction, gridX, gridY, gridZ, blockX, blockY, blockZ,
             sharedMemBytes, stream, params, extra, nullptr, 0, __func__);
    return;
  }
  CU_CHECK(cuLaunchKernel, cuFunction, gridX, gridY, gridZ, blockX, blockY,
           blockZ, sharedMemBytes, resolveStream(stream), params, extra);
}

extern "C" void mgpuLaunchClusterKernel(void *function, intptr_t clusterX,
                                        intptr_t clusterY, intptr_t clusterZ,
                                        intptr_t gridX, intptr_t gridY,
                                        intptr_t gridZ, intptr_t blockX,
                                        intptr_t blockY, intptr_t blockZ,
                                        int32_t sharedMemBytes, void *stream,
                                        void **params, void **extra) {
  if (skippedAfterFailure())
    return;
  if (!function) {
    recordError("kernel function is null, launch skipped; did the module "
                "load fail? (in %s)",
                __func__);
    return;
  }
  if (gridX == 0 || gridY == 0 || gridZ == 0)
    return;
  if (!checkLaunchDims(__func__, {clusterX, clusterY, clusterZ, gridX, gridY,
                                  gridZ, blockX, blockY, blockZ}))
    return;
  // One block per cluster is a plain launch (every block is its own
  // cluster either way); kernels whose cluster size is chosen at run time
  // (the Hopper GEMM: 2 or 1) take the cheaper path for 1.
  if (clusterX * clusterY * clusterZ == 1)
    return mgpuLaunchKernel(function, gridX, gridY, gridZ, blockX, blockY,
                            blockZ, sharedMemBytes, stream, params, extra,
                            /*paramsCount=*/0);
  ContextGuard guard(__func__);
  if (!guard.ok())
    return;
  auto cuFunction = static_cast<CUfunction>(function);
  if (!prepareSharedMemory(cuFunction, sharedMemBytes, __func__))
    return;
  // More than 8 blocks per cluster is "non-portable" and needs an opt-in.
  if (clusterX * clusterY * clusterZ > 8 &&
      !CU_CHECK(cuFuncSetAttribute, cuFunction,
                CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1))
    return;

  CUlaunchAttribute attribute;
  std::memset(&attribute, 0, sizeof(attribute));
  attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attribute.value.clusterDim.x = static_cast<unsigned>(clusterX);
  attribute.value.clusterDim.y = static_cast<unsigned>(clusterY);
  attribute.value.clusterDim.z = static_cast<unsigned>(clusterZ);

  launchEx(cuFunction, gridX, gridY, gridZ, blockX, blockY, blockZ,
           sharedMemBytes, stream, params, extra, &attribute, 1, __func__);
}
