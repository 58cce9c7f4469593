//===- MoeCudaRuntime.cpp - mgpu* host runtime on the CUDA driver ---------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Implements include/moe-mlir/Runtime/MoeCudaRuntime.h on the CUDA driver API.
// Three properties shape this file:
//
//  * Compiled modules call mgpuModuleLoad from a global constructor (at
//    dlopen time) and mgpuModuleUnload from a global destructor, which can run
//    after the C++ static destructors of this library and after the driver
//    has shut down. All state here is therefore constant-initialized and
//    trivially destructible (plain arrays, atomics, std::mutex), and unload
//    tolerates CUDA_ERROR_DEINITIALIZED.
//  * Embedders (PyTorch) hand us their stream and may capture it into a CUDA
//    graph, so memory is stream-ordered (cuMemAllocAsync) and host
//    synchronisation is skipped while that stream captures.
//  * A failure must never pass silently: every driver call is checked, the
//    first failure is kept for moeRuntimeGetLastError and printed to stderr.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Runtime/MoeCudaRuntime.h"

#include <cuda.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace {

//===----------------------------------------------------------------------===//
// Error state
//===----------------------------------------------------------------------===//

constexpr size_t kMessageCapacity = 4096;

std::mutex errorMutex;
bool errorRecorded = false;
char errorMessage[kMessageCapacity];
// The last message printed, so that a loop that keeps failing the same way
// (say, launching from a module that did not load) prints it once.
char lastPrinted[kMessageCapacity];

// Set when this thread records an error, cleared when it reads or clears
// the error (moeRuntimeGetLastError / moeRuntimeClearError). While set, the
// thread issues no more work (launches, copies, fills, allocations): after
// a failed allocation the rest of the call would otherwise launch kernels on
// a null buffer, an illegal address that kills the context for good.
thread_local bool failedInThread = false;

/// Whether this thread must not issue work (see failedInThread).
bool skippedAfterFailure() { return failedInThread; }

void recordError(const char *format, ...) __attribute__((format(printf, 1, 2)));

void recordError(const char *format, ...) {
  char message[kMessageCapacity];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof(message), format, args);
  va_end(args);

  failedInThread = true;
  std::lock_guard<std::mutex> lock(errorMutex);
  if (!errorRecorded) {
    errorRecorded = true;
    std::memcpy(errorMessage, message, sizeof(message));
  }
  if (std::strcmp(lastPrinted, message) != 0) {
    std::fprintf(stderr, "moe-cuda-runtime: %s\n", message);
    std::fflush(stderr);
    std::memcpy(lastPrinted, message, sizeof(message));
  }
}

/// Returns true when `result` is CUDA_SUCCESS; otherwise records
/// "<call> failed: <name>: <description> (in <where>)".
bool checkCu(CUresult result, const char *call, const char *where) {
  if (result == CUDA_SUCCESS)
    return true;
  const char *name = nullptr;
  const char *description = nullptr;
  // Both lookups fail on codes the driver does not know and in the link
  // stub (CUDA_ERROR_STUB_LIBRARY); the number is all there is then.
  char number[32];
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS || !name) {
    std::snprintf(number, sizeof(number), "CUresult %d",
                  static_cast<int>(result));
    name = number;
  }
  if (cuGetErrorString(result, &description) != CUDA_SUCCESS || !description)
    description = "no description";
  recordError("%s failed: %s: %s (in %s)", call, name, description, where);
  return false;
}

// `CU_CHECK(cuFoo, a, b)` calls cuFoo(a, b) and checks it, naming the
// enclosing mgpu*/moeRuntime* function as the place of failure;
// CU_CHECK_AT names `where` instead (in a helper of several entry points).
#define CU_CHECK_AT(where, fn, ...) checkCu(fn(__VA_ARGS__), #fn, where)
#define CU_CHECK(fn, ...) CU_CHECK_AT(__func__, fn, __VA_ARGS__)

//===----------------------------------------------------------------------===//
// Contexts
//===----------------------------------------------------------------------===//

constexpr int kMaxDevices = 64;

std::mutex initMutex;
std::atomic<bool> driverReady{false};
std::atomic<int32_t> defaultDevice{0};
// Retained primary contexts, by device ordinal; never released (the driver
// drops them at process exit).
std::atomic<CUcontext> primaryContexts[kMaxDevices];

