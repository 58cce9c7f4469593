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

#include "moe-mlir/Conversion/Passes.h"

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

/// Options of `--moe-lower-to-nvvm`: the pipeline's own (below), and the
/// kernels' in `kernels`, which are convert-moe-to-gpu's options (declared
/// once, in Conversion/Passes.td). In the pipeline's text both kinds are
/// written side by side (`chip=sm_90a wgmma-tile-n=128 format=ptx`):
/// parseMoeLowerToNvvmOptions hands every option that is not the
/// pipeline's own to the pass.
struct MoeLowerToNvvmOptions
    : public PassPipelineOptions<MoeLowerToNvvmOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc("Target chip (SM architecture; also the kernels' chip)"),
      llvm::cl::init("sm_90a")};
  PassOptions::Option<std::string> features{
      *this, "features",
      llvm::cl::desc("PTX features (PTX ISA version; TMA into CTA shared "
                     "memory needs +ptx86, else the weights come by "
                     "cp.async)"),
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

  /// The kernels' options (convert-moe-to-gpu's, with their defaults).
  /// The pipeline sets their `chip` from its own, and turns `wgmmaTma` off
  /// below PTX ISA 8.6.
  ConvertMoeToGPUPassOptions kernels;
};

/// Parses `--moe-lower-to-nvvm`'s option text into `options`: the
/// pipeline's own options into its fields, every other `key[=value]` into
/// `options.kernels` (convert-moe-to-gpu's parser). Unknown names and bad
/// values go to `errorHandler`.
LogicalResult parseMoeLowerToNvvmOptions(
    StringRef text, MoeLowerToNvvmOptions &options,
    function_ref<LogicalResult(const Twine &)> errorHandler);

/// Why `options` cannot build a pipeline (bad format, chip, opt level,
/// shape checks or kernel options), or nullopt.
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

/// `--moe-fuse`: the fusion passes in order (dispatch, the backward's GLU
/// gradient into its dgrad GEMM, gather into the first matmul and the
/// weight gradients, GLU epilogue, scatter + weights epilogue, route with
/// dispatch).
void buildMoeFusePipeline(OpPassManager &pm);

/// Registers `moe-fuse`, `moe-lower-to-cpu` and `moe-lower-to-nvvm`.
void registerMoePipelines();

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_PIPELINES_PIPELINES_H
