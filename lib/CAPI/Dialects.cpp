//===- Dialects.cpp - moe-mlir C API: dialect handles ---------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir-c/Dialects.h"

#include "moe-mlir/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/CAPI/Registration.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Moe, moe, mlir::moe::MoeDialect)
