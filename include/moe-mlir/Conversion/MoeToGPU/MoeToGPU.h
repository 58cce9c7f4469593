//===- MoeToGPU.h - moe to gpu.launch kernels --------------------*- C++
//-*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_CONVERSION_MOETOGPU_MOETOGPU_H
#define MOE_MLIR_CONVERSION_MOETOGPU_MOETOGPU_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir {
namespace moe {

/// Block tile of the expert GEMM kernel: tileM x tileN outputs per block
/// (each thread computes a 4 x 4 sub-tile, so (tileM/4)*(tileN/4) threads),
/// tileK deep steps through shared memory.
struct MoeGemmTiles {
  int64_t tileM = 64;
  int64_t tileN = 64;
  int64_t tileK = 16;
};

/// How the kernels are built (pass options of convert-moe-to-gpu /
/// moe-lower-to-nvvm): mostly the expert GEMM's, also the fills' and
/// routing's (elideFills, warpSelect, routeDispatchSmall).
struct MoeGemmOptions {
  /// `auto` (the cost model: wgmma on sm_90a where the op allows it, else
  /// simt), `simt` (portable f32 FMA kernel) or `wgmma` (Hopper tensor
  /// cores; an op it cannot run is a located error).
  std::string engine = "auto";
  /// The target chip (selects the engines that exist on it).
  std::string chip = "sm_90a";
  /// SIMT engine tiles.
  MoeGemmTiles simt;
  /// Hopper engine overrides (0: the cost model picks): rows per block (64
  /// or 128), rhs columns per block (64, 128 or 256), pipeline stages.
  int64_t wgmmaTileM = 0, wgmmaTileN = 0, wgmmaStages = 0;
  /// Hopper engine: rhs (weight) tiles by TMA; false: by cp.async.
  bool wgmmaTma = true;
  bool wgmmaLhsTma = false;
  /// Hopper engine output path: `auto` (cost model), `staged` (through
  /// shared memory, whole rows by 16-byte stores) or `direct` (element
  /// stores from the accumulator fragments).
  std::string wgmmaEpilogue = "auto";
  /// Hopper engine CTAs per cluster (0: cost model; 1; 2: pairs of row
  /// tiles share each weight tile, multicast by TMA to both CTAs).
  int64_t wgmmaCluster = 0;
  /// Hopper small-M ("swap AB") kernel: the host launches it instead of
  /// the kernel above when the GEMM's rows average at most this many per
  /// expert (-1: the cost model's threshold; 0: never). Weights are the
  /// wgmma A operand, tokens the B operand (GemmConfig.cpp).
  int64_t wgmmaSwapRows = -1;
  /// Small-M kernel tiles (0: cost model): tokens per tile (the wgmma N:
  /// 16, 32 or 64) and weight rows per block (64 or 128).
  int64_t wgmmaSwapTileM = 0, wgmmaSwapTileN = 0;
  /// A second small-M kernel with wgmmaWideSwapTileM tokens per tile (32
  /// or 64), launched above wgmmaSwapRows and up to this many rows per
  /// expert (-1: cost model; 0: none).
  int64_t wgmmaWideSwapRows = -1;
  int64_t wgmmaWideSwapTileM = 32;
  /// Main Hopper kernel: K steps by which the second consumer warpgroup
  /// starts each tile after the first (-1: cost model; 0: in step), so
  /// that one warpgroup's epilogue runs while the other's MMAs do.
  int64_t wgmmaConsumerSkew = -1;
  /// Main Hopper kernel: a consumer warpgroup with no rows in a tile
  /// skips its MMAs after the first K step.
  bool wgmmaIdleSkip = false;
  /// Main Hopper kernel: an expert's last row tile of at most 64 rows runs
  /// as tail units (two column tiles, one per consumer warpgroup).
  bool wgmmaTailUnits = false;
  /// Main Hopper kernel: registers per thread the producer warpgroup keeps
  /// after setmaxnreg (0: cost model; else a multiple of 8 in [24, 160]);
  /// the consumers take what it gives up.
  int64_t wgmmaProducerRegisters = 0;
  /// Main Hopper kernel in 2-CTA clusters: an odd last row tile's unit
  /// next to the row-tile pairs of its two column tiles in the walk.
  bool wgmmaGroupedWalk = false;
  /// Small-M kernel also for MN-major weights ([E, K, N], the transposed A
  /// operand; by default at most 1 row per expert, GemmConfig.cpp).
  bool wgmmaSwapMnMajor = true;
  /// L2 promotion of the small-M kernel's weight TMA loads in bytes (0:
  /// none, 64, 128, 256; the main kernel keeps 256).
  int64_t wgmmaSwapL2Promotion = 0;
  /// K elements per stage of the small-M kernel (64 or 128).
  int64_t wgmmaSwapStageK = 128;
  /// Zero-fill only the output rows that can be read (see
  /// ExpertComputeToGPU.cpp, uncoveredFillOf).
  bool elideFills = true;
  /// Warp-per-row routing selection: "i32" or "i64" (RoutingToGPU.cpp).
  std::string warpSelect = "i32";
  /// moe.route_dispatch with few rows (T <= 64) as one cluster kernel.
  bool routeDispatchSmall = true;
  /// The Hopper GEMM kernels are launched programmatically (PDL): they
  /// start while the previous kernel finishes and wait for it on the
  /// device (griddepcontrol); it and the route + dispatch kernel let their
  /// successor start early (moe-gpu-programmatic-launch).
  bool programmaticLaunch = true;
};

/// Declares that gpu.launch_func reads and writes its memref operands
/// (upstream leaves its effects unknown), so ownership-based buffer
/// deallocation can run on host code that launches outlined kernels.
void registerGpuLaunchFuncMemoryEffects(DialectRegistry &registry);

/// Checks a tile configuration; returns an explanation when invalid.
std::optional<std::string> validateGemmTiles(const MoeGemmTiles &tiles);
/// Checks the GEMM options (engine name, tiles); returns an explanation
/// when invalid.
std::optional<std::string> validateGemmOptions(const MoeGemmOptions &options);

/// Lowers every moe op (moe.ffn through the decompose patterns) to
/// gpu.launch kernels over buffers, bridged to the surrounding tensor IR by
/// bufferization.to_buffer / to_tensor.
void populateMoeToGPUConversionPatterns(RewritePatternSet &patterns,
                                        const MoeGemmOptions &gemm);

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_CONVERSION_MOETOGPU_MOETOGPU_H
