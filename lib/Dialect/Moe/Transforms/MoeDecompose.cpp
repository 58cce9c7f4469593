//===- MoeDecompose.cpp - moe.ffn into the primitive chain ----------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Dialect/Moe/Transforms/Passes.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"
#include "moe-mlir/Dialect/Moe/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#define DEBUG_TYPE "moe-decompose"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEDECOMPOSEPASS
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

/// moe.ffn(x, logits, w_up, w_down[, bias][, w_up_bias, w_down_bias]
///        [, w_up_scale, w_down_scale])
///   => route, cumsum, get_indices, get_indptr, gather, grouped_matmul, glu,
///      grouped_matmul, scatter, tensor.expand_shape, combine
/// (the expert biases are the grouped matmuls' biases, the weight scales
/// and formats theirs too)
struct DecomposeFfn : OpRewritePattern<FfnOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(FfnOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto xType = op.getX().getType();
    Type f = xType.getElementType();
    Type f32 = rewriter.getF32Type();
    Type i32 = rewriter.getI32Type();
    int64_t t = xType.getDimSize(0), h = op.getHiddenSize();
    int64_t e = op.getNumExperts(), k = op.getK();
    int64_t inter = op.getIntermediateSize();
    int64_t m = ShapedType::isDynamic(t) ? ShapedType::kDynamic : t * k;

    auto route = RouteOp::create(
        rewriter, loc, RankedTensorType::get({t, k}, f32),
        RankedTensorType::get({t, k}, i32), op.getLogits(), op.getBias(),
        op.getKAttr(), op.getScoringAttr(), op.getNormalizeAttr(),
        op.getNGroupAttr(), op.getTopkGroupAttr(), op.getGroupScoreAttr(),
        op.getScalingAttr());
    Value ids = route.getIndices();
    auto cumsum = CumsumOp::create(rewriter, loc, ids, e);
    auto indices = GetIndicesOp::create(rewriter, loc, cumsum, ids);
    auto offsets = GetIndptrOp::create(
        rewriter, loc, RankedTensorType::get({e + 1}, i32), cumsum, e,
        /*inclusive=*/false);
    auto rows =
        GatherOp::create(rewriter, loc, op.getX(), indices.getTokenIndices());
    // Each GEMM's optional operands: its bias, then its weight scales.
    auto optional = [](Value bias, Value scale) {
      SmallVector<Value, 2> operands;
      for (Value v : {bias, scale})
        if (v)
          operands.push_back(v);
      return operands;
    };
    auto up = GroupedMatmulOp::create(
        rewriter, loc, RankedTensorType::get({m, 2 * inter}, f), rows,
        op.getWUp(), offsets, optional(op.getWUpBias(), op.getWUpScale()),
        op.getTransposeWeights(), op.getWeightFormat(), op.getScaleFmt());
    auto act = GluOp::create(rewriter, loc, up, op.getActivationAttr(),
                             op.getLayoutAttr(), op.getAlphaAttr(),
                             op.getLimitAttr(), op.getUpBiasAttr());
    auto down = GroupedMatmulOp::create(
        rewriter, loc, RankedTensorType::get({m, h}, f), act, op.getWDown(),
        offsets, optional(op.getWDownBias(), op.getWDownScale()),
        op.getTransposeWeights(), op.getWeightFormat(), op.getScaleFmt());
    auto scattered =
        ScatterOp::create(rewriter, loc, down, indices.getReverseIndices());

    SmallVector<OpFoldResult> outputShape = {
        ShapedType::isDynamic(t)
            ? OpFoldResult(tensor::DimOp::create(rewriter, loc, op.getX(), 0)
                               .getResult())
            : OpFoldResult(rewriter.getIndexAttr(t)),
        rewriter.getIndexAttr(k), rewriter.getIndexAttr(h)};
    auto perSlot = tensor::ExpandShapeOp::create(
        rewriter, loc, RankedTensorType::get({t, k, h}, f), scattered,
        ArrayRef<ReassociationIndices>{{0, 1}, {2}}, outputShape);
    rewriter.replaceOpWithNewOp<CombineOp>(op, perSlot, route.getWeights());
    return success();
  }
};

} // namespace

void mlir::moe::populateMoeDecomposePatterns(RewritePatternSet &patterns) {
  patterns.add<DecomposeFfn>(patterns.getContext());
  populateMoeDecomposeFfnGradPatterns(patterns);
}

namespace {
struct MoeDecomposePass
    : mlir::moe::impl::MoeDecomposePassBase<MoeDecomposePass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMoeDecomposePatterns(patterns);
    // One walk, no folding or dead-code elimination: only moe.ffn and
    // moe.ffn_grad change.
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};
} // namespace
