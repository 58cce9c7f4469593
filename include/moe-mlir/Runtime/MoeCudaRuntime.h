/*===- MoeCudaRuntime.h - mgpu* host runtime on the CUDA driver ---*- C -*-===*\
|*                                                                            *|
|* Part of the moe-mlir project.                                              *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* The C ABI that host code lowered by MLIR's `gpu-to-llvm` (and the GPU      *|
|* offloading translation of `mlir-translate`) calls into, implemented on the *|
|* CUDA driver API, plus a few entry points for embedders (PyTorch, C++).     *|
|*                                                                            *|
|* Every signature below matches what MLIR 22 emits; the comment on each one  *|
|* names the IR type it is called with. Handles are opaque `void *` (CUmodule,*|
|* CUfunction, CUstream, CUevent) so that this header needs no `cuda.h`.      *|
|*                                                                            *|
|* Contexts: the runtime uses the primary context of the default device       *|
|* (device 0 unless `mgpuSetDefaultDevice` says otherwise), the same context  *|
|* the CUDA runtime API and PyTorch use, so device pointers and streams can   *|
|* be shared with them.                                                       *|
|*                                                                            *|
|* Errors: every driver call is checked. The first failure since the last     *|
|* `moeRuntimeClearError` is kept and printed once to stderr, in the form     *|
|* "<call> failed: <name>: <description> (in mgpuXxx)". Nothing aborts.       *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef MOE_MLIR_RUNTIME_MOECUDARUNTIME_H
#define MOE_MLIR_RUNTIME_MOECUDARUNTIME_H

#include <stdint.h>

#if defined(_WIN32)
#define MOE_CUDA_RUNTIME_EXPORT __declspec(dllexport)
#else
#define MOE_CUDA_RUNTIME_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*\
|* Embedder API                                                               *|
\*===----------------------------------------------------------------------===*/

/// Makes `cuStream` (a CUstream, e.g.
/// `torch.cuda.current_stream().cuda_stream`; pass CU_STREAM_LEGACY, i.e. (void
/// *)1, for the legacy default stream) the stream of all work issued by
/// compiled code on the calling thread: `mgpuStreamCreate` returns it,
/// `mgpuStreamDestroy` leaves it alone, `mgpuStreamSynchronize` on it does
/// nothing (a compiled call is then asynchronous on the embedder's stream, like
/// the embedder's own ops: it never blocks the host and can be captured into a
/// CUDA graph; synchronise the stream, or call moeRuntimeSynchronize, before
/// reading results on the host) and `mgpuEventSynchronize` does nothing while
/// it is being captured. Work issued with a null stream also goes to it. NULL
/// restores the default: one new stream per `mgpuStreamCreate`, synchronised at
/// the end of each call.
MOE_CUDA_RUNTIME_EXPORT void moeRuntimeSetStream(void *cuStream);

/// The stream set by `moeRuntimeSetStream` on this thread, or NULL.
MOE_CUDA_RUNTIME_EXPORT void *moeRuntimeGetStream(void);

/// The first error recorded since the last `moeRuntimeClearError`, or NULL.
/// The string stays valid until the next `moeRuntimeClearError`.
///
/// Once a thread has recorded an error (a failed allocation, say), the
/// runtime issues no more work from that thread (launches, copies, fills and
/// allocations are skipped; frees still run, so nothing leaks) until the
/// thread calls `moeRuntimeGetLastError` or `moeRuntimeClearError`: the rest
/// of the failed call does not run kernels on buffers that do not exist.
MOE_CUDA_RUNTIME_EXPORT const char *moeRuntimeGetLastError(void);

/// Forgets the recorded error.
MOE_CUDA_RUNTIME_EXPORT void moeRuntimeClearError(void);

/// Called by compiled code when a run-time shape check fails (the dynamic
/// sizes of a public function's arguments disagree: `x` and `logits` with
/// different row counts, say): records `message`, a printf format of the
/// two sizes (`%lld` each, written by moe-emit-shape-checks) applied to
/// `a` and `b`, for `moeRuntimeGetLastError`. The compiled
/// function then returns before it launches anything or writes an output.
MOE_CUDA_RUNTIME_EXPORT void moeRuntimeReportShapeError(const char *message,
                                                        int64_t a, int64_t b);

/// Waits for all work of the runtime's context (cuCtxSynchronize), which also
/// surfaces faults of kernels launched asynchronously. Returns 0 when that
/// succeeds and no error is recorded, the CUresult of the failure when it
/// fails, and -1 when it succeeds but an earlier error is still recorded.
MOE_CUDA_RUNTIME_EXPORT int moeRuntimeSynchronize(void);

