//===- MoeDecomposeFfnGrad.cpp - moe.ffn_grad into the primitive chain ----===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The backward of a whole MoE layer as primitives (bench/NOTES.md v74).
// Per dispatched row r (expert e, token t, routing weight w_r):
//
//   forward, recomputed:  h_r = x_t W1_e (+ b1_e), a_r = glu(h_r)
//                         (saved form: h, the weights and ids given by
//                         moe.ffn_train; only a_r = glu(h_r) recomputed)
//   g_r   = dy_t W2_e^T                      (dgrad of the down GEMM)
//   dw_r  = <g_r, a_r> (+ <dy_t, b2_e>)       (the routing weight's grad)
//   dh_r  = glu_grad(w_r g_r, h_r)
//   dx_t  = sum over t's k rows of dh_r W1_e^T
//   dW2_e = sum_r (w_r a_r)^T dy_t,  dW1_e = sum_r x_t^T dh_r
//   db2_e = sum_r w_r dy_t,          db1_e = sum_r dh_r
//   dlogits = route_grad(dw scattered back to T x k)
//
// Exact forms with existing ops: the per-row scale w_r * v_r is a
// moe.combine of one slot (M x 1 x N with weights M x 1); the sum over the
// k slots is moe.combine without weights; <dy_t, b2_e> is a grouped matmul
// against b2 as an E x H x 1 matrix; the bias gradients are the weight
// gradients of a constant-1 input column (a bias is the weight of an input
// that is always 1), so moe.grouped_matmul_wgrad of an M x 1 ones column
// gives the per-expert row sums E x 1 x N. The one new primitive is
// moe.row_dot.
//
//===----------------------------------------------------------------------===//

#include "FfnChain.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"
#include "moe-mlir/Dialect/Moe/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::moe;

