//===- Memory.cpp - the CUDA runtime's memory -----------------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Stream-ordered device memory (cuMemAllocAsync), copies and fills; module
// constants on the device (moeRuntimeUploadConstant / moeRuntimeFreeConstant)
// and their counts; page-locking host memrefs (mgpuMemHostRegisterMemRef).
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include "moe-mlir/Runtime/MoeCudaRuntime.h"

#include <atomic>

using namespace moe::cuda_runtime;

namespace {

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

} // namespace

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