/// Returns the primary context of the default device, initializing the driver
/// and retaining the context on first use; null (error recorded) on failure.
CUcontext getPrimaryContext(const char *where) {
  int32_t device = defaultDevice.load(std::memory_order_relaxed);
  if (device < 0 || device >= kMaxDevices) {
    recordError("device %d is out of range [0, %d) (in %s)", device,
                kMaxDevices, where);
    return nullptr;
  }
  if (driverReady.load(std::memory_order_acquire)) {
    if (CUcontext context =
            primaryContexts[device].load(std::memory_order_acquire))
      return context;
  }

  std::lock_guard<std::mutex> lock(initMutex);
  if (!driverReady.load(std::memory_order_relaxed)) {
    if (!checkCu(cuInit(0), "cuInit", where))
      return nullptr;
    driverReady.store(true, std::memory_order_release);
  }
  if (CUcontext context = primaryContexts[device].load())
    return context;
  CUdevice cuDevice;
  if (!checkCu(cuDeviceGet(&cuDevice, device), "cuDeviceGet", where))
    return nullptr;
  CUcontext context = nullptr;
  if (!checkCu(cuDevicePrimaryCtxRetain(&context, cuDevice),
               "cuDevicePrimaryCtxRetain", where))
    return nullptr;
  primaryContexts[device].store(context, std::memory_order_release);
  return context;
}

/// Makes the runtime's context current for one entry point. When the thread
/// has no current context, ours is made current and left so (what the CUDA
/// runtime would pick for the device too); when another one is current, ours
/// is pushed and popped again at scope exit.
class ContextGuard {
public:
  explicit ContextGuard(const char *where) : where(where) {
    CUcontext context = getPrimaryContext(where);
    if (!context)
      return;
    CUcontext current = nullptr;
    if (!checkCu(cuCtxGetCurrent(&current), "cuCtxGetCurrent", where))
      return;
    if (current == context) {
      valid = true;
    } else if (!current) {
      valid = checkCu(cuCtxSetCurrent(context), "cuCtxSetCurrent", where);
    } else {
      pushed = checkCu(cuCtxPushCurrent(context), "cuCtxPushCurrent", where);
      valid = pushed;
    }
  }
  ~ContextGuard() {
    if (pushed)
      checkCu(cuCtxPopCurrent(nullptr), "cuCtxPopCurrent", where);
  }
  ContextGuard(const ContextGuard &) = delete;
  ContextGuard &operator=(const ContextGuard &) = delete;

  bool ok() const { return valid; }

private:
  const char *where;
  bool valid = false;
  bool pushed = false;
};

//===----------------------------------------------------------------------===//
// Streams
//===----------------------------------------------------------------------===//

// Set by moeRuntimeSetStream; per thread, like the current stream of PyTorch
// and of the CUDA runtime.
thread_local CUstream embedderStream = nullptr;

/// Work that the IR issues without a stream goes to the embedder's stream.
CUstream resolveStream(void *stream) {
  return stream ? static_cast<CUstream>(stream) : embedderStream;
}

/// True when the embedder's stream is being captured into a graph, so that
/// host synchronisation must not happen.
bool embedderStreamIsCapturing(const char *where) {
  if (!embedderStream)
    return false;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!checkCu(cuStreamIsCapturing(embedderStream, &status),
               "cuStreamIsCapturing", where))
    return false;
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

//===----------------------------------------------------------------------===//
// Launch helpers
//===----------------------------------------------------------------------===//

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

/// The bytes one element of each CUtensorMapDataType takes (the packed
/// sub-byte types are not supported).
int64_t tensorMapElementBytes(int64_t dataType) {
  static constexpr int64_t kBytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  if (dataType < 0 ||
      dataType >= static_cast<int64_t>(sizeof(kBytes) / sizeof(kBytes[0])))
    return 0;
  return kBytes[dataType];
}

/// A ranked memref descriptor viewed through its common prefix; sizes and
/// strides follow `offset` as 2 * rank int64_t.
struct MemRefDescriptorPrefix {
  char *allocated;
  char *aligned;
  int64_t offset;
  int64_t sizesAndStrides[1];
};

