//===- Dialects.h - moe-mlir C API: dialect handles ---------------*- C -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The moe dialect as an MlirDialectHandle, in the form of upstream's
// mlir-c/Dialect/*.h headers:
//
//   MlirDialectHandle moe = mlirGetDialectHandle__moe__();
//   mlirDialectHandleLoadDialect(moe, ctx);
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_C_DIALECTS_H
#define MOE_MLIR_C_DIALECTS_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(Moe, moe);

#ifdef __cplusplus
}
#endif

#endif // MOE_MLIR_C_DIALECTS_H