/// A TMA tensor map of a 3-D tensor (dims innermost first, strides of dims
/// 1 and 2 in bytes, box in elements, `swizzle` a CUtensorMapSwizzle,
/// `l2Promotion` a CUtensorMapL2promotion) in
/// device memory, cached per distinct map: what the compiled Hopper GEMMs
/// load their weights with. Null when the layout cannot be described
/// (address or strides not 16-byte aligned), so the caller can take another
/// path. The first call for a map allocates and copies (not allowed while
/// the stream is being captured); later calls touch no stream.
MOE_CUDA_RUNTIME_EXPORT void *
moeRuntimeTensorMap3D(void *address, int64_t dataType, int64_t dim0,
                      int64_t dim1, int64_t dim2, int64_t stride1,
                      int64_t stride2, int64_t box0, int64_t box1, int64_t box2,
                      int64_t swizzle, int64_t l2Promotion);

/// The same map encoded into the 128 bytes at `out` (host memory) instead
/// of device memory: for tensors whose address or rows change from call to
/// call (activations), for a kernel to take as a by-value
/// `__grid_constant__` parameter. (No kernel the compiler emits today does:
/// the lhs tiles by TMA were measured no faster, bench/NOTES.md v56; the
/// entry point stays for embedders and the low-precision engines.) Touches
/// no device memory and no stream. Returns 1, or 0 (out zeroed) when the layout
/// cannot be described.
MOE_CUDA_RUNTIME_EXPORT int64_t moeRuntimeEncodeTensorMap3D(
    void *out, void *address, int64_t dataType, int64_t dim0, int64_t dim1,
    int64_t dim2, int64_t stride1, int64_t stride2, int64_t box0, int64_t box1,
    int64_t box2, int64_t swizzle, int64_t l2Promotion);

/*===----------------------------------------------------------------------===*\
|* Modules and kernels                                                        *|
\*===----------------------------------------------------------------------===*/

/// Loads a cubin / fatbin (`gpu-module-to-binary format=bin|fatbin`); called
/// from a global constructor of the compiled code.      (ptr, i64) -> ptr
MOE_CUDA_RUNTIME_EXPORT void *mgpuModuleLoad(void *data, int64_t sizeBytes);

/// JIT-compiles and loads PTX (`format=isa`) at optimization level
/// `optLevel` (0-4).                                      (ptr, i32) -> ptr
MOE_CUDA_RUNTIME_EXPORT void *mgpuModuleLoadJIT(void *ptx, int32_t optLevel);

///                                                                (ptr) -> ()
MOE_CUDA_RUNTIME_EXPORT void mgpuModuleUnload(void *module);

/// Returns NULL (and records an error) when `module` is NULL or has no such
/// kernel.                                                 (ptr, ptr) -> ptr
MOE_CUDA_RUNTIME_EXPORT void *mgpuModuleGetFunction(void *module,
                                                    const char *name);

/// Launches `function`; skipped without error when a grid dimension is 0,
/// skipped with an error when `function` is NULL. `paramsCount` is the number
/// of entries in `params` (informational).
///   (ptr, i64 x 6, i32, ptr, ptr, ptr, i64) -> ()
MOE_CUDA_RUNTIME_EXPORT void
mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY, intptr_t gridZ,
                 intptr_t blockX, intptr_t blockY, intptr_t blockZ,
                 int32_t sharedMemBytes, void *stream, void **params,
                 void **extra, int64_t paramsCount);

/// As `mgpuLaunchKernel`, with a thread-block cluster of
/// clusterX x clusterY x clusterZ blocks (sm_90+).
///   (ptr, i64 x 9, i32, ptr, ptr, ptr) -> ()
MOE_CUDA_RUNTIME_EXPORT void
mgpuLaunchClusterKernel(void *function, intptr_t clusterX, intptr_t clusterY,
                        intptr_t clusterZ, intptr_t gridX, intptr_t gridY,
                        intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                        intptr_t blockZ, int32_t sharedMemBytes, void *stream,
                        void **params, void **extra);

/*===----------------------------------------------------------------------===*\
|* Streams and events                                                         *|
\*===----------------------------------------------------------------------===*/

///                                                                 () -> ptr
MOE_CUDA_RUNTIME_EXPORT void *mgpuStreamCreate(void);
///                                                                (ptr) -> ()
MOE_CUDA_RUNTIME_EXPORT void mgpuStreamDestroy(void *stream);
///                                                                (ptr) -> ()
MOE_CUDA_RUNTIME_EXPORT void mgpuStreamSynchronize(void *stream);
///                                                           (ptr, ptr) -> ()
MOE_CUDA_RUNTIME_EXPORT void mgpuStreamWaitEvent(void *stream, void *event);
///                                                                 () -> ptr
MOE_CUDA_RUNTIME_EXPORT void *mgpuEventCreate(void);
///                                                                (ptr) -> ()
MOE_CUDA_RUNTIME_EXPORT void mgpuEventDestroy(void *event);
///                                                                (ptr) -> ()
MOE_CUDA_RUNTIME_EXPORT void mgpuEventSynchronize(void *event);
///                                                           (ptr, ptr) -> ()
MOE_CUDA_RUNTIME_EXPORT void mgpuEventRecord(void *event, void *stream);

/*===----------------------------------------------------------------------===*\
|* Memory                                                                     *|
\*===----------------------------------------------------------------------===*/

