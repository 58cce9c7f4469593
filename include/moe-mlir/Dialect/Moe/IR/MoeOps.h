//===- MoeOps.h - moe dialect operations ------------------------*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_DIALECT_MOE_IR_MOEOPS_H
#define MOE_MLIR_DIALECT_MOE_IR_MOEOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "moe-mlir/Dialect/Moe/IR/MoeDialect.h"

#define GET_OP_CLASSES
#include "moe-mlir/Dialect/Moe/IR/MoeOps.h.inc"

#endif // MOE_MLIR_DIALECT_MOE_IR_MOEOPS_H