namespace {

/// moe.ffn_grad(dy, x, logits, w_up, w_down[, bias][, w_up_bias,
///             w_down_bias][, h, weights, indices])
///   => the forward's route, cumsum, get_indices, get_indptr, gather,
///      grouped_matmul, glu (saved form: cumsum, get_indices, get_indptr of
///      the saved ids, gather, glu of the saved h); then gather(dy),
///      grouped_matmul (dgrad), row_dot, combine (row scales), glu_grad,
///      grouped_matmul (dgrad), scatter + combine (dx), scatter + route_grad
///      (dlogits), grouped_matmul_wgrad (weights and biases)
struct DecomposeFfnGrad : OpRewritePattern<FfnGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(FfnGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto xType = op.getX().getType();
    Type f = xType.getElementType();
    Type f32 = rewriter.getF32Type();
    int64_t t = xType.getDimSize(0), h = op.getHiddenSize();
    int64_t e = op.getNumExperts(), k = op.getK();
    int64_t inter = op.getIntermediateSize();
    bool dynamic = ShapedType::isDynamic(t);
    int64_t m = dynamic ? ShapedType::kDynamic : t * k;
    bool tw = op.getTransposeWeights();
    auto tensorOf = [](ArrayRef<int64_t> shape, Type type) {
      return RankedTensorType::get(shape, type);
    };
    auto index = [&](int64_t v) -> OpFoldResult {
      return rewriter.getIndexAttr(v);
    };
    // Dimension 0 of `v` (T or M) as an OpFoldResult.
    auto rowsOf = [&](Value v) -> OpFoldResult {
      int64_t d = cast<RankedTensorType>(v.getType()).getDimSize(0);
      if (!ShapedType::isDynamic(d))
        return index(d);
      return tensor::DimOp::create(rewriter, loc, v, 0).getResult();
    };
    auto expand = [&](Value v, ArrayRef<int64_t> shape,
                      ArrayRef<ReassociationIndices> groups,
                      ArrayRef<OpFoldResult> outputShape) -> Value {
      auto type =
          tensorOf(shape, cast<RankedTensorType>(v.getType()).getElementType());
      return tensor::ExpandShapeOp::create(rewriter, loc, type, v, groups,
                                           outputShape);
    };
    auto collapse = [&](Value v,
                        ArrayRef<ReassociationIndices> groups) -> Value {
      return tensor::CollapseShapeOp::create(rewriter, loc, v, groups);
    };
    // w_r * v_r for every row of `v` (M x N): one-slot combine.
    auto scaleRows = [&](Value v, Value rowWeights) -> Value {
      int64_t n = cast<RankedTensorType>(v.getType()).getDimSize(1);
      Value slots =
          expand(v, {m, 1, n}, {{0, 1}, {2}}, {rowsOf(v), index(1), index(n)});
      return CombineOp::create(rewriter, loc, slots, rowWeights);
    };

    // The forward: routing, dispatch metadata, h and a. Recomputed as
    // moe.ffn's chain, or (saved form) the metadata derived from the saved
    // ids, h taken as saved and only a = glu(h) recomputed.
    FfnChain chain;
    if (op.hasSaved()) {
      chain = buildFfnMetadata(rewriter, loc, op.getSavedWeights(),
                               op.getSavedIndices(), e);
      chain.rows = GatherOp::create(rewriter, loc, op.getX(), chain.tokens);
      chain.up = op.getSavedH();
      chain.act = buildFfnGlu(rewriter, op, chain.up);
    } else {
      chain = buildFfnRouting(rewriter, op);
      buildFfnUp(rewriter, op, chain);
    }
    Value ids = chain.ids, rev = chain.reverse, tok = chain.tokens;
    Value offsets = chain.offsets;
    Value xRows = chain.rows, up = chain.up, act = chain.act;
    auto gemm = [&](Value lhs, Value rhs, Value bias, bool transpose, int64_t n,
                    Type o) -> Value {
      SmallVector<Value, 1> optional;
      if (bias)
        optional.push_back(bias);
      return GroupedMatmulOp::create(rewriter, loc, tensorOf({m, n}, o), lhs,
                                     rhs, offsets, optional, transpose,
                                     WeightFormat::plain, ScaleFmt::f32);
    };
    // The weight gradients' element type (f32, or the weights' type: the
    // f32 sums rounded once); the expert biases' are f32.
    Type dwType = op.getDwUp().getType().getElementType();
    auto wgrad = [&](Value lhs, Value rhs, Type o) -> Value {
      int64_t kk = cast<RankedTensorType>(lhs.getType()).getDimSize(1);
      int64_t nn = cast<RankedTensorType>(rhs.getType()).getDimSize(1);
      return GroupedMatmulWgradOp::create(rewriter, loc,
                                          tensorOf({e, kk, nn}, o), lhs, rhs,
                                          offsets, /*acc=*/Value());
    };

    // Each row's routing weight: weights (T x k) flattened to (T*k) x 1 and
    // gathered into expert order.
    Value flatWeights =
        collapse(expand(chain.weights, {t, k, 1}, {{0}, {1, 2}},
                        {rowsOf(op.getX()), index(k), index(1)}),
                 {{0, 1}, {2}});
    Value rowWeights = GatherOp::create(rewriter, loc, flatWeights, rev);

    // The down projection's input gradient and the routing weights' one.
    Value dyRows = GatherOp::create(rewriter, loc, op.getDy(), tok);
    Value g = gemm(dyRows, op.getWDown(), Value(), !tw, inter, f);
    Value biasDot;
    if (Value downBias = op.getWDownBias()) {
      Value column = expand(downBias, {e, h, 1}, {{0}, {1, 2}},
                            {index(e), index(h), index(1)});
      biasDot =
          collapse(gemm(dyRows, column, Value(), false, 1, f32), {{0, 1}});
    }
    Value dwRows =
        RowDotOp::create(rewriter, loc, tensorOf({m}, f32), g, act, biasDot);
    Value dScattered = ScatterOp::create(
        rewriter, loc,
        expand(dwRows, {m, 1}, {{0, 1}}, {rowsOf(dwRows), index(1)}), rev);
    Value dWeights = expand(collapse(dScattered, {{0, 1}}), {t, k}, {{0, 1}},
                            {rowsOf(op.getX()), index(k)});
    Value dLogits = RouteGradOp::create(
        rewriter, loc, op.getLogits().getType(), dWeights, op.getLogits(), ids,
        op.getScoringAttr(), op.getNormalizeAttr(), op.getScalingAttr());

    // Through the GLU and the up projection.
    Value dAct = scaleRows(g, rowWeights);
    Value dUp = GluGradOp::create(
        rewriter, loc, dAct, up, op.getActivationAttr(), op.getLayoutAttr(),
        op.getAlphaAttr(), op.getLimitAttr(), op.getUpBiasAttr());
    Value dxRows = gemm(dUp, op.getWUp(), Value(), !tw, h, f);
    Value dxSlots =
        expand(ScatterOp::create(rewriter, loc, dxRows, rev), {t, k, h},
               {{0, 1}, {2}}, {rowsOf(op.getX()), index(k), index(h)});
    Value dx = CombineOp::create(rewriter, loc, dxSlots, Value());

    // The weight gradients, in the weights' layouts. The routing weight
    // scales the activation rows (w_r a_r, beside the activation's other
    // uses: moe-fuse-glu-grad computes both in one epilogue), so that dW2
    // reads the upstream gradient's token rows as they are (through the
    // gather's indices once fused).
    Value scaledAct = scaleRows(act, rowWeights);
    Value dwDown = tw ? wgrad(dyRows, scaledAct, dwType)
                      : wgrad(scaledAct, dyRows, dwType);
    Value dwUp = tw ? wgrad(dUp, xRows, dwType) : wgrad(xRows, dUp, dwType);
    SmallVector<Value> results = {dx, dLogits, dwUp, dwDown};
    if (op.getExpertBias()) {
      Value one =
          arith::ConstantOp::create(rewriter, loc, rewriter.getFloatAttr(f, 1));
      SmallVector<Value> dynSizes;
      if (dynamic)
        dynSizes.push_back(
            tensor::DimOp::create(rewriter, loc, xRows, 0).getResult());
      Value ones = tensor::SplatOp::create(rewriter, loc, one,
                                           tensorOf({m, 1}, f), dynSizes);
      Value dOut = scaleRows(dyRows, rowWeights);
      results.push_back(collapse(wgrad(ones, dUp, f32), {{0, 1}, {2}}));
      results.push_back(collapse(wgrad(ones, dOut, f32), {{0, 1}, {2}}));
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

} // namespace

void mlir::moe::populateMoeDecomposeFfnGradPatterns(
    RewritePatternSet &patterns) {
  patterns.add<DecomposeFfnGrad>(patterns.getContext());
}
