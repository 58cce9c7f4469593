//===- Pipelines.h - moe-mlir pass pipelines --------------------*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The pipelines of SPEC.md section 4 as options struct + build function +
// registration, so moe-opt, the C API and Python all run the same pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_PIPELINES_PIPELINES_H
#define MOE_MLIR_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
namespace moe {

/// Options of `--moe-lower-to-cpu`.
struct MoeLowerToCpuOptions
    : public PassPipelineOptions<MoeLowerToCpuOptions> {
  PassOptions::Option<bool> deallocate{
      *this, "deallocate",
      llvm::cl::desc("Insert ownership-based buffer deallocation after "
                     "bufferization"),
      llvm::cl::init(true)};
};

/// moe (+ func/arith/math/tensor/linalg/bufferization) -> LLVM dialect,
/// runnable with mlir-runner and the mlir_(c_)runner_utils libraries.
void buildMoeLowerToCpuPipeline(OpPassManager &pm,
                                const MoeLowerToCpuOptions &options);

/// `--moe-fuse`: the fusion passes in order (dispatch, gather into the
/// first matmul, GLU epilogue, scatter + weights epilogue, route with
/// dispatch).
void buildMoeFusePipeline(OpPassManager &pm);

/// Registers `moe-fuse` and `moe-lower-to-cpu`.
void registerMoePipelines();

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_PIPELINES_PIPELINES_H
