//===- Pipelines.h - moe-mlir pass pipelines --------------------*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The pipelines of docs/Contract.md section 4 as options struct + build
// function + registration, so moe-opt, the C API and Python all run the same
// pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_PIPELINES_PIPELINES_H
#define MOE_MLIR_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <optional>
#include <string>

namespace mlir {
namespace moe {

/// Options of `--moe-lower-to-cpu`.
struct MoeLowerToCpuOptions : public PassPipelineOptions<MoeLowerToCpuOptions> {
  PassOptions::Option<bool> deallocate{
      *this, "deallocate",
      llvm::cl::desc("Insert ownership-based buffer deallocation after "
                     "bufferization"),
      llvm::cl::init(true)};
  PassOptions::Option<std::string> shapeChecks{
      *this, "shape-checks",
      llvm::cl::desc("Run-time checks that the dynamic sizes of the public "
                     "functions' arguments agree (moe-shape-checks): abort "
                     "(message on stderr, abort(); for mlir-runner), report "
                     "(call shape-check-function and return before any work) "
                     "or none"),
      llvm::cl::init("abort")};
  PassOptions::Option<std::string> shapeCheckFunction{
      *this, "shape-check-function",
      llvm::cl::desc("The C function `void (const char *message, int64_t, "
                     "int64_t)` a failed check calls with shape-checks=report"),
      llvm::cl::init("moeRuntimeReportShapeError")};
};

/// Options of `--moe-lower-to-nvvm`.
struct MoeLowerToNvvmOptions
    : public PassPipelineOptions<MoeLowerToNvvmOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip", llvm::cl::desc("Target chip (SM architecture)"),
      llvm::cl::init("sm_90a")};
  PassOptions::Option<std::string> features{
      *this, "features",
      llvm::cl::desc("PTX features (PTX ISA version; TMA into CTA shared "
                     "memory needs +ptx86)"),
      llvm::cl::init("+ptx86")};
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("Binary format embedded in the host module: cubin, "
                     "ptx, fatbin, or llvm (offload LLVM IR)"),
      llvm::cl::init("cubin")};
  PassOptions::Option<int> optLevel{
      *this, "opt-level", llvm::cl::desc("NVVM/ptxas optimisation level"),
      llvm::cl::init(3)};
  PassOptions::Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit root (ptxas, fatbinary); empty: "
                     "$CUDA_HOME, else /usr/local/cuda"),
      llvm::cl::init("")};
  PassOptions::Option<int64_t> tileM{
      *this, "tile-m", llvm::cl::desc("Expert GEMM block tile rows"),
      llvm::cl::init(64)};
  PassOptions::Option<int64_t> tileN{
      *this, "tile-n", llvm::cl::desc("Expert GEMM block tile columns"),
      llvm::cl::init(64)};
  PassOptions::Option<int64_t> tileK{*this, "tile-k",
                                     llvm::cl::desc("Expert GEMM K step"),
                                     llvm::cl::init(16)};
  PassOptions::Option<std::string> gemm{
      *this, "gemm",
      llvm::cl::desc("Expert GEMM engine: auto (wgmma on sm_90a where the "
                     "op allows it, else simt), simt, wgmma"),
      llvm::cl::init("auto")};
  PassOptions::Option<int64_t> wgmmaTileM{
      *this, "wgmma-tile-m",
      llvm::cl::desc("Hopper GEMM rows per block: 64 or 128 (0: cost model)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> wgmmaTileN{
      *this, "wgmma-tile-n",
      llvm::cl::desc("Hopper GEMM rhs columns per block: a multiple of 16 in "
                     "[64, 256] (64, 128 or 256 for [E, K, N] weights, a "
                     "multiple of 32 with a concat GLU; 0: cost model)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> wgmmaStages{
      *this, "wgmma-stages",
      llvm::cl::desc("Hopper GEMM pipeline stages, 2..8 (0: as many as fit)"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> wgmmaTma{
      *this, "wgmma-tma",
      llvm::cl::desc("Hopper GEMM: weight tiles by TMA (false: cp.async)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> wgmmaLhsTma{
      *this, "wgmma-lhs-tma",
      llvm::cl::desc("Hopper GEMM: lhs tiles of GEMMs without a gather by "
                     "TMA too (a by-value tensor map per launch; false: "
                     "cp.async)"),
      llvm::cl::init(false)};
  PassOptions::Option<std::string> wgmmaEpilogue{
      *this, "wgmma-epilogue",
      llvm::cl::desc("Hopper GEMM output path: auto (cost model), staged "
                     "(through shared memory, 16-byte row stores), bulk "
                     "(through shared memory, rows by cp.async.bulk), "
                     "direct (element stores from the fragments)"),
      llvm::cl::init("auto")};
  PassOptions::Option<int64_t> wgmmaCluster{
      *this, "wgmma-cluster",
      llvm::cl::desc("Hopper GEMM CTAs per cluster: 1, or 2 (row-tile pairs "
                     "share each weight tile by TMA multicast); 0: cost "
                     "model"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> wgmmaSwapRows{
      *this, "wgmma-swap-rows",
      llvm::cl::desc("Hopper small-M (swap-AB) GEMM kernel, launched instead "
                     "when the rows average at most this many per expert "
                     "(-1: cost model, 0: never)"),
      llvm::cl::init(-1)};
  PassOptions::Option<int64_t> wgmmaSwapTileM{
      *this, "wgmma-swap-tile-m",
      llvm::cl::desc("Small-M kernel tokens per tile: 16, 32 or 64 (0: cost "
                     "model)"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> wgmmaSwapMnMajor{
      *this, "wgmma-swap-mn-major",
      llvm::cl::desc("Small-M kernel also for MN-major weights (transposed "
                     "A operand; not with a concat GLU; by default up to 1 "
                     "row per expert)"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> wgmmaSwapL2Promotion{
      *this, "wgmma-swap-l2-promotion",
      llvm::cl::desc("L2 promotion of the small-M kernel's weight TMA "
                     "loads, in bytes: 0 (none), 64, 128 or 256"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> wgmmaSwapStageK{
      *this, "wgmma-swap-stage-k",
      llvm::cl::desc("K elements per pipeline stage of the small-M kernel: "
                     "128 (two 128-byte K slices) or 64"),
      llvm::cl::init(128)};
  PassOptions::Option<int64_t> wgmmaWideSwapRows{
      *this, "wgmma-wide-swap-rows",
      llvm::cl::desc("A second small-M kernel with wider token tiles, "
                     "launched above wgmma-swap-rows and up to this many "
                     "rows per expert (-1: cost model, 0: none)"),
      llvm::cl::init(-1)};
  PassOptions::Option<int64_t> wgmmaWideSwapTileM{
      *this, "wgmma-wide-swap-tile-m",
      llvm::cl::desc("Tokens per tile of the wide small-M kernel: 32 or 64"),
      llvm::cl::init(32)};
  PassOptions::Option<int64_t> wgmmaConsumerSkew{
      *this, "wgmma-consumer-skew",
      llvm::cl::desc("Main Hopper kernel: K steps by which the second "
                     "consumer warpgroup starts each tile after the first "
                     "(-1: cost model; 0: in step)"),
      llvm::cl::init(-1)};
  PassOptions::Option<bool> wgmmaIdleSkip{
      *this, "wgmma-idle-skip",
      llvm::cl::desc("Main Hopper kernel: a consumer warpgroup whose 64 "
                     "rows of a tile are all past the expert's end skips "
                     "the tile's MMAs after the first K step (it only "
                     "waits for and releases the stages)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> wgmmaTailUnits{
      *this, "wgmma-tail-units",
      llvm::cl::desc("Main Hopper kernel: an expert's last row tile of at "
                     "most 64 rows runs as tail units (its rows x two "
                     "column tiles, one per consumer warpgroup, in stages "
                     "of 32 K elements) instead of a whole 128-row tile "
                     "(measured slower on the H200, bench/NOTES.md v66)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> wgmmaGroupedWalk{
      *this, "wgmma-grouped-walk",
      llvm::cl::desc("Main Hopper kernel in 2-CTA clusters: an odd last "
                     "row tile's unit next to the row-tile pairs of its "
                     "two column tiles in the walk (bench/NOTES.md v67)"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> wgmmaProducerRegisters{
      *this, "wgmma-producer-registers",
      llvm::cl::desc("Main Hopper kernel: registers per thread the "
                     "producer warpgroup keeps after setmaxnreg (a "
                     "multiple of 8 in [24, 160]; the consumers take what "
                     "it gives up); 0: cost model"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> wgmmaSwapTileN{
      *this, "wgmma-swap-tile-n",
      llvm::cl::desc("Small-M kernel weight rows per block: 64 or 128 (0: "
                     "cost model)"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> elideFills{
      *this, "elide-fills",
      llvm::cl::desc("Expert GEMMs zero only the output rows that can be "
                     "read (none before a GEMM over the same offsets; the "
                     "uncovered rows' targets through a dispatch "
                     "permutation)"),
      llvm::cl::init(true)};
  PassOptions::Option<std::string> warpSelect{
      *this, "warp-select",
      llvm::cl::desc("Top-k selection of the warp-per-row routing kernels: "
                     "i32 (redux.sync over i32 order keys) or i64 (butterfly "
                     "over i64 keys)"),
      llvm::cl::init("i32")};
  PassOptions::Option<bool> programmaticLaunch{
      *this, "programmatic-launch",
      llvm::cl::desc("Hopper GEMM kernels launched programmatically (PDL): "
                     "they start while the previous kernel finishes and "
                     "wait for it on the device"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> routeDispatchSmall{
      *this, "route-dispatch-small",
      llvm::cl::desc("moe.route_dispatch with at most 64 rows as one "
                     "kernel, a cluster of up to 8 blocks (chosen at run "
                     "time; sm_90 and later)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> outParams{
      *this, "out-params",
      llvm::cl::desc("Return results through caller-allocated trailing "
                     "memref arguments (device buffers the caller owns, "
                     "e.g. torch tensors); false returns fresh device "
                     "buffers the caller must free with mgpuMemFree"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> cInterface{
      *this, "c-interface",
      llvm::cl::desc("Emit _mlir_ciface_ wrappers for public functions"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> deallocate{
      *this, "deallocate",
      llvm::cl::desc("Insert ownership-based buffer deallocation after "
                     "bufferization"),
      llvm::cl::init(true)};
  PassOptions::Option<std::string> shapeChecks{
      *this, "shape-checks",
      llvm::cl::desc("Run-time checks that the dynamic sizes of the public "
                     "functions' arguments agree (moe-shape-checks): report "
                     "(moeRuntimeReportShapeError records the message for "
                     "moeRuntimeGetLastError and the call returns before "
                     "any launch), abort (message on stderr, abort()) or none"),
      llvm::cl::init("report")};
};

/// Why `options` cannot build a pipeline (bad format, chip, opt level or
/// tiles), or nullopt.
std::optional<std::string>
validateMoeLowerToNvvmOptions(const MoeLowerToNvvmOptions &options);

/// moe (+ func/arith/math/tensor/linalg/bufferization) -> gpu.launch
/// kernels -> NVVM -> a gpu.binary for `chip`, host code in the LLVM
/// dialect calling the mgpu* runtime (lib/Runtime/CUDA).
void buildMoeLowerToNvvmPipeline(OpPassManager &pm,
                                 const MoeLowerToNvvmOptions &options);

/// moe (+ func/arith/math/tensor/linalg/bufferization) -> LLVM dialect,
/// runnable with mlir-runner and the mlir_(c_)runner_utils libraries.
void buildMoeLowerToCpuPipeline(OpPassManager &pm,
                                const MoeLowerToCpuOptions &options);

/// `--moe-fuse`: the fusion passes in order (dispatch, gather into the
/// first matmul, GLU epilogue, scatter + weights epilogue, route with
/// dispatch).
void buildMoeFusePipeline(OpPassManager &pm);

/// Registers `moe-fuse`, `moe-lower-to-cpu` and `moe-lower-to-nvvm`.
void registerMoePipelines();

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_PIPELINES_PIPELINES_H
