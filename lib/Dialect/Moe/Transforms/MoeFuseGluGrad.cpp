//===- MoeFuseGluGrad.cpp - the GLU backward into the dgrad GEMM ----------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// moe.ffn_grad decomposes the down projection's backward into
//
//   g    = grouped_matmul(dy rows, w_down^T)      the activation's gradient
//   a    = glu(h)                                  recomputed activation
//   dw   = row_dot(g, a [, acc])                   routing-weight gradient
//   dh   = glu_grad(combine(g, w), h)              through the GLU
//   wa   = combine(a, w)                           for dW2 = (w a)^T dy
//
// (the combines one-slot row scales). This pass rewrites the five into one
// moe.expert_gemm_glu_grad: g stays in f32 and is never stored in F, a and
// its scaled form come from the same read of h, and the GEMM reads the
// upstream gradient's token rows through the gather's indices.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Dialect/Moe/Transforms/Passes.h"

#include "FusionUtils.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

#define DEBUG_TYPE "moe-fuse-glu-grad"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEFUSEGLUGRADPASS
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

/// A one-slot weighted combine of `v`'s rows: combine(expand_shape(v) into
/// M x 1 x N, weights M x 1). Returns the weights, or null.
static Value rowScaleWeights(CombineOp combine, Value v) {
  Value weights = combine.getWeights();
  auto expand = combine.getInput().getDefiningOp<tensor::ExpandShapeOp>();
  if (!weights || !expand || expand.getSrc() != v || !expand->hasOneUse() ||
      expand.getReassociationIndices() !=
          SmallVector<ReassociationIndices>{{0, 1}, {2}} ||
      expand.getResultType().getDimSize(1) != 1)
    return Value();
  return weights;
}

/// From the scaled activation combine(expand(a), w) back to the glu_grad
/// of the same chain: a's row_dot, its g, g's row-scale combine, the
/// glu_grad that reads it. Null when the shape is not there.
static GluGradOp gluGradOfScaledAct(CombineOp scaled) {
  auto expand = scaled.getInput().getDefiningOp<tensor::ExpandShapeOp>();
  if (!expand || !expand.getSrc().getDefiningOp<GluOp>())
    return GluGradOp();
  for (Operation *user : expand.getSrc().getUsers()) {
    auto dot = dyn_cast<RowDotOp>(user);
    if (!dot)
      continue;
    for (Operation *gUser : dot.getLhs().getUsers()) {
      auto gExpand = dyn_cast<tensor::ExpandShapeOp>(gUser);
      if (!gExpand || !gExpand->hasOneUse())
        continue;
      auto dAct = dyn_cast<CombineOp>(*gExpand->getUsers().begin());
      if (!dAct || !dAct->hasOneUse())
        continue;
      if (auto gluGrad = dyn_cast<GluGradOp>(*dAct->getUsers().begin()))
        return gluGrad;
    }
  }
  return GluGradOp();
}

/// Rooted at the scaled activation's combine, the last op of the chain as
/// moe.ffn_grad's decomposition orders it: every op the rewrite erases
/// comes before the root, as the walk driver requires.
struct FuseGluGrad : OpRewritePattern<CombineOp> {
  FuseGluGrad(MLIRContext *ctx, ControlMoeFusionFn control)
      : OpRewritePattern(ctx), control(std::move(control)) {}

