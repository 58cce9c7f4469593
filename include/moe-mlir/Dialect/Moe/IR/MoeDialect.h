//===- MoeDialect.h - moe dialect -------------------------------*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_DIALECT_MOE_IR_MOEDIALECT_H
#define MOE_MLIR_DIALECT_MOE_IR_MOEDIALECT_H

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOpsDialect.h.inc"

#include "moe-mlir/Dialect/Moe/IR/MoeEnums.h.inc"

namespace mlir::moe {
/// mxfp4 weights in either nibble order (gpt-oss's, or mxfp4_hopper's
/// register-fragment order of each 32-value block): the same types,
/// shapes and scales.
inline bool isMxfp4(WeightFormat format) {
  return format == WeightFormat::mxfp4 || format == WeightFormat::mxfp4_hopper;
}
} // namespace mlir::moe

#define GET_ATTRDEF_CLASSES
#include "moe-mlir/Dialect/Moe/IR/MoeAttrDefs.h.inc"

#endif // MOE_MLIR_DIALECT_MOE_IR_MOEDIALECT_H
