//===- Registration.h - moe-mlir C API: registration --------------*- C -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// C counterparts of moe-mlir/InitAllDialects.h and InitAllPasses.h, for
// embedding moe-mlir through the MLIR C API:
//
//   MlirDialectRegistry registry = mlirDialectRegistryCreate();
//   mlirMoeRegisterAllDialects(registry);
//   mlirContextAppendDialectRegistry(ctx, registry);
//   mlirMoeRegisterAllPasses();
//   mlirParsePassPipeline(mlirPassManagerGetAsOpPassManager(pm),
//       mlirStringRefCreateFromCString("builtin.module(moe-lower-to-cpu)"),
//       callback, userData);
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_C_REGISTRATION_H
#define MOE_MLIR_C_REGISTRATION_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Inserts the moe dialect, the upstream dialects moe IR is mixed with and
/// that the moe pipelines produce (func, arith, math, tensor, linalg, scf,
/// bufferization, memref, cf, index, affine, ub, llvm, gpu, nvvm), and the
/// external interface models and LLVM IR translations those pipelines need
/// into `registry`. The same set as mlir::moe::registerAllDialects.
MLIR_CAPI_EXPORTED void
mlirMoeRegisterAllDialects(MlirDialectRegistry registry);

/// Registers the moe passes (moe-decompose, moe-fuse-*, moe-cost-report),
/// the conversions (convert-moe-to-linalg, convert-moe-to-gpu, ...) and the
/// pipelines (moe-fuse, moe-lower-to-cpu, moe-lower-to-nvvm) in the global
/// pass registry, plus canonicalize and cse, so mlirParsePassPipeline and
/// mlirOpPassManagerAddPipeline find them. Idempotent and thread-safe.
MLIR_CAPI_EXPORTED void mlirMoeRegisterAllPasses(void);

#ifdef __cplusplus
}
#endif

#endif // MOE_MLIR_C_REGISTRATION_H
