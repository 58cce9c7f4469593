// read_probe.cu - what the H200 streams from HBM with the copy engines the
// expert GEMMs use, without any MMA: the ceiling the weight-streaming
// cells (T <= 64) are compared against (bench/NOTES.md).
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a \
//        -o read_probe bench/read_probe.cu
//   ./read_probe            (prints one line per probe: us, TB/s)
//
// Probes (every byte read once per run, median of runs, L2 flushed by a
// 256 MB memset before each run, CUDA events around one launch):
//   ldg    16-byte ld.global.nc, 8 independent loads per thread in flight
//   bulk   1-D TMA (cp.async.bulk) chunks into a ring of mbarrier stages
//   tile   2-D TMA boxes in the expert GEMM's pattern: work items of 64
//          rows of a [rows, K] bf16 matrix, each walking K in stages of
//          64 rows x 64 elements (the 128-byte swizzled boxes of
//          WgmmaEngine.cpp), items strided over a persistent grid; with
//          each L2 promotion of the tensor map
//   rows1d the same bytes in the same order as 1-D bulk copies of each
//          row's 128 (256, 512) bytes: TMA's 2-D unit or the pattern?
//   tile2k two swizzled boxes side by side in K per stage
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                               \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,           \
                   cudaGetErrorString(e));                                     \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

__device__ __forceinline__ uint32_t smemAddr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbarInit(uint64_t *bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smemAddr(bar)),
               "r"(count));
}
__device__ __forceinline__ void mbarExpectTx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   smemAddr(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbarWait(uint64_t *bar, uint32_t parity) {
  asm volatile("{\n .reg .pred p;\n W_%=:\n"
               " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               " @!p bra W_%=;\n}" ::"r"(smemAddr(bar)),
               "r"(parity)
               : "memory");
}
__device__ __forceinline__ void bulkLoad(void *dst, const void *src,
                                         uint32_t bytes, uint64_t *bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
               "bytes [%0], [%1], %2, [%3];" ::"r"(smemAddr(dst)),
               "l"(src), "r"(bytes), "r"(smemAddr(bar))
               : "memory");
}
__device__ __forceinline__ void tileLoad(void *dst, const CUtensorMap *map,
                                         int x, int y, uint64_t *bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile."
               "mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
                   smemAddr(dst)),
               "l"(map), "r"(x), "r"(y), "r"(smemAddr(bar))
               : "memory");
}

__global__ void ldgKernel(const int4 *__restrict__ p, size_t n, int *out) {
  constexpr int U = 8;
  int acc = 0;
  size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    int4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      v[u] = __ldg(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u)
      acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    int4 v = __ldg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345679)
    out[0] = acc;
}

// One thread per block issues chunk c = blockIdx.x + j * gridDim.x into
// stage j % stages and re-issues a stage as soon as it has landed.
__global__ void bulkKernel(const char *p, size_t chunks, uint32_t chunk,
                           int stages) {
  extern __shared__ __align__(1024) char sm[];
  auto *full = reinterpret_cast<uint64_t *>(sm);
  char *buf = sm + 1024;
  if (threadIdx.x != 0)
    return;
  for (int s = 0; s < stages; ++s)
    mbarInit(&full[s], 1);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  size_t next = blockIdx.x;
  for (int s = 0; s < stages && next < chunks; ++s, next += gridDim.x) {
    mbarExpectTx(&full[s], chunk);
    bulkLoad(buf + size_t(s) * chunk, p + next * chunk, chunk, &full[s]);
  }
  uint32_t phase = 0;
  int s = 0;
  for (size_t done = blockIdx.x; done < chunks; done += gridDim.x) {
    mbarWait(&full[s], phase);
    if (next < chunks) {
      mbarExpectTx(&full[s], chunk);
      bulkLoad(buf + size_t(s) * chunk, p + next * chunk, chunk, &full[s]);
      next += gridDim.x;
    }
    if (++s == stages) {
      s = 0;
      phase ^= 1;
    }
  }
}

