//===- FusionUtils.h - helpers shared by the moe fusion passes --*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_LIB_DIALECT_MOE_TRANSFORMS_FUSIONUTILS_H
#define MOE_MLIR_LIB_DIALECT_MOE_TRANSFORMS_FUSIONUTILS_H

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"
#include "moe-mlir/Dialect/Moe/Transforms/Transforms.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir {
namespace moe {

/// Asks the policy callback (null = always fuse).
inline bool shouldFuse(const ControlMoeFusionFn &control, MoeFusionKind kind,
                       Operation *producer, Operation *consumer) {
  return !control || control(kind, producer, consumer);
}

/// The expert GEMM feeding a fusion: a moe.grouped_matmul or a
/// moe.expert_gemm. Normalises both to the operands of an expert_gemm.
struct ExpertGemmParts {
  Operation *op = nullptr;
  Value lhs, rhs, offsets, gather, bias, scatter, scale;
  /// The weights' scales (low-precision weight formats), else null.
  Value rhsScale;
  BoolAttr transposeRhs;
  ActivationAttr activation;
  GluLayoutAttr layout;
  FloatAttr alpha, limit, upBias;
  WeightFormatAttr weightFormat;
  ScaleFmtAttr scaleFmt;

  /// Matches `v`'s defining op; false when it is neither GEMM form.
  bool match(Value v);
  /// Builds the expert_gemm these parts describe, with result `type`.
  ExpertGemmOp build(OpBuilder &builder, Location loc, Type type) const;
};

/// Applies a fusion pass's patterns in one post-order walk: every pattern
/// consumes producers that come before its root, so one walk finds every
/// match, and nothing else in the IR changes (no folding, no DCE).
void applyFusionPatterns(Operation *root, RewritePatternSet &&patterns);

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_LIB_DIALECT_MOE_TRANSFORMS_FUSIONUTILS_H
