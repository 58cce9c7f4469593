//===- RuntimeInternal.h - shared internals of the CUDA runtime -*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Implements include/moe-mlir/Runtime/MoeCudaRuntime.h on the CUDA driver API,
// in one file per concern:
//
//   Errors.cpp      the error state: the first failure, kept for
//                   moeRuntimeGetLastError and printed to stderr; the
//                   per-thread stop after a failure; shape-check reports
//   Context.cpp     driver initialisation, the default device's primary
//                   context (ContextGuard), moeRuntimeSynchronize
//   Streams.cpp     the embedder's stream (moeRuntimeSetStream), streams
//                   and events
//   Kernels.cpp     module load / unload, kernel lookup and launches (plain,
//                   cluster, programmatic)
//   Memory.cpp      stream-ordered device memory, copies and fills, module
//                   constants, page-locking host memrefs
//   TensorMaps.cpp  TMA tensor maps and their cached device copies
//
// The sources are compiled as one translation unit (a unity build, see
// CMakeLists.txt), so that libmoe_cuda_runtime.a holds one object: every
// library linked with it gets every entry point, not only those its code
// calls.
//
// Three properties shape the runtime:
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

#ifndef MOE_MLIR_LIB_RUNTIME_CUDA_RUNTIMEINTERNAL_H
#define MOE_MLIR_LIB_RUNTIME_CUDA_RUNTIMEINTERNAL_H

#include <cuda.h>

#include <cstdint>

// Hidden: the libraries export the C API of MoeCudaRuntime.h only.
#pragma GCC visibility push(hidden)

namespace moe::cuda_runtime {

//===----------------------------------------------------------------------===//
// Errors (Errors.cpp)
//===----------------------------------------------------------------------===//

/// Whether this thread must not issue work: it recorded an error and has
/// not read or cleared it since (moeRuntimeGetLastError /
/// moeRuntimeClearError).
bool skippedAfterFailure();

/// Records a printf-formatted error: kept when it is the first, printed to
/// stderr unless it repeats the last message printed; the thread then issues
/// no more work (skippedAfterFailure).
void recordError(const char *format, ...) __attribute__((format(printf, 1, 2)));

/// Returns true when `result` is CUDA_SUCCESS; otherwise records
/// "<call> failed: <name>: <description> (in <where>)".
bool checkCu(CUresult result, const char *call, const char *where);

// `CU_CHECK(cuFoo, a, b)` calls cuFoo(a, b) and checks it, naming the
// enclosing mgpu*/moeRuntime* function as the place of failure;
// CU_CHECK_AT names `where` instead (in a helper of several entry points).
#define CU_CHECK_AT(where, fn, ...) checkCu(fn(__VA_ARGS__), #fn, where)
#define CU_CHECK(fn, ...) CU_CHECK_AT(__func__, fn, __VA_ARGS__)

//===----------------------------------------------------------------------===//
// Contexts (Context.cpp)
//===----------------------------------------------------------------------===//

/// Returns the primary context of the default device, initializing the driver
/// and retaining the context on first use; null (error recorded) on failure.
CUcontext getPrimaryContext(const char *where);

/// Makes the runtime's context current for one entry point. When the thread
/// has no current context, ours is made current and left so (what the CUDA
/// runtime would pick for the device too); when another one is current, ours
/// is pushed and popped again at scope exit.
class ContextGuard {
public:
  explicit ContextGuard(const char *where);
  ~ContextGuard();
  ContextGuard(const ContextGuard &) = delete;
  ContextGuard &operator=(const ContextGuard &) = delete;

  bool ok() const { return valid; }

private:
  const char *where;
  bool valid = false;
  bool pushed = false;
};

//===----------------------------------------------------------------------===//
// Streams (Streams.cpp)
//===----------------------------------------------------------------------===//

/// Work that the IR issues without a stream goes to the embedder's stream.
CUstream resolveStream(void *stream);

/// The embedder's stream while it is being captured into a graph (work
/// must then be stream-ordered on it, with no host synchronisation);
/// null otherwise.
CUstream capturingEmbedderStream(const char *where);

//===----------------------------------------------------------------------===//
// Memrefs (Memory.cpp, TensorMaps.cpp)
//===----------------------------------------------------------------------===//

/// A ranked memref descriptor viewed through its common prefix; sizes and
/// strides follow `offset` as 2 * rank int64_t.
struct MemRefDescriptorPrefix {
  char *allocated;
  char *aligned;
  int64_t offset;
  int64_t sizesAndStrides[1];
};

} // namespace moe::cuda_runtime

#pragma GCC visibility pop

#endif // MOE_MLIR_LIB_RUNTIME_CUDA_RUNTIMEINTERNAL_H
