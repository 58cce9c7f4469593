//===- Pipelines.h - moe-mlir C API: pass pipelines ---------------*- C -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Typed entry points to the C++ pipeline build functions of
// moe-mlir/Pipelines/Pipelines.h, so C callers append the exact pipelines
// moe-opt runs without spelling pass names. None needs
// mlirMoeRegisterAllPasses.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_C_PIPELINES_H
#define MOE_MLIR_C_PIPELINES_H

#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Appends `--moe-fuse` (the fusion passes in order) to `passManager`, which
/// must be anchored on builtin.module (or be an implicitly nested manager).
MLIR_CAPI_EXPORTED void mlirMoeBuildFusePipeline(MlirOpPassManager passManager);

/// Appends `--moe-lower-to-cpu` (moe + tensors -> LLVM dialect) to
/// `passManager`; `deallocate` is the pipeline's `deallocate` option.
MLIR_CAPI_EXPORTED void
mlirMoeBuildLowerToCpuPipeline(MlirOpPassManager passManager, bool deallocate);

/// Appends `--moe-lower-to-nvvm` to `passManager`. `options` uses the
/// pipeline's textual option syntax, e.g. "chip=sm_90a tile-m=64" (an empty
/// string selects the defaults). On an unknown or malformed option nothing
/// is appended and a failure is returned; the message goes to
/// `errorCallback` (may be NULL), except for malformed values, which
/// llvm::cl prints to stderr itself.
MLIR_CAPI_EXPORTED MlirLogicalResult mlirMoeBuildLowerToNvvmPipeline(
    MlirOpPassManager passManager, MlirStringRef options,
    MlirStringCallback errorCallback, void *userData);

#ifdef __cplusplus
}
#endif

#endif // MOE_MLIR_C_PIPELINES_H
