//===- MoeFuseScatter.cpp - scatter + weights -> matmul epilogue ----------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Dialect/Moe/Transforms/Passes.h"

#include "FusionUtils.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

#define DEBUG_TYPE "moe-fuse-scatter"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEFUSESCATTERPASS
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

/// `rev` is a permutation of [0, M) by construction: the reverse indices of
/// moe.get_indices or moe.dispatch. Only then is "write row m to rev[m]"
/// independent of the order rows are written in.
static bool isDispatchPermutation(Value rev) {
  if (auto gi = rev.getDefiningOp<GetIndicesOp>())
    return rev == gi.getReverseIndices();
  if (auto d = rev.getDefiningOp<DispatchOp>())
    return rev == d.getReverseIndices();
  return false;
}

namespace {

/// combine(expand_shape(scatter(gemm(...), rev)), w)
///   => combine(expand_shape(expert_gemm(...) scatter(rev) scale(flat(w))))
/// and, without routing weights (the input gradient of a layer's backward:
/// each token's dispatched rows summed),
/// combine(expand_shape(scatter(gemm(...), rev)))
///   => combine(expand_shape(expert_gemm(...) scatter(rev)))
struct FuseScatter : OpRewritePattern<CombineOp> {
  FuseScatter(MLIRContext *ctx, ControlMoeFusionFn control)
      : OpRewritePattern(ctx), control(std::move(control)) {}

  LogicalResult matchAndRewrite(CombineOp combine,
                                PatternRewriter &rewriter) const override {
    Value weights = combine.getWeights();
    auto expand = combine.getInput().getDefiningOp<tensor::ExpandShapeOp>();
    if (!expand || !expand->hasOneUse() ||
        expand.getReassociationIndices() !=
            SmallVector<ReassociationIndices>{{0, 1}, {2}})
      return rewriter.notifyMatchFailure(combine,
                                         "not a [[0, 1], [2]] reshape");
    auto scatter = expand.getSrc().getDefiningOp<ScatterOp>();
    if (!scatter || !scatter->hasOneUse())
      return rewriter.notifyMatchFailure(combine, "not a single-use scatter");
    if (!isDispatchPermutation(scatter.getIndices()))
      return rewriter.notifyMatchFailure(
          combine, "scatter indices are not a dispatch permutation");
    ExpertGemmParts parts;
    if (!parts.match(scatter.getInput()) || !parts.op->hasOneUse())
      return rewriter.notifyMatchFailure(combine, "not a single-use GEMM");
    if (parts.scatter || parts.scale)
      return rewriter.notifyMatchFailure(combine, "GEMM already scatters");
    if (!shouldFuse(control, MoeFusionKind::ScatterEpilogue, parts.op, combine))
      return rewriter.notifyMatchFailure(combine, "policy declined");

    Location loc = combine.getLoc();
    parts.scatter = scatter.getIndices();
    if (weights) {
      auto weightsType = cast<RankedTensorType>(weights.getType());
      int64_t flat =
          ShapedType::isDynamic(weightsType.getDimSize(0))
              ? ShapedType::kDynamic
              : weightsType.getDimSize(0) * weightsType.getDimSize(1);
      parts.scale = tensor::CollapseShapeOp::create(
          rewriter, loc,
          RankedTensorType::get({flat}, weightsType.getElementType()), weights,
          ArrayRef<ReassociationIndices>{{0, 1}});
    }
    Operation *gemm = parts.op;
    auto fused =
        parts.build(rewriter, gemm->getLoc(), scatter.getResult().getType());
    auto newExpand = tensor::ExpandShapeOp::create(
        rewriter, expand.getLoc(), expand.getResultType(), fused,
        expand.getReassociationIndices(), expand.getMixedOutputShape());
    rewriter.replaceOpWithNewOp<CombineOp>(combine, newExpand.getResult(),
                                           /*weights=*/Value());
    rewriter.eraseOp(expand);
    rewriter.eraseOp(scatter);
    rewriter.eraseOp(gemm);
    return success();
  }

  ControlMoeFusionFn control;
};

} // namespace

void mlir::moe::populateMoeFuseScatterPatterns(
    RewritePatternSet &patterns, const ControlMoeFusionFn &control) {
  patterns.add<FuseScatter>(patterns.getContext(), control);
}

namespace {
struct MoeFuseScatterPass
    : mlir::moe::impl::MoeFuseScatterPassBase<MoeFuseScatterPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMoeFuseScatterPatterns(patterns);
    applyFusionPatterns(getOperation(), std::move(patterns));
  }
};
} // namespace
