//===- Streams.cpp - the CUDA runtime's streams and events ----------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The embedder's stream (moeRuntimeSetStream), which work without a stream
// goes to and which is never synchronised from here; streams and events.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include "moe-mlir/Runtime/MoeCudaRuntime.h"

using namespace moe::cuda_runtime;

namespace {

// Set by moeRuntimeSetStream; per thread, like the current stream of PyTorch
// and of the CUDA runtime.
thread_local CUstream embedderStream = nullptr;

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

} // namespace

namespace moe::cuda_runtime {

CUstream resolveStream(void *stream) {
  return stream ? static_cast<CUstream>(stream) : embedderStream;
}

CUstream capturingEmbedderStream(const char *where) {
  return embedderStreamIsCapturing(where) ? embedderStream : nullptr;
}

} // namespace moe::cuda_runtime

extern "C" void moeRuntimeSetStream(void *cuStream) {
  embedderStream = static_cast<CUstream>(cuStream);
}

extern "C" void *moeRuntimeGetStream(void) { return embedderStream; }

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
