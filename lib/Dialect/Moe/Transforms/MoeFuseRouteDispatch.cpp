//===- MoeFuseRouteDispatch.cpp - route + dispatch -> route_dispatch ------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Dialect/Moe/Transforms/Passes.h"

#include "FusionUtils.h"

#define DEBUG_TYPE "moe-fuse-route-dispatch"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEFUSEROUTEDISPATCHPASS
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

/// dispatch(route(logits).indices)  =>  route_dispatch(logits)
struct FuseRouteDispatch : OpRewritePattern<DispatchOp> {
  FuseRouteDispatch(MLIRContext *ctx, ControlMoeFusionFn control)
      : OpRewritePattern(ctx), control(std::move(control)) {}

  LogicalResult matchAndRewrite(DispatchOp dispatch,
                                PatternRewriter &rewriter) const override {
    auto route = dispatch.getIndices().getDefiningOp<RouteOp>();
    if (!route)
      return rewriter.notifyMatchFailure(dispatch, "ids not from moe.route");
    int64_t e = route.getLogits().getType().getDimSize(1);
    if (static_cast<int64_t>(dispatch.getNumExperts()) != e)
      return rewriter.notifyMatchFailure(dispatch, "expert counts differ");
    if (!shouldFuse(control, MoeFusionKind::RouteDispatch, route, dispatch))
      return rewriter.notifyMatchFailure(dispatch, "policy declined");
    // Build at the route (its operands dominate; dispatch's results are
    // only used after the dispatch, which follows the route).
    rewriter.setInsertionPoint(route);
    auto fused = RouteDispatchOp::create(
        rewriter, route.getLoc(),
        TypeRange{route.getWeights().getType(), route.getIndices().getType(),
                  dispatch.getOffsets().getType(),
                  dispatch.getReverseIndices().getType(),
                  dispatch.getTokenIndices().getType()},
        route.getLogits(), route.getBias(), route.getKAttr(),
        route.getScoringAttr(), route.getNormalizeAttr(), route.getNGroupAttr(),
        route.getTopkGroupAttr(), route.getGroupScoreAttr(),
        route.getScalingAttr());
    rewriter.replaceOp(dispatch, {fused.getOffsets(), fused.getReverseIndices(),
                                  fused.getTokenIndices()});
    rewriter.replaceOp(route, {fused.getWeights(), fused.getIndices()});
    return success();
  }

  ControlMoeFusionFn control;
};

} // namespace

void mlir::moe::populateMoeFuseRouteDispatchPatterns(
    RewritePatternSet &patterns, const ControlMoeFusionFn &control) {
  patterns.add<FuseRouteDispatch>(patterns.getContext(), control);
}

namespace {
struct MoeFuseRouteDispatchPass
    : mlir::moe::impl::MoeFuseRouteDispatchPassBase<MoeFuseRouteDispatchPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMoeFuseRouteDispatchPatterns(patterns);
    applyFusionPatterns(getOperation(), std::move(patterns));
  }
};
} // namespace
