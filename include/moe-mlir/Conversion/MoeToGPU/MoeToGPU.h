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

/// How the kernels are built: the options of convert-moe-to-gpu (declared
/// once, in Conversion/Passes.td; the struct is generated from them, with
/// their defaults), which --moe-lower-to-nvvm forwards. Include
/// "moe-mlir/Conversion/Passes.h" for its fields.
struct ConvertMoeToGPUPassOptions;

/// Parses convert-moe-to-gpu's option text (`key=value ...`, as on the
/// command line) into `options`; a name or value the pass does not take is
/// reported through `errorHandler`.
LogicalResult parseConvertMoeToGPUOptions(
    StringRef text, ConvertMoeToGPUPassOptions &options,
    function_ref<LogicalResult(const Twine &)> errorHandler);

/// Declares that gpu.launch_func reads and writes its memref operands
/// (upstream leaves its effects unknown), so ownership-based buffer
/// deallocation can run on host code that launches outlined kernels.
void registerGpuLaunchFuncMemoryEffects(DialectRegistry &registry);

/// Checks a tile configuration; returns an explanation when invalid.
std::optional<std::string> validateGemmTiles(const MoeGemmTiles &tiles);
/// Checks the option values (engine name, tiles, ...); returns an
/// explanation when one is invalid.
std::optional<std::string>
validateGemmOptions(const ConvertMoeToGPUPassOptions &options);

/// Lowers every moe op (moe.ffn through the decompose patterns) to
/// gpu.launch kernels over buffers, bridged to the surrounding tensor IR by
/// bufferization.to_buffer / to_tensor.
void populateMoeToGPUConversionPatterns(
    RewritePatternSet &patterns, const ConvertMoeToGPUPassOptions &options);

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_CONVERSION_MOETOGPU_MOETOGPU_H
