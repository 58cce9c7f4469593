//===- MoeFuseGlu.cpp - glu -> grouped matmul epilogue --------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Dialect/Moe/Transforms/Passes.h"

#include "FusionUtils.h"

#define DEBUG_TYPE "moe-fuse-glu"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEFUSEGLUPASS
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

/// glu(grouped_matmul(...))  =>  expert_gemm(...) {activation, layout, ...}
struct FuseGlu : OpRewritePattern<GluOp> {
  FuseGlu(MLIRContext *ctx, ControlMoeFusionFn control)
      : OpRewritePattern(ctx), control(std::move(control)) {}

  LogicalResult matchAndRewrite(GluOp glu,
                                PatternRewriter &rewriter) const override {
    ExpertGemmParts parts;
    if (!parts.match(glu.getInput()))
      return rewriter.notifyMatchFailure(glu, "input is not an expert GEMM");
    if (parts.activation || parts.scatter || parts.scale)
      return rewriter.notifyMatchFailure(
          glu, "GEMM already has an epilogue the GLU would have to precede");
    if (!parts.op->hasOneUse())
      return rewriter.notifyMatchFailure(glu, "pre-activation has other users");
    if (!shouldFuse(control, MoeFusionKind::GluEpilogue, parts.op, glu))
      return rewriter.notifyMatchFailure(glu, "policy declined");
    parts.activation = glu.getActivationAttr();
    parts.layout = glu.getLayoutAttr();
    parts.alpha = glu.getAlphaAttr();
    parts.limit = glu.getLimitAttr();
    parts.upBias = glu.getUpBiasAttr();
    Operation *producer = parts.op;
    auto fused = parts.build(rewriter, glu.getLoc(), glu.getType());
    rewriter.replaceOp(glu, fused);
    rewriter.eraseOp(producer);
    return success();
  }

  ControlMoeFusionFn control;
};

} // namespace

void mlir::moe::populateMoeFuseGluPatterns(RewritePatternSet &patterns,
                                           const ControlMoeFusionFn &control) {
  patterns.add<FuseGlu>(patterns.getContext(), control);
}

namespace {
struct MoeFuseGluPass : mlir::moe::impl::MoeFuseGluPassBase<MoeFuseGluPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMoeFuseGluPatterns(patterns);
    applyFusionPatterns(getOperation(), std::move(patterns));
  }
};
} // namespace
