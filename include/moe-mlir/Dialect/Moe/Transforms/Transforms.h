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

#include "mlir/IR/PatternMatch.h"

#include <functional>

namespace mlir {
namespace moe {

/// moe.ffn -> the primitive chain of docs/Contract.md section 3.
void populateMoeDecomposePatterns(RewritePatternSet &patterns);

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
void populateMoeFuseRouteDispatchPatterns(
    RewritePatternSet &patterns, const ControlMoeFusionFn &control = {});

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_DIALECT_MOE_TRANSFORMS_TRANSFORMS_H