/// The first byte and the byte length a ranked memref descriptor spans;
/// false (error recorded) for negative strides.
bool memRefSpan(int64_t rank, void *descriptor, int64_t elementSizeBytes,
                const char *where, char **begin, uint64_t *bytes) {
  auto *memref = static_cast<MemRefDescriptorPrefix *>(descriptor);
  const int64_t *sizes = memref->sizesAndStrides;
  const int64_t *strides = memref->sizesAndStrides + rank;
  *begin = memref->aligned + memref->offset * elementSizeBytes;
  int64_t lastElement = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (sizes[i] == 0) {
      *bytes = 0;
      return true;
    }
    if (strides[i] < 0) {
      recordError("memref with negative stride %lld (in %s)",
                  static_cast<long long>(strides[i]), where);
      return false;
    }
    lastElement += (sizes[i] - 1) * strides[i];
  }
  *bytes = static_cast<uint64_t>(lastElement + 1) * elementSizeBytes;
  return true;
}

/// Page-locks (`lock`) or unlocks the host bytes a ranked memref descriptor
/// spans (cuMemHostRegister / cuMemHostUnregister); nothing for an empty
/// memref.
void setMemRefPageLocked(bool lock, int64_t rank, void *descriptor,
                         int64_t elementSizeBytes, const char *where) {
  char *begin = nullptr;
  uint64_t bytes = 0;
  if (!memRefSpan(rank, descriptor, elementSizeBytes, where, &begin, &bytes) ||
      bytes == 0)
    return;
  ContextGuard guard(where);
  if (!guard.ok())
    return;
  if (lock)
    CU_CHECK_AT(where, cuMemHostRegister, begin, bytes, 0);
  else
    CU_CHECK_AT(where, cuMemHostUnregister, begin);
}

/// A stream or event made by `create(&handle, flags)` (the driver call
/// `call`, e.g. cuStreamCreate) in the runtime's context; null (error
/// recorded) on failure.
template <typename Handle>
Handle createInContext(CUresult (*create)(Handle *, unsigned), unsigned flags,
                       const char *call, const char *where) {
  ContextGuard guard(where);
  if (!guard.ok())
    return nullptr;
  Handle handle = nullptr;
  if (!checkCu(create(&handle, flags), call, where))
    return nullptr;
  return handle;
}

/// False (error recorded) for a null event handle.
bool checkEvent(void *event, const char *where) {
  if (event)
    return true;
  recordError("null event (in %s)", where);
  return false;
}

// Device copies of tensor maps, keyed by the map's bytes (which include the
// global address) and the context; never freed, since a captured graph may
// still refer to them. Allocated once and leaked on purpose (see the file
// comment on destruction order).
std::mutex tensorMapMutex;
std::unordered_map<std::string, CUdeviceptr> *tensorMapCache = nullptr;

} // namespace

//===----------------------------------------------------------------------===//
// Embedder API
//===----------------------------------------------------------------------===//

extern "C" void moeRuntimeSetStream(void *cuStream) {
  embedderStream = static_cast<CUstream>(cuStream);
}

extern "C" void *moeRuntimeGetStream(void) { return embedderStream; }

extern "C" const char *moeRuntimeGetLastError(void) {
  failedInThread = false;
  std::lock_guard<std::mutex> lock(errorMutex);
  return errorRecorded ? errorMessage : nullptr;
}

extern "C" void moeRuntimeClearError(void) {
  failedInThread = false;
  std::lock_guard<std::mutex> lock(errorMutex);
  errorRecorded = false;
  errorMessage[0] = '\0';
  lastPrinted[0] = '\0';
}

extern "C" void moeRuntimeReportShapeError(const char *message, int64_t a,
                                           int64_t b) {
  // The compiler's message is a printf format of the two sizes
  // (moe-emit-shape-checks).
  char text[kMessageCapacity];
  std::snprintf(text, sizeof(text), message ? message : "shape check failed",
                static_cast<long long>(a), static_cast<long long>(b));
  recordError("shape check failed: %s (no work done, no output written)", text);
}

extern "C" int moeRuntimeSynchronize(void) {
  ContextGuard guard(__func__);
  if (!guard.ok())
    return -1;
  CUresult result = cuCtxSynchronize();
  if (!checkCu(result, "cuCtxSynchronize", __func__))
    return static_cast<int>(result);
  return moeRuntimeGetLastError() ? -1 : 0;
}

//===----------------------------------------------------------------------===//
// Modules and kernels
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

