//===- FusedForms.cpp - rewrites both lowerings start from ----------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "FusedForms.h"

using namespace mlir;
using namespace mlir::moe;

void mlir::moe::replaceWithExpertGemm(GroupedMatmulOp op,
                                      PatternRewriter &rewriter) {
  rewriter.replaceOpWithNewOp<ExpertGemmOp>(
      op, op.getResult().getType(), op.getLhs(), op.getRhs(), op.getOffsets(),
      /*gather=*/Value(), op.getBias(), /*scatter=*/Value(),
      /*scale=*/Value(), op.getTransposeRhsAttr(),
      /*activation=*/ActivationAttr(), /*layout=*/GluLayoutAttr(),
      /*alpha=*/rewriter.getF32FloatAttr(1.0f), /*limit=*/FloatAttr(),
      /*up_bias=*/rewriter.getF32FloatAttr(0.0f));
}

void mlir::moe::replaceWithRouteAndDispatch(RouteDispatchOp op,
                                            PatternRewriter &rewriter) {
  auto route = RouteOp::create(
      rewriter, op.getLoc(), op.getWeights().getType(),
      op.getIndices().getType(), op.getLogits(), op.getBias(), op.getKAttr(),
      op.getScoringAttr(), op.getNormalizeAttr(), op.getNGroupAttr(),
      op.getTopkGroupAttr(), op.getGroupScoreAttr(), op.getScalingAttr());
  auto dispatch = DispatchOp::create(rewriter, op.getLoc(), route.getIndices(),
                                     op.getLogits().getType().getDimSize(1));
  rewriter.replaceOp(op, {route.getWeights(), route.getIndices(),
                          dispatch.getOffsets(), dispatch.getReverseIndices(),
                          dispatch.getTokenIndices()});
}

namespace {
struct GroupedMatmulToExpertGemm : OpRewritePattern<GroupedMatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GroupedMatmulOp op,
                                PatternRewriter &rewriter) const override {
    replaceWithExpertGemm(op, rewriter);
    return success();
  }
};

struct SplitRouteDispatch : OpRewritePattern<RouteDispatchOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RouteDispatchOp op,
                                PatternRewriter &rewriter) const override {
    replaceWithRouteAndDispatch(op, rewriter);
    return success();
  }
};
} // namespace

void mlir::moe::populateFusedFormPatterns(RewritePatternSet &patterns) {
  patterns.add<GroupedMatmulToExpertGemm, SplitRouteDispatch>(
      patterns.getContext());
}
