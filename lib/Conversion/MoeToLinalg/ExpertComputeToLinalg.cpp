//===- ExpertComputeToLinalg.cpp - lower grouped_matmul and glu -----------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// moe.grouped_matmul: an scf.for over experts; expert e's row range
// [clamp(offsets[e]), clamp(offsets[e+1])) of `lhs` is sliced out (dynamic
// size), multiplied by rhs[e] with a linalg.generic contraction that
// accumulates in f32, biased, rounded to the result type and inserted back.
// Rows no expert owns stay zero.
//
// moe.glu: one linalg.generic over two slices of the input, the gate and up
// views of its layout (concat: columns [0, N) and [N, 2N); interleaved: the
// even and odd columns, as stride-2 slices), computing in f32.
//
//===----------------------------------------------------------------------===//

#include "LoweringBuilder.h"
#include "Patterns.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::moe;

namespace {

/// moe.grouped_matmul => per-expert slice, f32 contraction, insert.
struct LowerGroupedMatmul : OpRewritePattern<GroupedMatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GroupedMatmulOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value lhs = op.getLhs(), rhs = op.getRhs(), offsets = op.getOffsets();
    Value bias = op.getBias();
    auto resultType = op.getResult().getType();
    Type o = resultType.getElementType();
    bool transposed = op.getTransposeRhs();
    auto rhsType = op.getRhs().getType();
    int64_t e = rhsType.getDimSize(0);
    int64_t k = op.getLhs().getType().getDimSize(1);
    int64_t n = resultType.getDimSize(1);
    MLIRContext *ctx = b.getContext();

    Value m = b.dim(lhs, 0);
    SmallVector<Value> dyn;
    if (resultType.isDynamicDim(0))
      dyn.push_back(m);
    Value result = b.filled(resultType, dyn, b.scalar(o));

    AffineExpr dm = getAffineDimExpr(0, ctx), dn = getAffineDimExpr(1, ctx),
               dk = getAffineDimExpr(2, ctx);
    SmallVector<AffineMap> mmMaps = {
        AffineMap::get(3, 0, {dm, dk}, ctx),
        AffineMap::get(3, 0,
                       transposed ? ArrayRef<AffineExpr>{dn, dk}
                                  : ArrayRef<AffineExpr>{dk, dn},
                       ctx),
        AffineMap::get(3, 0, {dm, dn}, ctx)};
    SmallVector<utils::IteratorType> mmIters = {
        utils::IteratorType::parallel, utils::IteratorType::parallel,
        utils::IteratorType::reduction};
    auto weightType = RankedTensorType::get(
        transposed ? ArrayRef<int64_t>{n, k} : ArrayRef<int64_t>{k, n},
        rhsType.getElementType());
    auto accType =
        RankedTensorType::get({ShapedType::kDynamic, n}, b.getF32Type());

    result = b.forLoop(
        b.idx(0), b.idx(e), {result},
        [&](LoweringBuilder &b, Value expert,
            ValueRange acc) -> SmallVector<Value> {
          auto offsetAt = [&](Value i) {
            return b.clamp(b.toIndex(b.extract(offsets, {i})), b.idx(0), m);
          };
          Value lo = offsetAt(expert);
          Value hi = offsetAt(b.add(expert, b.idx(1)));
          Value rows = arith::MaxSIOp::create(b, b.sub(hi, lo), b.idx(0));
          SmallVector<OpFoldResult> one2 = {b.getIndexAttr(1),
                                            b.getIndexAttr(1)};
          Value lhsRows = tensor::ExtractSliceOp::create(
              b, lhs, ArrayRef<OpFoldResult>{lo, b.getIndexAttr(0)},
              ArrayRef<OpFoldResult>{rows, b.getIndexAttr(k)}, one2);
          SmallVector<OpFoldResult> wSizes = {b.getIndexAttr(1)};
          for (int64_t d : weightType.getShape())
            wSizes.push_back(b.getIndexAttr(d));
          Value weight = tensor::ExtractSliceOp::create(
              b, weightType, rhs,
              ArrayRef<OpFoldResult>{expert, b.getIndexAttr(0),
                                     b.getIndexAttr(0)},
              wSizes,
              ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                                     b.getIndexAttr(1)});
          Value zero = b.filled(accType, {rows}, b.f32(0.0));
          Value prod =
              linalg::GenericOp::create(
                  b, TypeRange{accType}, ValueRange{lhsRows, weight},
                  ValueRange{zero}, mmMaps, mmIters,
                  [&](OpBuilder &nested, Location loc, ValueRange args) {
                    LoweringBuilder b(loc, nested);
                    Value p = b.mul(b.toF32(args[0]), b.toF32(args[1]));
                    linalg::YieldOp::create(b, b.add(args[2], p));
                  })
                  .getResult(0);
          // Bias add and rounding to the result type in one elementwise op.
          auto outType = accType.clone(o);
          Value outInit = b.empty(outType, {rows});
          SmallVector<Value> ins = {prod};
          AffineMap id2 = b.getMultiDimIdentityMap(2);
          SmallVector<AffineMap> maps = {id2};
          if (bias) {
            auto biasRowType =
                RankedTensorType::get({n}, cast<ShapedType>(bias.getType())
                                               .getElementType());
            ins.push_back(tensor::ExtractSliceOp::create(
                b, biasRowType, bias,
                ArrayRef<OpFoldResult>{expert, b.getIndexAttr(0)},
                ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(n)},
                one2));
            maps.push_back(AffineMap::get(2, 0, {getAffineDimExpr(1, ctx)},
                                          ctx));
          }
          maps.push_back(id2);
          bool biased = static_cast<bool>(bias);
          Value block =
              linalg::GenericOp::create(
                  b, TypeRange{outType}, ins, ValueRange{outInit}, maps,
                  b.parallel(2),
                  [&](OpBuilder &nested, Location loc, ValueRange args) {
                    LoweringBuilder b(loc, nested);
                    Value v = args[0];
                    if (biased)
                      v = b.add(v, b.toF32(args[1]));
                    linalg::YieldOp::create(b, b.fromF32(v, o));
                  })
                  .getResult(0);
          return {tensor::InsertSliceOp::create(
                      b, block, acc[0],
                      ArrayRef<OpFoldResult>{lo, b.getIndexAttr(0)},
                      ArrayRef<OpFoldResult>{rows, b.getIndexAttr(n)}, one2)
                      .getResult()};
        })[0];
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