  LogicalResult matchAndRewrite(CombineOp root,
                                PatternRewriter &rewriter) const override {
    GluGradOp gluGrad = gluGradOfScaledAct(root);
    if (!gluGrad)
      return rewriter.notifyMatchFailure(root, "not a scaled activation");
    // dh = glu_grad(combine(g, w), h)
    auto dAct = gluGrad.getGrad().getDefiningOp<CombineOp>();
    if (!dAct || !dAct->hasOneUse())
      return rewriter.notifyMatchFailure(gluGrad, "grad is not a row scale");
    auto gExpand = dAct.getInput().getDefiningOp<tensor::ExpandShapeOp>();
    if (!gExpand)
      return rewriter.notifyMatchFailure(gluGrad, "grad is not a row scale");
    Value g = gExpand.getSrc();
    Value weights = rowScaleWeights(dAct, g);
    if (!weights)
      return rewriter.notifyMatchFailure(gluGrad, "grad is not a row scale");
    ExpertGemmParts parts;
    if (!parts.match(g) || parts.bias || parts.scatter || parts.scale ||
        parts.activation || parts.rhsScale ||
        parts.weightFormat.getValue() != WeightFormat::plain)
      return rewriter.notifyMatchFailure(
          gluGrad, "not a plain GEMM (a gather stage at most)");
    // g's users: the row scale above and row_dot(g, a).
    RowDotOp rowDot;
    SmallVector<tensor::DimOp> gDims, actDims;
    for (Operation *user : g.getUsers()) {
      if (user == gExpand)
        continue;
      if (auto d = dyn_cast<tensor::DimOp>(user)) {
        gDims.push_back(d);
        continue;
      }
      auto dot = dyn_cast<RowDotOp>(user);
      if (!dot || rowDot || dot.getLhs() != g)
        return rewriter.notifyMatchFailure(gluGrad, "g has other users");
      rowDot = dot;
    }
    if (!rowDot || !llvm::hasNItems(g.getUsers(), 2 + gDims.size()))
      return rewriter.notifyMatchFailure(gluGrad, "no row_dot(g, a)");
    // a = glu(h) with the glu_grad's parameters; its users: the row_dot
    // and the scaled activation combine(a, w).
    auto glu = rowDot.getRhs().getDefiningOp<GluOp>();
    Value h = gluGrad.getInput();
    if (!glu || glu.getInput() != h ||
        glu.getActivation() != gluGrad.getActivation() ||
        glu.getLayout() != gluGrad.getLayout() ||
        glu.getAlphaAttr() != gluGrad.getAlphaAttr() ||
        glu.getLimitAttr() != gluGrad.getLimitAttr() ||
        glu.getUpBiasAttr() != gluGrad.getUpBiasAttr())
      return rewriter.notifyMatchFailure(gluGrad,
                                         "row_dot's rhs is not glu(h) alike");
    Value act = glu.getResult();
    for (Operation *user : act.getUsers())
      if (auto d = dyn_cast<tensor::DimOp>(user))
        actDims.push_back(d);
    // (tensor.dim users, the decomposition's dynamic sizes, move to the
    // fused op's results.)
    CombineOp scaled = root;
    if (rowScaleWeights(scaled, act) != weights ||
        !llvm::hasNItems(act.getUsers(), 2 + actDims.size()))
      return rewriter.notifyMatchFailure(
          gluGrad, "the activation is not used by one row scale by w");
    for (Operation *op :
         {gluGrad.getOperation(), dAct.getOperation(), gExpand.getOperation(),
          rowDot.getOperation(), parts.op, glu.getOperation(),
          scaled.getInput().getDefiningOp()})
      if (op->getBlock() != root->getBlock() || !op->isBeforeInBlock(root))
        return rewriter.notifyMatchFailure(
            gluGrad, "the scaled activation is not the chain's last op");
    // The dims move to the fused op's results: they must come after it.
    for (tensor::DimOp d : llvm::concat<tensor::DimOp>(gDims, actDims))
      if (d->getBlock() != rowDot->getBlock() || d->isBeforeInBlock(rowDot))
        return rewriter.notifyMatchFailure(
            gluGrad, "a dim of g or a before the row_dot");
    // The fused op goes where the row_dot is (its result's users may come
    // before the glu_grad): every operand but the weights dominates it.
    Operation *wDef = weights.getDefiningOp();
    if (wDef && (wDef->getBlock() != rowDot->getBlock() ||
                 !wDef->isBeforeInBlock(rowDot)))
      return rewriter.notifyMatchFailure(gluGrad,
                                         "weights defined after the row_dot");
    if (!shouldFuse(control, MoeFusionKind::GluGradEpilogue, parts.op, gluGrad))
      return rewriter.notifyMatchFailure(gluGrad, "policy declined");

    // The GEMM's gathered rows are read through the indices (the gathered
    // copy stays only while something else reads it: the down projection's
    // weight gradient until moe-fuse-gather-matmul folds it too).
    Value lhs = parts.lhs, rowIndices = parts.gather;
    if (!rowIndices)
      if (auto gather = lhs.getDefiningOp<GatherOp>()) {
        lhs = gather.getInput();
        rowIndices = gather.getIndices();
      }
    Location loc = gluGrad.getLoc();
    rewriter.setInsertionPoint(rowDot);
    auto weightsType = cast<RankedTensorType>(weights.getType());
    Value rowWeights = tensor::CollapseShapeOp::create(
        rewriter, loc,
        RankedTensorType::get({weightsType.getDimSize(0)},
                              weightsType.getElementType()),
        weights, ArrayRef<ReassociationIndices>{{0, 1}});
    auto fused = ExpertGemmGluGradOp::create(
        rewriter, loc,
        TypeRange{gluGrad.getType(), scaled.getType(), rowDot.getType()}, lhs,
        rowIndices, parts.rhs, parts.offsets, h, rowWeights, rowDot.getAcc(),
        parts.transposeRhs, gluGrad.getActivationAttr(),
        gluGrad.getLayoutAttr(), gluGrad.getAlphaAttr(), gluGrad.getLimitAttr(),
        gluGrad.getUpBiasAttr());
    for (tensor::DimOp d : llvm::concat<tensor::DimOp>(gDims, actDims))
      rewriter.modifyOpInPlace(
          d, [&] { d.getSourceMutable().assign(fused.getScaledAct()); });
    Operation *scaledExpand = scaled.getInput().getDefiningOp();
    rewriter.replaceOp(gluGrad, fused.getInputGrad());
    rewriter.replaceOp(rowDot, fused.getWeightGrad());
    rewriter.replaceOp(scaled, fused.getScaledAct());
    rewriter.eraseOp(scaledExpand);
    rewriter.eraseOp(dAct);
    rewriter.eraseOp(gExpand);
    rewriter.eraseOp(glu);
    rewriter.eraseOp(parts.op);
    return success();
  }

  ControlMoeFusionFn control;
};

} // namespace

void mlir::moe::populateMoeFuseGluGradPatterns(
    RewritePatternSet &patterns, const ControlMoeFusionFn &control) {
  patterns.add<FuseGluGrad>(patterns.getContext(), control);
}

namespace {
struct MoeFuseGluGradPass
    : mlir::moe::impl::MoeFuseGluGradPassBase<MoeFuseGluGradPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMoeFuseGluGradPatterns(patterns);
    applyFusionPatterns(getOperation(), std::move(patterns));
  }
};
} // namespace
