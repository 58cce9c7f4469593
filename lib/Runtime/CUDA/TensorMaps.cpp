//===- TensorMaps.cpp - the CUDA runtime's TMA tensor maps ----------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Tiled TMA tensor maps: encoded from a memref descriptor
// (mgpuTensorMapEncodeTiledMemref) or from 3-D sizes and strides
// (moeRuntimeTensorMap3D), with one cached device copy per distinct map;
// or encoded into a kernel parameter (moeRuntimeEncodeTensorMap3D).
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include "moe-mlir/Runtime/MoeCudaRuntime.h"

#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

using namespace moe::cuda_runtime;

namespace {

/// The bytes one element of each CUtensorMapDataType takes (the packed
/// sub-byte types are not supported).
int64_t tensorMapElementBytes(int64_t dataType) {
  static constexpr int64_t kBytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  if (dataType < 0 ||
      dataType >= static_cast<int64_t>(sizeof(kBytes) / sizeof(kBytes[0])))
    return 0;
  return kBytes[dataType];
}

// Device copies of tensor maps, keyed by the map's bytes (which include the
// global address) and the context; never freed, since a captured graph may
// still refer to them. Allocated once and leaked on purpose (see
// RuntimeInternal.h on destruction order).
//
// While the embedder's stream is captured (torch.compile's
// mode="reduce-overhead" records its graphs with the inputs copied to new
// addresses, so new maps are made under capture) nothing may be allocated
// or copied synchronously: a new map then takes a slot of its context's
// arena (device memory and a pinned host copy, both allocated by the first
// map made outside capture) and reaches the device by an asynchronous copy
// on the captured stream, i.e. a copy node of the graph, before the
// kernels that read it. Until the graph has run once the slot holds
// nothing, so a later call outside capture that finds the map copies it
// synchronously first.
struct CachedMap {
  CUdeviceptr device = 0;
  const void *host = nullptr; // arena slot's host copy while not uploaded
};
struct MapArena {
  CUdeviceptr device = 0;
  char *host = nullptr;
  size_t used = 0;
};
constexpr size_t kArenaSlots = 1024;
std::mutex tensorMapMutex;
std::unordered_map<std::string, CachedMap> *tensorMapCache = nullptr;
std::unordered_map<CUcontext, MapArena> *tensorMapArenas = nullptr;

} // namespace

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
  CUstream captured = capturingEmbedderStream(where);
  std::lock_guard<std::mutex> lock(tensorMapMutex);
  if (!tensorMapCache) {
    tensorMapCache = new std::unordered_map<std::string, CachedMap>();
    tensorMapArenas = new std::unordered_map<CUcontext, MapArena>();
  }
  auto it = tensorMapCache->find(key);
  if (it != tensorMapCache->end()) {
    CachedMap &cached = it->second;
    // Made under a capture whose graph may not have run yet: copied here
    // (outside capture: once, synchronously; in another capture: into
    // that graph too).
    if (cached.host && !captured) {
      if (!CU_CHECK(cuMemcpyHtoD, cached.device, cached.host, sizeof(map)))
        return nullptr;
      cached.host = nullptr;
    } else if (cached.host && !CU_CHECK(cuMemcpyHtoDAsync, cached.device,
                                        cached.host, sizeof(map), captured)) {
      return nullptr;
    }
    return reinterpret_cast<void *>(cached.device);
  }
  MapArena &arena = (*tensorMapArenas)[context];
  if (!captured) {
    // The arena, while allocating is allowed.
    if (!arena.device) {
      CUdeviceptr device = 0;
      void *host = nullptr;
      if (!CU_CHECK(cuMemAlloc, &device, kArenaSlots * sizeof(map)))
        return nullptr;
      if (!CU_CHECK(cuMemHostAlloc, &host, kArenaSlots * sizeof(map), 0)) {
        cuMemFree(device);
        return nullptr;
      }
      arena.device = device;
      arena.host = static_cast<char *>(host);
    }
    CUdeviceptr deviceMap = 0;
    if (!CU_CHECK(cuMemAlloc, &deviceMap, sizeof(map)))
      return nullptr;
    if (!CU_CHECK(cuMemcpyHtoD, deviceMap, &map, sizeof(map))) {
      cuMemFree(deviceMap);
      return nullptr;
    }
    tensorMapCache->emplace(std::move(key), CachedMap{deviceMap, nullptr});
    return reinterpret_cast<void *>(deviceMap);
  }
  if (!arena.device || arena.used == kArenaSlots) {
    recordError("a new TMA tensor map is needed while the stream is captured "
                "into a CUDA graph, and %s (call the layer once outside "
                "capture first, as a warm-up) (in %s)",
                arena.device ? "the capture-time map arena is full"
                             : "no call outside capture has made its arena",
                where);
    return nullptr;
  }
  size_t slot = arena.used++;
  char *host = arena.host + slot * sizeof(map);
  std::memcpy(host, &map, sizeof(map));
  CUdeviceptr deviceMap = arena.device + slot * sizeof(map);
  if (!CU_CHECK(cuMemcpyHtoDAsync, deviceMap, host, sizeof(map), captured))
    return nullptr;
  tensorMapCache->emplace(std::move(key), CachedMap{deviceMap, host});
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
