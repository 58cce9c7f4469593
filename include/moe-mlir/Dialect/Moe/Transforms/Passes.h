//===- Passes.h - moe dialect transformation passes -------------*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_DIALECT_MOE_TRANSFORMS_PASSES_H
#define MOE_MLIR_DIALECT_MOE_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

#include "moe-mlir/Dialect/Moe/IR/MoeDialect.h"

namespace mlir {
namespace moe {

#define GEN_PASS_DECL
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h.inc"

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_DIALECT_MOE_TRANSFORMS_PASSES_H