/// Stream-ordered device allocation (cuMemAllocAsync), usable under graph
/// capture. 0 bytes returns NULL. `hostShared` != 0 (`gpu.alloc host_shared`)
/// is not supported: it records an error and returns NULL.
///                                                      (i64, ptr, i8) -> ptr
MOE_CUDA_RUNTIME_EXPORT void *mgpuMemAlloc(uint64_t sizeBytes, void *stream,
                                           int8_t hostShared);
/// Stream-ordered free (cuMemFreeAsync); NULL is ignored.    (ptr, ptr) -> ()
MOE_CUDA_RUNTIME_EXPORT void mgpuMemFree(void *ptr, void *stream);
/// Asynchronous copy of `sizeBytes` bytes between any two addresses the
/// driver knows (unified addressing).             (ptr, ptr, i64, ptr) -> ()
MOE_CUDA_RUNTIME_EXPORT void mgpuMemcpy(void *dst, void *src,
                                        uint64_t sizeBytes, void *stream);
/// Fills `count` 32-bit elements.                  (ptr, i32, i64, ptr) -> ()
MOE_CUDA_RUNTIME_EXPORT void mgpuMemset32(void *dst, uint32_t value,
                                          uint64_t count, void *stream);
/// Fills `count` 16-bit elements.                  (ptr, i16, i64, ptr) -> ()
MOE_CUDA_RUNTIME_EXPORT void mgpuMemset16(void *dst, uint16_t value,
                                          uint64_t count, void *stream);

/// A device copy of the `sizeBytes` host bytes at `host` (a module-level
/// constant, e.g. weights given as `dense` / `dense_resource`): allocated and
/// copied synchronously (cuMemAlloc, cuMemcpyHtoD). Called once per constant
/// from a global constructor of the compiled code (moe-gpu-device-memory), so
/// a library uploads its constants when it is loaded and never per call.
/// NULL (error recorded) on failure.                         (ptr, i64) -> ptr
MOE_CUDA_RUNTIME_EXPORT void *moeRuntimeUploadConstant(const void *host,
                                                       uint64_t sizeBytes);
/// Frees a copy made by `moeRuntimeUploadConstant` (from a global destructor:
/// at process exit, after the driver shut down, it does nothing). NULL is
/// ignored.                                                       (ptr) -> ()
MOE_CUDA_RUNTIME_EXPORT void moeRuntimeFreeConstant(void *ptr);
/// How many constants this runtime (one per compiled library: it is linked
/// into each) has uploaded and holds now; `*bytes` (if not NULL) receives
/// their size.
MOE_CUDA_RUNTIME_EXPORT int64_t moeRuntimeConstantsHeld(int64_t *bytes);
/// How many uploads `moeRuntimeUploadConstant` has made since the library
/// was loaded (a test that a call uploads nothing).
MOE_CUDA_RUNTIME_EXPORT int64_t moeRuntimeConstantUploads(void);

/// Page-locks (cuMemHostRegister) the host memory a ranked memref descriptor
/// of rank `rank` spans. `descriptor` points to
/// `{T *allocated; T *aligned; int64_t offset; int64_t sizes[rank];
///   int64_t strides[rank];}`.                          (i64, ptr, i64) -> ()
MOE_CUDA_RUNTIME_EXPORT void
mgpuMemHostRegisterMemRef(int64_t rank, void *descriptor,
                          int64_t elementSizeBytes);
///                                                      (i64, ptr, i64) -> ()
MOE_CUDA_RUNTIME_EXPORT void
mgpuMemHostUnregisterMemRef(int64_t rank, void *descriptor,
                            int64_t elementSizeBytes);

/*===----------------------------------------------------------------------===*\
|* Devices and TMA                                                            *|
\*===----------------------------------------------------------------------===*/

/// Selects the device whose primary context later calls use.  (i32) -> ()
MOE_CUDA_RUNTIME_EXPORT void mgpuSetDefaultDevice(int32_t device);

/// Builds a CUtensorMap (cuTensorMapEncodeTiled) for the ranked memref
/// descriptor `descriptor` of rank `rank` (1-5) and box `boxDims[rank]`
/// (outermost first), as `nvgpu.tma.create.descriptor` lowers to. The enum
/// arguments are the CUtensorMap* enums' values. Returns a device pointer to
/// the 128-byte map. Maps are cached by content, so a map built once before
/// a CUDA graph capture is reused inside it without allocating.
///                             (i64, ptr, i64, i64, i64, i64, i64, ptr) -> ptr
MOE_CUDA_RUNTIME_EXPORT void *mgpuTensorMapEncodeTiledMemref(
    int64_t rank, void *descriptor, int64_t dataType, int64_t interleave,
    int64_t swizzle, int64_t l2Promotion, int64_t oobFill, int64_t *boxDims);

#ifdef __cplusplus
} // extern "C"
#endif

#endif // MOE_MLIR_RUNTIME_MOECUDARUNTIME_H
