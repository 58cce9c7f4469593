//===- FfnChain.h - moe.ffn's primitive chain, built in pieces --*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The forward chain of docs/Contract.md section 3, built once for every
// composite that contains it: moe.ffn (the whole chain), moe.ffn_train (the
// whole chain, plus h, weights and ids as results) and moe.ffn_grad (the
// recomputing form rebuilds routing, metadata, h and the activation; the
// saved form starts from the saved weights and ids, metadata only).
// `OpTy` is any of the three: they share the operand and attribute getters.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_LIB_DIALECT_MOE_TRANSFORMS_FFNCHAIN_H
#define MOE_MLIR_LIB_DIALECT_MOE_TRANSFORMS_FFNCHAIN_H

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir {
namespace moe {

/// The values of the forward chain, as far as it has been built.
struct FfnChain {
  /// Routing: T x k f32 weights and T x k i32 ids.
  Value weights, ids;
  /// Dispatch metadata: (T*k) reverse / token indices, (E+1) offsets.
  Value reverse, tokens, offsets;
  /// gather(x), the up projection's pre-activation h and glu(h).
  Value rows, up, act;
};

/// cumsum -> get_indices -> get_indptr on `ids` (T x k i32) for `e`
/// experts; `weights` is recorded alongside.
inline FfnChain buildFfnMetadata(RewriterBase &rewriter, Location loc,
                                 Value weights, Value ids, int64_t e) {
  Type i32 = rewriter.getI32Type();
  auto cumsum = CumsumOp::create(rewriter, loc, ids, e);
  auto indices = GetIndicesOp::create(rewriter, loc, cumsum, ids);
  Value offsets =
      GetIndptrOp::create(rewriter, loc, RankedTensorType::get({e + 1}, i32),
                          cumsum, e, /*inclusive=*/false);
  return {weights,
          ids,
          indices.getReverseIndices(),
          indices.getTokenIndices(),
          offsets,
          Value(),
          Value(),
          Value()};
}

/// route (f32 weights) -> cumsum -> get_indices -> get_indptr.
template <typename OpTy>
FfnChain buildFfnRouting(RewriterBase &rewriter, OpTy op) {
  Location loc = op.getLoc();
  int64_t t = op.getX().getType().getDimSize(0), k = op.getK();
  auto route = RouteOp::create(
      rewriter, loc, RankedTensorType::get({t, k}, rewriter.getF32Type()),
      RankedTensorType::get({t, k}, rewriter.getI32Type()), op.getLogits(),
      op.getBias(), op.getKAttr(), op.getScoringAttr(), op.getNormalizeAttr(),
      op.getNGroupAttr(), op.getTopkGroupAttr(), op.getGroupScoreAttr(),
      op.getScalingAttr());
  return buildFfnMetadata(rewriter, loc, route.getWeights(), route.getIndices(),
                          op.getNumExperts());
}

/// The dispatched rows (T*k, dynamic when T is).
template <typename OpTy> int64_t ffnRows(OpTy op) {
  int64_t t = op.getX().getType().getDimSize(0);
  return ShapedType::isDynamic(t) ? ShapedType::kDynamic : t * op.getK();
}

/// A grouped matmul of the chain's offsets with the op's weight format;
/// its optional operands are `bias`, then `scale` (each when non-null).
template <typename OpTy>
Value buildFfnGemm(RewriterBase &rewriter, OpTy op, const FfnChain &chain,
                   Value lhs, Value rhs, Value bias, Value scale, int64_t n) {
  SmallVector<Value, 2> optional;
  for (Value v : {bias, scale})
    if (v)
      optional.push_back(v);
  Type f = op.getX().getType().getElementType();
  return GroupedMatmulOp::create(
      rewriter, op.getLoc(), RankedTensorType::get({ffnRows(op), n}, f), lhs,
      rhs, chain.offsets, optional, op.getTransposeWeights(),
      op.getWeightFormat(), op.getScaleFmt());
}

/// glu(`input`) with the op's GLU attributes.
template <typename OpTy>
Value buildFfnGlu(RewriterBase &rewriter, OpTy op, Value input) {
  return GluOp::create(rewriter, op.getLoc(), input, op.getActivationAttr(),
                       op.getLayoutAttr(), op.getAlphaAttr(), op.getLimitAttr(),
                       op.getUpBiasAttr());
}

/// gather(x) -> grouped_matmul(w_up, + w_up_bias) = h -> glu = act, on the
/// chain's metadata.
template <typename OpTy>
void buildFfnUp(RewriterBase &rewriter, OpTy op, FfnChain &chain) {
  chain.rows = GatherOp::create(rewriter, op.getLoc(), op.getX(), chain.tokens);
  chain.up = buildFfnGemm(rewriter, op, chain, chain.rows, op.getWUp(),
                          op.getWUpBias(), op.getWUpScale(),
                          2 * op.getIntermediateSize());
  chain.act = buildFfnGlu(rewriter, op, chain.up);
}

/// grouped_matmul(w_down, + w_down_bias) -> scatter(reverse_indices) ->
/// reshape to T x k x H -> combine(weights): the layer's output.
template <typename OpTy>
Value buildFfnOutput(RewriterBase &rewriter, OpTy op, const FfnChain &chain) {
  Location loc = op.getLoc();
  auto xType = op.getX().getType();
  int64_t t = xType.getDimSize(0), h = op.getHiddenSize(), k = op.getK();
  Value down = buildFfnGemm(rewriter, op, chain, chain.act, op.getWDown(),
                            op.getWDownBias(), op.getWDownScale(), h);
  Value scattered = ScatterOp::create(rewriter, loc, down, chain.reverse);
  SmallVector<OpFoldResult> outputShape = {
      ShapedType::isDynamic(t)
          ? OpFoldResult(
                tensor::DimOp::create(rewriter, loc, op.getX(), 0).getResult())
          : OpFoldResult(rewriter.getIndexAttr(t)),
      rewriter.getIndexAttr(k), rewriter.getIndexAttr(h)};
  auto perSlot = tensor::ExpandShapeOp::create(
      rewriter, loc, RankedTensorType::get({t, k, h}, xType.getElementType()),
      scattered, ArrayRef<ReassociationIndices>{{0, 1}, {2}}, outputShape);
  return CombineOp::create(rewriter, loc, perSlot, chain.weights);
}

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_LIB_DIALECT_MOE_TRANSFORMS_FFNCHAIN_H
