//===- FusedForms.cpp - grouped_matmul and route_dispatch unfused ---------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// moe.grouped_matmul -> moe.expert_gemm and moe.route_dispatch ->
// moe.route + moe.dispatch: dialect-level rewrites into the forms both
// lowerings implement, so each has one GEMM and one dispatch
// implementation.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Dialect/Moe/Transforms/Transforms.h"

#include "FusionUtils.h"

using namespace mlir;
using namespace mlir::moe;

ExpertGemmOp mlir::moe::replaceWithExpertGemm(RewriterBase &rewriter,
                                              GroupedMatmulOp op) {
  // ExpertGemmParts holds the one description of a grouped_matmul as an
  // expert_gemm (no gather / scatter / scale / GLU, alpha 1, up_bias 0).
  ExpertGemmParts parts;
  [[maybe_unused]] bool matched = parts.match(op.getResult());
  assert(matched && "a grouped_matmul is an expert GEMM form");
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  ExpertGemmOp gemm =
      parts.build(rewriter, op.getLoc(), op.getResult().getType());
  rewriter.replaceOp(op, gemm);
  return gemm;
}

ExpertGemmOp mlir::moe::buildGradientGemm(OpBuilder &builder,
                                          ExpertGemmGluGradOp op) {
  Builder b(op.getContext());
  ExpertGemmParts parts;
  parts.lhs = op.getLhs();
  parts.rhs = op.getRhs();
  parts.offsets = op.getOffsets();
  parts.gather = op.getGather();
  parts.transposeRhs = op.getTransposeRhsAttr();
  parts.alpha = b.getF32FloatAttr(1.0f);
  parts.upBias = b.getF32FloatAttr(0.0f);
  parts.weightFormat =
      WeightFormatAttr::get(b.getContext(), WeightFormat::plain);
  parts.scaleFmt = ScaleFmtAttr::get(b.getContext(), ScaleFmt::f32);
  auto type = op.getScaledAct().getType();
  return parts.build(builder, op.getLoc(),
                     RankedTensorType::get(type.getShape(), b.getF32Type()));
}

std::pair<RouteOp, DispatchOp>
mlir::moe::replaceWithRouteAndDispatch(RewriterBase &rewriter,
                                       RouteDispatchOp op) {
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
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
  return {route, dispatch};
}

namespace {
struct GroupedMatmulToExpertGemm : OpRewritePattern<GroupedMatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GroupedMatmulOp op,
                                PatternRewriter &rewriter) const override {
    replaceWithExpertGemm(rewriter, op);
    return success();
  }
};

struct SplitRouteDispatch : OpRewritePattern<RouteDispatchOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RouteDispatchOp op,
                                PatternRewriter &rewriter) const override {
    replaceWithRouteAndDispatch(rewriter, op);
    return success();
  }
};
} // namespace

void mlir::moe::populateMoeFusedFormPatterns(RewritePatternSet &patterns) {
  patterns.add<GroupedMatmulToExpertGemm, SplitRouteDispatch>(
      patterns.getContext());
}
