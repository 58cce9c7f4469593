//===- InitAllDialects.h - register moe-mlir dialects -----------*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// registerAllDialects: our dialect plus exactly the upstream dialects that
// moe IR is mixed with and that our pipelines produce.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_INITALLDIALECTS_H
#define MOE_MLIR_INITALLDIALECTS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"

#include "moe-mlir/Dialect/Moe/IR/MoeDialect.h"

namespace mlir {
namespace moe {

inline void registerAllDialects(DialectRegistry &registry) {
  registry.insert<MoeDialect, arith::ArithDialect, func::FuncDialect,
                  tensor::TensorDialect>();
}

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_INITALLDIALECTS_H
