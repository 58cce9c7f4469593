//===- FusedForms.h - rewrites both lowerings start from --------*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// moe.grouped_matmul is a moe.expert_gemm without fused stages, and
// moe.route_dispatch is moe.route followed by moe.dispatch: each lowering
// has one GEMM and one dispatch implementation, reached through these.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_LIB_CONVERSION_UTILS_FUSEDFORMS_H
#define MOE_MLIR_LIB_CONVERSION_UTILS_FUSEDFORMS_H

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir {
namespace moe {

/// Replaces `op` by the equivalent moe.expert_gemm.
void replaceWithExpertGemm(GroupedMatmulOp op, PatternRewriter &rewriter);
/// Replaces `op` by moe.route + moe.dispatch.
void replaceWithRouteAndDispatch(RouteDispatchOp op, PatternRewriter &rewriter);

/// Patterns applying the two rewrites above.
void populateFusedFormPatterns(RewritePatternSet &patterns);

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_LIB_CONVERSION_UTILS_FUSEDFORMS_H