extern "C" void *mgpuStreamCreate(void) {
  if (embedderStream)
    return embedderStream;
  // A blocking stream: it orders after work on the legacy default stream,
  // where an embedder that did not set a stream most likely put its inputs.
  return createInContext(cuStreamCreate, CU_STREAM_DEFAULT, "cuStreamCreate",
                         __func__);
}

extern "C" void mgpuStreamDestroy(void *stream) {
  if (!stream || stream == embedderStream)
    return;
  CU_CHECK(cuStreamDestroy, static_cast<CUstream>(stream));
}

extern "C" void mgpuStreamSynchronize(void *stream) {
  CUstream cuStream = resolveStream(stream);
  // On the embedder's stream a compiled call is asynchronous, like any op
  // of the embedder (later work on that stream is ordered after it; the
  // embedder synchronises when it needs the host to wait), so the call
  // never blocks the host and stays graph-capturable.
  if (embedderStream && cuStream == embedderStream)
    return;
  ContextGuard guard(__func__);
  if (!guard.ok())
    return;
  CU_CHECK(cuStreamSynchronize, cuStream);
}

extern "C" void mgpuStreamWaitEvent(void *stream, void *event) {
  if (!checkEvent(event, __func__))
    return;
  CU_CHECK(cuStreamWaitEvent, resolveStream(stream),
           static_cast<CUevent>(event), 0);
}

extern "C" void *mgpuEventCreate(void) {
  return createInContext(cuEventCreate, CU_EVENT_DISABLE_TIMING,
                         "cuEventCreate", __func__);
}

extern "C" void mgpuEventDestroy(void *event) {
  if (!event)
    return;
  CU_CHECK(cuEventDestroy, static_cast<CUevent>(event));
}

extern "C" void mgpuEventSynchronize(void *event) {
  if (!checkEvent(event, __func__))
    return;
  if (embedderStreamIsCapturing(__func__))
    return;
  CU_CHECK(cuEventSynchronize, static_cast<CUevent>(event));
}

