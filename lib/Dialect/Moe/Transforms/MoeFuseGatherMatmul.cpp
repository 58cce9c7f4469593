//===- MoeFuseGatherMatmul.cpp - gather -> grouped matmul prologue --------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Dialect/Moe/Transforms/Passes.h"

#include "FusionUtils.h"

#define DEBUG_TYPE "moe-fuse-gather-matmul"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEFUSEGATHERMATMULPASS
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

/// grouped_matmul(gather(x, idx), w, off)  =>  expert_gemm(x[idx], w, off)
/// (also for an expert_gemm that has no gather stage yet).
struct FuseGatherMatmul : RewritePattern {
  FuseGatherMatmul(MLIRContext *ctx, ControlMoeFusionFn control)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx),
        control(std::move(control)) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!isa<GroupedMatmulOp, ExpertGemmOp>(op))
      return failure();
    ExpertGemmParts parts;
    if (!parts.match(op->getResult(0)) || parts.gather)
      return rewriter.notifyMatchFailure(op, "already gathers");
    auto gather = parts.lhs.getDefiningOp<GatherOp>();
    if (!gather)
      return rewriter.notifyMatchFailure(op, "lhs is not a moe.gather");
    if (!gather->hasOneUse())
      return rewriter.notifyMatchFailure(op, "gathered rows have other users");
    if (!shouldFuse(control, MoeFusionKind::GatherMatmul, gather, op))
      return rewriter.notifyMatchFailure(op, "policy declined");
    parts.lhs = gather.getInput();
    parts.gather = gather.getIndices();
    auto fused =
        parts.build(rewriter, op->getLoc(), op->getResult(0).getType());
    rewriter.replaceOp(op, fused);
    rewriter.eraseOp(gather);
    return success();
  }

  ControlMoeFusionFn control;
};

} // namespace

void mlir::moe::populateMoeFuseGatherMatmulPatterns(
    RewritePatternSet &patterns, const ControlMoeFusionFn &control) {
  patterns.add<FuseGatherMatmul>(patterns.getContext(), control);
}

namespace {
struct MoeFuseGatherMatmulPass
    : mlir::moe::impl::MoeFuseGatherMatmulPassBase<MoeFuseGatherMatmulPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMoeFuseGatherMatmulPatterns(patterns);
    applyFusionPatterns(getOperation(), std::move(patterns));
  }
};
} // namespace
