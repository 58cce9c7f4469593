//===- Errors.cpp - the CUDA runtime's error state ------------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The first failure since the last moeRuntimeClearError, kept for
// moeRuntimeGetLastError and printed to stderr; the per-thread stop after a
// failure (skippedAfterFailure); run-time shape-check reports from compiled
// code (moeRuntimeReportShapeError).
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include "moe-mlir/Runtime/MoeCudaRuntime.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

using namespace moe::cuda_runtime;

namespace {

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

} // namespace

namespace moe::cuda_runtime {

/// Whether this thread must not issue work (see failedInThread).
bool skippedAfterFailure() { return failedInThread; }

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

} // namespace moe::cuda_runtime

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
