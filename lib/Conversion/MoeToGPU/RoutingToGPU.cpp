//===- RoutingToGPU.cpp - moe.topk / moe.route as GPU kernels -------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The patterns that lower moe.topk, moe.route and moe.route_dispatch, and
// the kernel each op gets; the kernels are built in Routing/ (Routing.h
// lists its files). One warp per token row when E <= 512 and n_group <= 32
// (the row in the lanes' registers, each of the k picks a warp-wide
// argmax), else one thread per row.
//
// moe.route_dispatch is split into route + dispatch, whose kernels are in
// DispatchToGPU.cpp; with route-dispatch-small (the default), a launch
// with few rows (T <= 64, k <= 32, E <= 256) is one kernel instead, a
// thread-block cluster of up to 8 blocks (routeDispatchCluster), chosen on
// the host.
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"
#include "Routing/Routing.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;
using namespace mlir::moe::gpu_lowering::routing;

using CmpI = arith::CmpIPredicate;

namespace {

struct TopKToGPU : OpRewritePattern<TopKOp> {
  TopKToGPU(MLIRContext *ctx, WarpSelectMode mode)
      : OpRewritePattern(ctx), mode(mode) {}

  LogicalResult matchAndRewrite(TopKOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto valuesType = op.getValues().getType();
    auto indicesType = op.getIndices().getType();
    int64_t e = op.getInput().getType().getDimSize(1);
    int64_t k = static_cast<int64_t>(op.getK());
    Value input = toBuffer(b, op.getInput());
    Value t = b.memDim(input, 0);
    Value values = allocBuffer(b, valuesType, dynRows(valuesType, t));
    Value indices = allocBuffer(b, indicesType, dynRows(indicesType, t));
    if (useWarpPerRow(e, 1))
      topkPerWarp(b, k, e, input, t, values, indices, mode);
    else
      topkPerThread(b, k, e, input, t, values, indices);
    rewriter.replaceOp(op, {toTensor(b, values), toTensor(b, indices)});
    return success();
  }

  WarpSelectMode mode;
};

/// The route kernels' view of a moe.route or moe.route_dispatch (weights
/// and indices allocated for T rows).
template <typename OpT> RouteConfig routeConfigOf(LoweringBuilder &b, OpT op) {
  auto weightsType = op.getWeights().getType();
  auto indicesType = op.getIndices().getType();
  RouteConfig cfg;
  cfg.w = weightsType.getElementType();
  cfg.e = op.getLogits().getType().getDimSize(1);
  cfg.k = static_cast<int64_t>(op.getK());
  cfg.nGroup = op.getNGroup();
  cfg.topkGroup = op.getTopkGroup();
  cfg.perGroup = cfg.e / cfg.nGroup;
  cfg.softmax = op.getScoring() == ScoringFn::softmax;
  cfg.top2 = op.getGroupScore() == GroupScore::top2_sum;
  cfg.normalize = op.getNormalize();
  cfg.scaling = op.getScaling().convertToFloat();
  cfg.logits = toBuffer(b, op.getLogits());
  cfg.bias = op.getBias() ? toBuffer(b, op.getBias()) : Value();
  cfg.t = b.memDim(cfg.logits, 0);
  cfg.weights = allocBuffer(b, weightsType, dynRows(weightsType, cfg.t));
  cfg.indices = allocBuffer(b, indicesType, dynRows(indicesType, cfg.t));
  return cfg;
}

struct RouteToGPU : OpRewritePattern<RouteOp> {
  RouteToGPU(MLIRContext *ctx, WarpSelectMode mode)
      : OpRewritePattern(ctx), mode(mode) {}

  LogicalResult matchAndRewrite(RouteOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    RouteConfig cfg = routeConfigOf(b, op);
    if (useWarpPerRow(cfg.e, cfg.nGroup))
      routePerWarp(b, cfg, mode);
    else
      routePerThread(b, cfg);
    rewriter.replaceOp(op,
                       {toTensor(b, cfg.weights), toTensor(b, cfg.indices)});
    return success();
  }

  WarpSelectMode mode;
};

/// moe.route_dispatch as one kernel when the rows are few (option
/// route-dispatch-small): the host picks it for T <= kClusterRows, else the
/// route kernel and moe.dispatch's kernels (what SplitRouteDispatch +
/// RouteToGPU + DispatchToGPU emit). Needs the warp-per-row route, k <=
/// kClusterMaxK and E <= kClusterMaxExperts; otherwise the op is split.
struct RouteDispatchToGPU : OpRewritePattern<RouteDispatchOp> {
  RouteDispatchToGPU(MLIRContext *ctx, WarpSelectMode mode,
                     bool allowDependents)
      : OpRewritePattern(ctx, /*benefit=*/2), mode(mode),
        allowDependents(allowDependents) {}

  LogicalResult matchAndRewrite(RouteDispatchOp op,
                                PatternRewriter &rewriter) const override {
    int64_t e = op.getLogits().getType().getDimSize(1);
    if (!useWarpPerRow(e, op.getNGroup()) || e > kClusterMaxExperts ||
        static_cast<int64_t>(op.getK()) > kClusterMaxK)
      return failure();
    LoweringBuilder b(op.getLoc(), rewriter);
    RouteConfig cfg = routeConfigOf(b, op);
    auto mapType = op.getReverseIndices().getType();
    Value m = b.mul(cfg.t, b.idx(cfg.k));
    Value mI32 = b.toI32(m);
    Value offsets = allocBuffer(b, op.getOffsets().getType(), {});
    Value rev = allocBuffer(b, mapType, dynRows(mapType, m));
    Value tok = allocBuffer(b, mapType, dynRows(mapType, m));
    Value small = b.cmpi(CmpI::ule, cfg.t, b.idx(kClusterRows));
    scf::IfOp::create(
        b, small,
        [&](OpBuilder &nested, Location loc) {
          LoweringBuilder nb(loc, nested);
          routeDispatchCluster(nb, cfg, mode, m, offsets, rev, tok,
                               allowDependents);
          scf::YieldOp::create(nb);
        },
        [&](OpBuilder &nested, Location loc) {
          LoweringBuilder nb(loc, nested);
          routePerWarp(nb, cfg, mode);
          Value ids = cfg.indices;
          emitDispatch(nb, ids, cfg.k, e, m, mI32, offsets, rev, tok,
                       mode.matchSync);
          scf::YieldOp::create(nb);
        });
    rewriter.replaceOp(op, {toTensor(b, cfg.weights), toTensor(b, cfg.indices),
                            toTensor(b, offsets), toTensor(b, rev),
                            toTensor(b, tok)});
    return success();
  }

  WarpSelectMode mode;
  bool allowDependents;
};

} // namespace

void mlir::moe::populateRoutingToGPUPatterns(RewritePatternSet &patterns,
                                             StringRef chip,
                                             bool smallRouteDispatch,
                                             bool allowDependents) {
  // redux.sync: sm_80 and later ("sm_90a" -> 90); match.sync: sm_70.
  WarpSelectMode mode;
  mode.redux = chipAtLeast(chip, 80);
  mode.matchSync = chipAtLeast(chip, 70);
  patterns.add<TopKToGPU, RouteToGPU>(patterns.getContext(), mode);
  // The one-kernel form runs in a thread-block cluster (sm_90 and later);
  // older chips keep the split form (route, then dispatch).
  if (smallRouteDispatch && chipAtLeast(chip, 90))
    patterns.add<RouteDispatchToGPU>(patterns.getContext(), mode,
                                     allowDependents);
}
