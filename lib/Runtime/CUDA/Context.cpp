//===- Context.cpp - the CUDA runtime's driver and context ----------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Driver initialisation and the primary context of the default device
// (mgpuSetDefaultDevice), made current around each entry point by
// ContextGuard; moeRuntimeSynchronize.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include "moe-mlir/Runtime/MoeCudaRuntime.h"

#include <atomic>
#include <mutex>

using namespace moe::cuda_runtime;

namespace {

constexpr int kMaxDevices = 64;

std::mutex initMutex;
std::atomic<bool> driverReady{false};
std::atomic<int32_t> defaultDevice{0};
// Retained primary contexts, by device ordinal; never released (the driver
// drops them at process exit).
std::atomic<CUcontext> primaryContexts[kMaxDevices];

} // namespace

namespace moe::cuda_runtime {

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

ContextGuard::ContextGuard(const char *where) : where(where) {
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

ContextGuard::~ContextGuard() {
  if (pushed)
    checkCu(cuCtxPopCurrent(nullptr), "cuCtxPopCurrent", where);
}

} // namespace moe::cuda_runtime

extern "C" void mgpuSetDefaultDevice(int32_t device) {
  defaultDevice.store(device, std::memory_order_relaxed);
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
