//===- Patterns.h - per-family moe lowering patterns ------------*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// One populate function per op family; MoeToLinalg.cpp assembles them.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_LIB_CONVERSION_MOETOLINALG_PATTERNS_H
#define MOE_MLIR_LIB_CONVERSION_MOETOLINALG_PATTERNS_H

#include "mlir/IR/PatternMatch.h"

namespace mlir {
namespace moe {

/// moe.topk, moe.route.
void populateRoutingLoweringPatterns(RewritePatternSet &patterns);
/// moe.cumsum, moe.get_indices, moe.get_indptr, moe.dispatch.
void populateDispatchLoweringPatterns(RewritePatternSet &patterns);
/// moe.gather, moe.scatter, moe.combine, moe.indices_to_multihot,
/// moe.multihot_to_indices.
void populateMovementLoweringPatterns(RewritePatternSet &patterns);
/// moe.expert_gemm, moe.grouped_matmul_wgrad, moe.glu, moe.glu_grad,
/// moe.row_dot.
void populateExpertComputeLoweringPatterns(RewritePatternSet &patterns);

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_LIB_CONVERSION_MOETOLINALG_PATTERNS_H