extern "C" void mgpuEventRecord(void *event, void *stream) {
  if (!checkEvent(event, __func__))
    return;
  CU_CHECK(cuEventRecord, static_cast<CUevent>(event), resolveStream(stream));
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

extern "C" void *mgpuMemAlloc(uint64_t sizeBytes, void *stream,
                              int8_t hostShared) {
  if (hostShared) {
    recordError("host-shared allocation not supported (gpu.alloc host_shared; "
                "in %s)",
                __func__);
    return nullptr;
  }
  if (sizeBytes == 0 || skippedAfterFailure())
    return nullptr;
  ContextGuard guard(__func__);
  if (!guard.ok())
    return nullptr;
  CUdeviceptr pointer = 0;
  if (!CU_CHECK(cuMemAllocAsync, &pointer, sizeBytes, resolveStream(stream)))
    return nullptr;
  return reinterpret_cast<void *>(pointer);
}

extern "C" void mgpuMemFree(void *ptr, void *stream) {
  if (!ptr)
    return;
  ContextGuard guard(__func__);
  if (!guard.ok())
    return;
  CU_CHECK(cuMemFreeAsync, reinterpret_cast<CUdeviceptr>(ptr),
           resolveStream(stream));
}

extern "C" void mgpuMemcpy(void *dst, void *src, uint64_t sizeBytes,
                           void *stream) {
  if (sizeBytes == 0 || skippedAfterFailure())
    return;
  ContextGuard guard(__func__);
  if (!guard.ok())
    return;
  CU_CHECK(cuMemcpyAsync, reinterpret_cast<CUdeviceptr>(dst),
           reinterpret_cast<CUdeviceptr>(src), sizeBytes,
           resolveStream(stream));
}

extern "C" void mgpuMemset32(void *dst, uint32_t value, uint64_t count,
                             void *stream) {
  if (count == 0 || skippedAfterFailure())
    return;
  ContextGuard guard(__func__);
  if (!guard.ok())
    return;
  CU_CHECK(cuMemsetD32Async, reinterpret_cast<CUdeviceptr>(dst), value, count,
           resolveStream(stream));
}

extern "C" void mgpuMemset16(void *dst, uint16_t value, uint64_t count,
                             void *stream) {
  if (count == 0 || skippedAfterFailure())
    return;
  ContextGuard guard(__func__);
  if (!guard.ok())
    return;
  CU_CHECK(cuMemsetD16Async, reinterpret_cast<CUdeviceptr>(dst), value, count,
           resolveStream(stream));
}

namespace {
// Module constants held on the device (moeRuntimeUploadConstant).
std::atomic<int64_t> constantsHeld{0};
std::atomic<int64_t> constantBytesHeld{0};
std::atomic<int64_t> constantUploads{0};
} // namespace

extern "C" void *moeRuntimeUploadConstant(const void *host,
                                          uint64_t sizeBytes) {
  if (sizeBytes == 0)
    return nullptr;
  if (!host) {
    recordError("no host data for a %llu-byte constant (in %s)",
                static_cast<unsigned long long>(sizeBytes), __func__);
    return nullptr;
  }
  ContextGuard guard(__func__);
  if (!guard.ok())
    return nullptr;
  CUdeviceptr pointer = 0;
  if (!CU_CHECK(cuMemAlloc, &pointer, sizeBytes))
    return nullptr;
  if (!CU_CHECK(cuMemcpyHtoD, pointer, host, sizeBytes)) {
    cuMemFree(pointer);
    return nullptr;
  }
  // counted as the free counts it: the allocation's size
  size_t allocated = sizeBytes;
  cuMemGetAddressRange(nullptr, &allocated, pointer);
  constantsHeld.fetch_add(1);
  constantBytesHeld.fetch_add(static_cast<int64_t>(allocated));
  constantUploads.fetch_add(1);
  return reinterpret_cast<void *>(pointer);
}

extern "C" void moeRuntimeFreeConstant(void *ptr) {
  if (!ptr)
    return;
  // Runs from a global destructor: at process exit the driver may be gone
  // (CUDA_ERROR_DEINITIALIZED), which frees everything anyway. The pointer's
  // own context is made current for the free.
  auto device = reinterpret_cast<CUdeviceptr>(ptr);
  CUcontext context = nullptr;
  CUresult result =
      cuPointerGetAttribute(&context, CU_POINTER_ATTRIBUTE_CONTEXT, device);
  if (result == CUDA_ERROR_DEINITIALIZED)
    return;
  if (!checkCu(result, "cuPointerGetAttribute", __func__) ||
      !checkCu(cuCtxPushCurrent(context), "cuCtxPushCurrent", __func__))
    return;
  size_t bytes = 0;
  cuMemGetAddressRange(nullptr, &bytes, device);
  if (checkCu(cuMemFree(device), "cuMemFree", __func__)) {
    constantsHeld.fetch_sub(1);
    constantBytesHeld.fetch_sub(static_cast<int64_t>(bytes));
  }
  cuCtxPopCurrent(nullptr);
}

extern "C" int64_t moeRuntimeConstantsHeld(int64_t *bytes) {
  if (bytes)
    *bytes = constantBytesHeld.load();
  return constantsHeld.load();
}

extern "C" int64_t moeRuntimeConstantUploads(void) {
  return constantUploads.load();
}

extern "C" void mgpuMemHostRegisterMemRef(int64_t rank, void *descriptor,
                                          int64_t elementSizeBytes) {
  setMemRefPageLocked(/*lock=*/true, rank, descriptor, elementSizeBytes,
                      __func__);
}

extern "C" void mgpuMemHostUnregisterMemRef(int64_t rank, void *descriptor,
                                            int64_t elementSizeBytes) {
  setMemRefPageLocked(/*lock=*/false, rank, descriptor, elementSizeBytes,
                      __func__);
}

//===----------------------------------------------------------------------===//
// Devices and TMA
//===----------------------------------------------------------------------===//

extern "C" void mgpuSetDefaultDevice(int32_t device) {
  defaultDevice.store(device, std::memory_order_relaxed);
}

static void *cachedTensorMap(const CUtensorMap &map, const char *where);

/// Encodes a tiled tensor map into `map` (dimensions innermost first,
/// strides of dimensions 1.. in bytes, unit element strides); false (error
/// recorded) on failure.
static bool encodeTiled(CUtensorMap &map, int64_t rank, void *address,
                        int64_t dataType, const cuuint64_t *globalDim,
                        const cuuint64_t *globalStrides,
                        const cuuint32_t *boxDim, int64_t interleave,
                        int64_t swizzle, int64_t l2Promotion, int64_t oobFill,
                        const char *where) {
  const cuuint32_t elementStrides[5] = {1, 1, 1, 1, 1};
  ContextGuard guard(where);
  if (!guard.ok())
    return false;
  std::memset(&map, 0, sizeof(map));
  return checkCu(
      cuTensorMapEncodeTiled(&map, static_cast<CUtensorMapDataType>(dataType),
                             static_cast<cuuint32_t>(rank), address, globalDim,
                             globalStrides, boxDim, elementStrides,
                             static_cast<CUtensorMapInterleave>(interleave),
                             static_cast<CUtensorMapSwizzle>(swizzle),
                             static_cast<CUtensorMapL2promotion>(l2Promotion),
                             static_cast<CUtensorMapFloatOOBfill>(oobFill)),
      "cuTensorMapEncodeTiled", where);
}

/// encodeTiled, then the map's cached device copy; null on failure.
static void *encodeTiledTensorMap(int64_t rank, void *address, int64_t dataType,
                                  const cuuint64_t *globalDim,
                                  const cuuint64_t *globalStrides,
                                  const cuuint32_t *boxDim, int64_t interleave,
                                  int64_t swizzle, int64_t l2Promotion,
                                  int64_t oobFill, const char *where) {
  CUtensorMap map;
  if (!encodeTiled(map, rank, address, dataType, globalDim, globalStrides,
                   boxDim, interleave, swizzle, l2Promotion, oobFill, where))
    return nullptr;
  return cachedTensorMap(map, where);
}

extern "C" void *mgpuTensorMapEncodeTiledMemref(
    int64_t rank, void *descriptor, int64_t dataType, int64_t interleave,
    int64_t swizzle, int64_t l2Promotion, int64_t oobFill, int64_t *boxDims) {
  if (rank < 1 || rank > 5) {
    recordError("tensor map rank %lld is out of range [1, 5] (in %s)",
                static_cast<long long>(rank), __func__);
    return nullptr;
  }
  int64_t elementBytes = tensorMapElementBytes(dataType);
  if (elementBytes == 0) {
    recordError("unsupported tensor map data type %lld (in %s)",
                static_cast<long long>(dataType), __func__);
    return nullptr;
  }
  auto *memref = static_cast<MemRefDescriptorPrefix *>(descriptor);
  const int64_t *sizes = memref->sizesAndStrides;
  const int64_t *strides = memref->sizesAndStrides + rank;
  if (strides[rank - 1] != 1) {
    recordError("tensor map needs a unit innermost stride, got %lld (in %s)",
                static_cast<long long>(strides[rank - 1]), __func__);
    return nullptr;
  }

  // The driver orders dimensions innermost first; memrefs outermost first.
  cuuint64_t globalDim[5] = {1, 1, 1, 1, 1};
  cuuint64_t globalStrides[4] = {0, 0, 0, 0};
  cuuint32_t boxDim[5] = {1, 1, 1, 1, 1};
  for (int64_t i = 0; i < rank; ++i) {
    globalDim[i] = static_cast<cuuint64_t>(sizes[rank - 1 - i]);
    boxDim[i] = static_cast<cuuint32_t>(boxDims[rank - 1 - i]);
  }
  for (int64_t i = 0; i + 1 < rank; ++i)
    globalStrides[i] =
        static_cast<cuuint64_t>(strides[rank - 2 - i] * elementBytes);
  void *globalAddress = memref->aligned + memref->offset * elementBytes;
  return encodeTiledTensorMap(rank, globalAddress, dataType, globalDim,
                              globalStrides, boxDim, interleave, swizzle,
                              l2Promotion, oobFill, __func__);
}

/// A device copy of `map`, one per distinct map and context (maps describe
/// weights: the same few are asked for on every call). Needs a current
/// context; null (error recorded) on failure.
static void *cachedTensorMap(const CUtensorMap &map, const char *where) {
  CUcontext context = getPrimaryContext(where);
  std::string key(reinterpret_cast<const char *>(&map), sizeof(map));
  key.append(reinterpret_cast<const char *>(&context), sizeof(context));
  std::lock_guard<std::mutex> lock(tensorMapMutex);
  if (!tensorMapCache)
    tensorMapCache = new std::unordered_map<std::string, CUdeviceptr>();
  auto it = tensorMapCache->find(key);
  if (it != tensorMapCache->end())
    return reinterpret_cast<void *>(it->second);
  CUdeviceptr deviceMap = 0;
  if (!CU_CHECK(cuMemAlloc, &deviceMap, sizeof(map)))
    return nullptr;
  if (!CU_CHECK(cuMemcpyHtoD, deviceMap, &map, sizeof(map))) {
    cuMemFree(deviceMap);
    return nullptr;
  }
  tensorMapCache->emplace(std::move(key), deviceMap);
  return reinterpret_cast<void *>(deviceMap);
}

namespace {
/// A 3-D tensor map's dimensions, strides and box in the driver's form.
struct Map3D {
  cuuint64_t globalDim[3];
  cuuint64_t globalStrides[2];
  cuuint32_t boxDim[3];
};
} // namespace

/// moeRuntimeTensorMap3D's arguments in the driver's form; false when the
/// layout cannot be described (recorded as an error only for a data type,
/// box or promotion no caller should pass).
static bool map3D(Map3D &m, void *address, int64_t dataType, int64_t dim0,
                  int64_t dim1, int64_t dim2, int64_t stride1, int64_t stride2,
                  int64_t box0, int64_t box1, int64_t box2, int64_t l2Promotion,
                  const char *where) {
  // Layouts TMA cannot describe are not errors: the caller then takes its
  // non-TMA path.
  auto bits = reinterpret_cast<uintptr_t>(address);
  if (bits % 16 || stride1 % 16 || stride2 % 16 || dim0 <= 0 || dim1 <= 0 ||
      dim2 <= 0 || stride1 <= 0 || stride2 <= 0 ||
      stride1 >= (int64_t(1) << 40) || stride2 >= (int64_t(1) << 40))
    return false;
  if (tensorMapElementBytes(dataType) == 0 || box0 < 1 || box0 > 256 ||
      box1 < 1 || box1 > 256 || box2 < 1 || box2 > 256) {
    recordError("unsupported tensor map (data type %lld, box %lld x %lld x "
                "%lld) (in %s)",
                static_cast<long long>(dataType), static_cast<long long>(box0),
                static_cast<long long>(box1), static_cast<long long>(box2),
                where);
    return false;
  }
  if (l2Promotion < CU_TENSOR_MAP_L2_PROMOTION_NONE ||
      l2Promotion > CU_TENSOR_MAP_L2_PROMOTION_L2_256B) {
    recordError("unsupported tensor map L2 promotion %lld (in %s)",
                static_cast<long long>(l2Promotion), where);
    return false;
  }
  m = Map3D{
      {static_cast<cuuint64_t>(dim0), static_cast<cuuint64_t>(dim1),
       static_cast<cuuint64_t>(dim2)},
      {static_cast<cuuint64_t>(stride1), static_cast<cuuint64_t>(stride2)},
      {static_cast<cuuint32_t>(box0), static_cast<cuuint32_t>(box1),
       static_cast<cuuint32_t>(box2)}};
  return true;
}

extern "C" void *moeRuntimeTensorMap3D(void *address, int64_t dataType,
                                       int64_t dim0, int64_t dim1, int64_t dim2,
                                       int64_t stride1, int64_t stride2,
                                       int64_t box0, int64_t box1, int64_t box2,
                                       int64_t swizzle, int64_t l2Promotion) {
  Map3D m;
  if (!map3D(m, address, dataType, dim0, dim1, dim2, stride1, stride2, box0,
             box1, box2, l2Promotion, __func__))
    return nullptr;
  return encodeTiledTensorMap(
      3, address, dataType, m.globalDim, m.globalStrides, m.boxDim,
      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, l2Promotion,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE, __func__);
}

extern "C" int64_t moeRuntimeEncodeTensorMap3D(
    void *out, void *address, int64_t dataType, int64_t dim0, int64_t dim1,
    int64_t dim2, int64_t stride1, int64_t stride2, int64_t box0, int64_t box1,
    int64_t box2, int64_t swizzle, int64_t l2Promotion) {
  CUtensorMap map;
  std::memset(&map, 0, sizeof(map));
  Map3D m;
  bool ok =
      map3D(m, address, dataType, dim0, dim1, dim2, stride1, stride2, box0,
            box1, box2, l2Promotion, __func__) &&
      encodeTiled(map, 3, address, dataType, m.globalDim, m.globalStrides,
                  m.boxDim, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, l2Promotion,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE, __func__);
  if (!ok)
    std::memset(&map, 0, sizeof(map));
  std::memcpy(out, &map, sizeof(map));
  return ok ? 1 : 0;
}
