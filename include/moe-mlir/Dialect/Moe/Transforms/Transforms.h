//===- Transforms.h - moe dialect rewrite patterns --------------*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// populate*Patterns entry points, so passes, pipelines and embedders can
// reuse the rewrites without the pass wrappers.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_DIALECT_MOE_TRANSFORMS_TRANSFORMS_H
#define MOE_MLIR_DIALECT_MOE_TRANSFORMS_TRANSFORMS_H

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

#include "mlir/IR/PatternMatch.h"

#include <functional>
#include <utility>

namespace mlir {
namespace moe {

/// moe.ffn and moe.ffn_train -> the primitive chain of docs/Contract.md
/// section 3, and moe.ffn_grad -> its backward chain
/// (populateMoeDecomposeFfnGradPatterns).
void populateMoeDecomposePatterns(RewritePatternSet &patterns);
/// moe.ffn_grad -> the forward's routing and pre-activation recomputed (or,
/// saved form, the metadata of the saved ids and glu of the saved h), then
/// the backward chain (MoeDecomposeFfnGrad.cpp).
void populateMoeDecomposeFfnGradPatterns(RewritePatternSet &patterns);

/// The forms each lowering implements once: moe.grouped_matmul is a
/// moe.expert_gemm without fused stages, moe.route_dispatch is moe.route
/// followed by moe.dispatch. Both rewrites keep the semantics exactly
/// (a lowering with its own route_dispatch kernel gives its pattern a
/// higher benefit than the split).
///
/// Replaces `op` by the equivalent moe.expert_gemm and returns it.
ExpertGemmOp replaceWithExpertGemm(RewriterBase &rewriter, GroupedMatmulOp op);
/// Replaces `op` by moe.route + moe.dispatch on the route's indices and
/// returns both.
std::pair<RouteOp, DispatchOp>
replaceWithRouteAndDispatch(RewriterBase &rewriter, RouteDispatchOp op);
/// The GEMM of a moe.expert_gemm_glu_grad as a moe.expert_gemm with an f32
/// result (its gather stage only): the activation's gradient g, which both
/// lowerings compute first and then take through the GLU backward.
ExpertGemmOp buildGradientGemm(OpBuilder &builder, ExpertGemmGluGradOp op);
/// Patterns applying the two rewrites above (convert-moe-to-linalg and
/// convert-moe-to-gpu start from these forms).
void populateMoeFusedFormPatterns(RewritePatternSet &patterns);

/// The fusions the moe-fuse-* patterns perform.
enum class MoeFusionKind {
  /// cumsum + get_indices + get_indptr -> moe.dispatch.
  Dispatch,
  /// gather -> grouped matmul prologue.
  GatherMatmul,
  /// glu -> grouped matmul epilogue.
  GluEpilogue,
  /// scatter + routing weights -> grouped matmul epilogue.
  ScatterEpilogue,
  /// glu + row_dot + row scales + glu_grad -> the dgrad GEMM's
  /// moe.expert_gemm_glu_grad.
  GluGradEpilogue,
  /// route + dispatch -> moe.route_dispatch.
  RouteDispatch,
};

/// Fusion policy: called with the fusion about to happen, the producer op
/// and the consumer op; returning false leaves the IR unchanged. The
/// patterns check legality themselves (single use, matching operands); the
/// callback only decides whether a legal fusion is wanted, as
/// linalg::ControlFusionFn does for elementwise fusion.
using ControlMoeFusionFn = std::function<bool(
    MoeFusionKind, Operation *producer, Operation *consumer)>;

/// Each populate function adds one fusion's patterns. A null `control`
/// fuses whenever legal.
void populateMoeFuseDispatchPatterns(RewritePatternSet &patterns,
                                     const ControlMoeFusionFn &control = {});
void populateMoeFuseGatherMatmulPatterns(
    RewritePatternSet &patterns, const ControlMoeFusionFn &control = {});
void populateMoeFuseGluPatterns(RewritePatternSet &patterns,
                                const ControlMoeFusionFn &control = {});
void populateMoeFuseScatterPatterns(RewritePatternSet &patterns,
                                    const ControlMoeFusionFn &control = {});
void populateMoeFuseGluGradPatterns(RewritePatternSet &patterns,
                                    const ControlMoeFusionFn &control = {});
void populateMoeFuseRouteDispatchPatterns(
    RewritePatternSet &patterns, const ControlMoeFusionFn &control = {});

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_DIALECT_MOE_TRANSFORMS_TRANSFORMS_H