/// act(gate) in f32 for the GLU activations of SPEC.md.
static Value applyActivation(LoweringBuilder &b, Activation activation,
                             float alpha, Value x) {
  switch (activation) {
  case Activation::silu: {
    Value ax = b.mul(b.f32(alpha), x);
    Value e = math::ExpOp::create(b, arith::NegFOp::create(b, ax));
    return b.div(x, b.add(b.f32(1.0), e));
  }
  case Activation::gelu: {
    Value erf = math::ErfOp::create(b, b.mul(x, b.f32(M_SQRT1_2)));
    return b.mul(b.mul(b.f32(0.5), x), b.add(b.f32(1.0), erf));
  }
  case Activation::gelu_tanh: {
    Value x3 = b.mul(b.mul(x, x), x);
    Value inner = b.mul(b.f32(std::sqrt(2.0 / M_PI)),
                        b.add(x, b.mul(b.f32(0.044715), x3)));
    Value th = math::TanhOp::create(b, inner);
    return b.mul(b.mul(b.f32(0.5), x), b.add(b.f32(1.0), th));
  }
  }
  llvm_unreachable("unknown activation");
}

namespace {

/// moe.glu => linalg.generic(gate view, up view) -> act(gate) * (up + b).
struct LowerGlu : OpRewritePattern<GluOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GluOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value input = op.getInput();
    auto resultType = op.getResult().getType();
    Type f = resultType.getElementType();
    int64_t n = resultType.getDimSize(1);
    // Gate and up views: concat = columns [0, N) and [N, 2N); interleaved =
    // even and odd columns (stride-2 slices).
    bool concat = op.getLayout() == GluLayout::concat;
    SmallVector<OpFoldResult> viewSizes = b.sizes(input);
    viewSizes[1] = b.getIndexAttr(n);
    SmallVector<OpFoldResult> strides = {b.getIndexAttr(1),
                                         b.getIndexAttr(concat ? 1 : 2)};
    auto viewAt = [&](int64_t column) -> Value {
      return tensor::ExtractSliceOp::create(
          b, input,
          ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(column)},
          viewSizes, strides);
    };
    Value gateView = viewAt(0), upView = viewAt(concat ? n : 1);
    AffineMap id = b.getMultiDimIdentityMap(2);
    SmallVector<Value> dyn;
    if (resultType.isDynamicDim(0))
      dyn.push_back(b.dim(input, 0));
    Value init = b.empty(resultType, dyn);
    Activation activation = op.getActivation();
    float alpha = op.getAlpha().convertToFloat();
    float upBias = op.getUpBias().convertToFloat();
    std::optional<float> limit;
    if (auto l = op.getLimit())
      limit = l->convertToFloat();
    auto generic = linalg::GenericOp::create(
        b, TypeRange{resultType}, ValueRange{gateView, upView},
        ValueRange{init}, ArrayRef<AffineMap>{id, id, id},
        b.parallel(2),
        [&](OpBuilder &nested, Location loc, ValueRange args) {
          LoweringBuilder b(loc, nested);
          Value gate = b.toF32(args[0]), up = b.toF32(args[1]);
          if (limit) {
            Value lim = b.f32(*limit), negLim = b.f32(-*limit);
            gate = arith::MinimumFOp::create(b, gate, lim);
            up = arith::MaximumFOp::create(
                b, arith::MinimumFOp::create(b, up, lim), negLim);
          }
          Value act = applyActivation(b, activation, alpha, gate);
          Value out = b.mul(act, b.add(up, b.f32(upBias)));
          linalg::YieldOp::create(b, b.fromF32(out, f));
        });
    rewriter.replaceOp(op, generic.getResults());
    return success();
  }
};

} // namespace

void mlir::moe::populateExpertComputeLoweringPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LowerGroupedMatmul, LowerGlu>(patterns.getContext());
}