// The GEMM pattern: item i = rows [64 i, 64 i + 64); step kt of an item
// loads the item's 64 rows at K offset kt * boxK into one stage.
//   mode 0  2-D boxes of boxRows rows (32: two boxes per stage, 64: one)
//   mode 1  the same bytes as 64 1-D bulk copies of one row's boxK * 2 bytes
//           each (no tensor map; the 32 lanes issue two each)
//   mode 2  two 64-row 2-D boxes side by side in K per stage (a stage holds
//           64 rows x 2 boxK: twice the bytes per row per stage)
// rotate: item i starts its K walk at step 7 i mod kSteps.
__global__ void tileKernel(const __grid_constant__ CUtensorMap map,
                           const char *base, int rowBytes, int items,
                           int kSteps, int boxK, int stages, int boxRows,
                           int rotate, int mode) {
  extern __shared__ __align__(1024) char sm[];
  auto *full = reinterpret_cast<uint64_t *>(sm);
  char *buf = sm + 1024;
  const int lane = threadIdx.x & 31;
  const int perStep = mode == 2 ? 2 : 1;
  const uint32_t boxBytes = uint32_t(boxRows) * boxK * 2,
                 stageBytes = 64u * boxK * 2 * perStep;
  if (threadIdx.x >= 32)
    return;
  if (lane == 0) {
    for (int s = 0; s < stages; ++s)
      mbarInit(&full[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncwarp();
  const int steps = kSteps / perStep;
  long total = 0;
  for (int i = blockIdx.x; i < items; i += gridDim.x)
    total += steps;
  auto issue = [&](long step) {
    int it = blockIdx.x + int(step / steps) * gridDim.x;
    int kt = int(step % steps);
    if (rotate)
      kt = (kt + 7 * it) % steps;
    int s = int(step % stages);
    char *dst = buf + size_t(s) * stageBytes;
    if (lane == 0)
      mbarExpectTx(&full[s], stageBytes);
    __syncwarp();
    if (mode == 1) {
      const uint32_t bytes = uint32_t(boxK) * 2;
      for (int r = lane; r < 64; r += 32)
        bulkLoad(dst + r * bytes,
                 base + (size_t(it) * 64 + r) * rowBytes + size_t(kt) * bytes,
                 bytes, &full[s]);
      return;
    }
    if (lane != 0)
      return;
    for (int h = 0; h < perStep; ++h)
      for (int r = 0; r < 64; r += boxRows)
        tileLoad(dst + h * 64 * boxK * 2 + (r / boxRows) * boxBytes, &map,
                 (kt * perStep + h) * boxK, it * 64 + r, &full[s]);
  };
  long next = 0;
  for (; next < stages && next < total; ++next)
    issue(next);
  for (long step = 0; step < total; ++step) {
    mbarWait(&full[step % stages], uint32_t((step / stages) & 1));
    __syncwarp();
    if (next < total)
      issue(next++);
  }
}

using EncodeTiled = CUresult (*)(CUtensorMap *, CUtensorMapDataType, cuuint32_t,
                                 void *, const cuuint64_t *, const cuuint64_t *,
                                 const cuuint32_t *, const cuuint32_t *,
                                 CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion,
                                 CUtensorMapFloatOOBfill);

static char *flushBuf;
static const size_t kFlush = size_t(256) << 20;

template <typename Launch> static float timeIt(Launch launch, int runs) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int r = 0; r < runs + 2; ++r) {
    CHECK(cudaMemsetAsync(flushBuf, r & 0xff, kFlush));
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaGetLastError());
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    if (r >= 2)
      t.push_back(ms * 1e3f);
  }
  std::sort(t.begin(), t.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t[t.size() / 2];
}

static void report(const char *what, size_t bytes, float us) {
  std::printf("%-58s %8.1f MB %9.1f us %6.3f TB/s\n", what, bytes / 1e6, us,
              bytes / (us * 1e6));
  std::fflush(stdout);
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t big = size_t(4) << 30;
  char *data;
  int *out;
  CHECK(cudaMalloc(&data, big));
  CHECK(cudaMalloc(&flushBuf, kFlush));
  CHECK(cudaMalloc(&out, 64));
  CHECK(cudaMemset(data, 1, big));
  const int runs = 20;
  char name[128];

  for (int bps : {2, 4, 8}) {
    size_t n = big / 16;
    float us = timeIt(
        [&] {
          ldgKernel<<<sms * bps, 256>>>(reinterpret_cast<int4 *>(data), n, out);
        },
        runs);
    std::snprintf(name, sizeof name, "ldg v4 x8, %d x 256 threads per SM", bps);
    report(name, big, us);
  }

  CHECK(cudaFuncSetAttribute(
      bulkKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
  CHECK(cudaFuncSetAttribute(
      tileKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
  struct BulkCase {
    uint32_t chunk;
    int stages, perSM;
  };
  for (BulkCase c :
       {BulkCase{16384, 8, 1}, BulkCase{8192, 8, 2}, BulkCase{32768, 6, 1},
        BulkCase{16384, 6, 2}, BulkCase{65536, 3, 1}}) {
    size_t chunks = big / c.chunk;
    int smem = 1024 + c.stages * c.chunk;
    float us = timeIt(
        [&] {
          bulkKernel<<<sms * c.perSM, 32, smem>>>(data, chunks, c.chunk,
                                                  c.stages);
        },
        runs);
    std::snprintf(name, sizeof name, "bulk %u B x %d stages, %d CTA/SM",
                  c.chunk, c.stages, c.perSM);
    report(name, big, us);
  }

  void *fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                         cudaEnableDefault, &q));
  if (!fn || q != cudaDriverEntryPointSuccess) {
    std::fprintf(stderr, "no cuTensorMapEncodeTiled\n");
    return 1;
  }
  auto encode = reinterpret_cast<EncodeTiled>(fn);
  // (rows, K): DeepSeek-V3 T = 1 GEMM2 (8 experts x 7168 rows, K 2048) and
  // GEMM1 (8 x 4096, K 7168), and T = 64-sized streams (K 7168, ~3.8 GB;
  // K 2880, ~3.2 GB).
  struct TileCase {
    const char *what;
    long rows;
    int k;
  };
  struct Shape {
    int boxK, boxRows, rotate, perSM, mode, l2, stages = 0;
  };
  const int L2_256 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            L2_NONE = CU_TENSOR_MAP_L2_PROMOTION_NONE;
  const char *l2Names[] = {"none", "64B", "128B", "256B"};
  for (TileCase t : {TileCase{"DeepSeek T=1 GEMM2", 8L * 7168, 2048},
                     TileCase{"DeepSeek T=1 GEMM1", 8L * 4096, 7168},
                     TileCase{"K 7168 stream", 64L * 4096, 7168},
                     TileCase{"K 2880 stream", 96L * 5760, 2880}}) {
    size_t bytes = size_t(t.rows) * t.k * 2;
    for (Shape sh :
         {Shape{64, 64, 0, 2, 0, L2_256}, Shape{64, 64, 0, 2, 0, L2_NONE},
          Shape{64, 64, 0, 2, 0, L2_256, 4}, Shape{64, 64, 0, 2, 0, L2_256, 6},
          Shape{64, 64, 0, 2, 0, L2_256, 8}, Shape{64, 32, 0, 2, 0, L2_256, 8},
          Shape{64, 32, 0, 2, 0, L2_NONE, 8}, Shape{64, 64, 0, 3, 0, L2_256},
          Shape{64, 64, 0, 3, 0, L2_256, 6}, Shape{64, 64, 0, 4, 0, L2_256},
          Shape{64, 64, 0, 2, 2, L2_256}, Shape{64, 64, 0, 2, 2, L2_NONE},
          Shape{64, 64, 0, 2, 2, L2_NONE, 4}, Shape{64, 64, 0, 2, 2, L2_256, 4},
          Shape{64, 32, 0, 2, 2, L2_NONE, 4},
          Shape{64, 64, 0, 3, 2, L2_NONE}}) {
      int boxK = sh.boxK;
      if (t.k % (boxK * (sh.mode == 2 ? 2 : 1)))
        continue;
      cuuint64_t dims[2] = {cuuint64_t(t.k), cuuint64_t(t.rows)};
      cuuint64_t strides[1] = {cuuint64_t(t.k) * 2};
      cuuint32_t box[2] = {cuuint32_t(std::min(boxK, 64)),
                           cuuint32_t(sh.boxRows)};
      cuuint32_t elemStrides[2] = {1, 1};
      CUtensorMap map;
      CUresult r =
          encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, data, dims, strides,
                 box, elemStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                 CU_TENSOR_MAP_SWIZZLE_128B,
                 static_cast<CUtensorMapL2promotion>(sh.l2),
                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      if (r != CUDA_SUCCESS) {
        std::fprintf(stderr, "encode failed %d\n", int(r));
        return 1;
      }
      int items = int(t.rows / 64), kSteps = t.k / boxK;
      int stageBytes = 64 * boxK * 2 * (sh.mode == 2 ? 2 : 1);
      int perSM = sh.perSM;
      int st = std::min(16, (227 * 1024 / perSM - 2048) / stageBytes);
      if (sh.stages)
        st = std::min(st, sh.stages);
      int smem = 1024 + st * stageBytes;
      float us = timeIt(
          [&] {
            tileKernel<<<sms * perSM, 32, smem>>>(map, data, t.k * 2, items,
                                                  kSteps, boxK, st, sh.boxRows,
                                                  sh.rotate, sh.mode);
          },
          runs);
      const char *modes[] = {"tile", "rows1d", "tile2k"};
      std::snprintf(name, sizeof name,
                    "%s %s box %dx%d%s l2 %s, %d x %d B, %d/SM", modes[sh.mode],
                    t.what, boxK, sh.boxRows, sh.rotate ? " rot" : "",
                    l2Names[sh.l2], st, stageBytes, perSM);
      report(name, bytes, us);
    }
  }
  return 0;
}
