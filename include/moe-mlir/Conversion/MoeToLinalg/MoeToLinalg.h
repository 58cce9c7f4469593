//===- MoeToLinalg.h - moe to linalg/scf/tensor lowering --------*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_CONVERSION_MOETOLINALG_MOETOLINALG_H
#define MOE_MLIR_CONVERSION_MOETOLINALG_MOETOLINALG_H

#include "mlir/IR/PatternMatch.h"

namespace mlir {
namespace moe {

/// Lowers every moe op (moe.ffn through the decompose patterns) to linalg,
/// scf, tensor, arith and math ops on tensors.
void populateMoeToLinalgConversionPatterns(RewritePatternSet &patterns);

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_CONVERSION_MOETOLINALG_MOETOLINALG_H
