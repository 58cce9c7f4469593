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

/// grouped_matmul_wgrad(gather(x, idx), dy)  =>  grouped_matmul_wgrad(x[idx],
/// dy) (either operand): the weight gradient reads the token rows through
/// the indices on its row loop. Only when every user of the gathered rows
/// is a weight gradient, so that the gathered copy goes away.
struct FuseGatherWgrad : OpRewritePattern<GroupedMatmulWgradOp> {
  FuseGatherWgrad(MLIRContext *ctx, ControlMoeFusionFn control)
      : OpRewritePattern(ctx), control(std::move(control)) {}

  LogicalResult matchAndRewrite(GroupedMatmulWgradOp op,
                                PatternRewriter &rewriter) const override {
    for (bool lhs : {true, false}) {
      Value operand = lhs ? op.getLhs() : op.getRhs();
      if (lhs ? op.getLhsGather() : op.getRhsGather())
        continue;
      auto gather = operand.getDefiningOp<GatherOp>();
      if (!gather || !llvm::all_of(gather->getUsers(), [](Operation *user) {
            return isa<GroupedMatmulWgradOp>(user);
          }))
        continue;
      if (!shouldFuse(control, MoeFusionKind::GatherMatmul, gather, op))
        continue;
      rewriter.modifyOpInPlace(op, [&] {
        if (lhs) {
          op.getLhsMutable().assign(gather.getInput());
          op.getLhsGatherMutable().assign(gather.getIndices());
        } else {
          op.getRhsMutable().assign(gather.getInput());
          op.getRhsGatherMutable().assign(gather.getIndices());
        }
      });
      if (gather->use_empty())
        rewriter.eraseOp(gather);
      return success();
    }
    return rewriter.notifyMatchFailure(op, "no foldable gathered operand");
  }

  ControlMoeFusionFn control;
};

} // namespace

void mlir::moe::populateMoeFuseGatherMatmulPatterns(
    RewritePatternSet &patterns, const ControlMoeFusionFn &control) {
  patterns.add<FuseGatherMatmul, FuseGatherWgrad>(patterns.getContext(),
                                                  control);
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
