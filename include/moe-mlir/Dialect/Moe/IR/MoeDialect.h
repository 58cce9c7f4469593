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

#define GET_ATTRDEF_CLASSES
#include "moe-mlir/Dialect/Moe/IR/MoeAttrDefs.h.inc"

#endif // MOE_MLIR_DIALECT_MOE_IR_MOEDIALECT_H
