//===- Patterns.h - per-family moe -> GPU patterns --------------*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_LIB_CONVERSION_MOETOGPU_PATTERNS_H
#define MOE_MLIR_LIB_CONVERSION_MOETOGPU_PATTERNS_H

#include "moe-mlir/Conversion/MoeToGPU/MoeToGPU.h"

namespace mlir {
namespace moe {

/// topk, route, route_dispatch.
/// `smallRouteDispatch`: route_dispatch with few rows as one kernel
/// (route-dispatch-small).
void populateRoutingToGPUPatterns(RewritePatternSet &patterns, StringRef chip,
                                  bool smallRouteDispatch,
                                  bool allowDependents);
/// cumsum, get_indices, get_indptr, dispatch.
void populateDispatchToGPUPatterns(RewritePatternSet &patterns, StringRef chip);
/// gather, scatter, combine, indices_to_multihot, multihot_to_indices.
void populateMovementToGPUPatterns(RewritePatternSet &patterns);
/// expert_gemm, glu (grouped_matmul: populateMoeFusedFormPatterns).
void populateExpertComputeToGPUPatterns(
    RewritePatternSet &patterns, const ConvertMoeToGPUPassOptions &options);

/// glu_grad, row_dot, combine_grad, route_grad, grouped_matmul_wgrad (the
/// backward primitives; ffn_train and ffn_grad decompose into them).
void populateBackwardToGPUPatterns(RewritePatternSet &patterns,
                                   const ConvertMoeToGPUPassOptions &options);

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_LIB_CONVERSION_MOETOGPU_PATTERNS_H
