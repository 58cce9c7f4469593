//===- MovementToLinalg.cpp - lower the data-movement ops -----------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// moe.gather (a linalg.generic with a guarded tensor.extract), moe.scatter
// (a sequential row loop, so the later row wins on a duplicate), moe.combine
// (a linalg.generic reducing the slot dim in f32, slot order), and the
// indices <-> multi-hot converters (sequential loops, later slot / higher
// expert wins).
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"
#include "Utils/LoweringBuilder.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

using namespace mlir;
using namespace mlir::moe;

namespace {

/// moe.gather => linalg.generic over (m, h): out = 0 <= idx < T ?
/// input[idx, h] : 0.
struct LowerGather : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GatherOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value input = op.getInput(), indices = op.getIndices();
    auto resultType = op.getResult().getType();
    Type f = resultType.getElementType();
    Value t = b.toI32(b.dim(input, 0));
    SmallVector<Value> dyn = b.dynRowsOf(resultType, indices);
    Value init = b.empty(resultType, dyn);
    MLIRContext *ctx = b.getContext();
    AffineMap rowMap = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
    AffineMap id = b.getMultiDimIdentityMap(2);
    auto generic = linalg::GenericOp::create(
        b, TypeRange{resultType}, ValueRange{indices}, ValueRange{init},
        ArrayRef<AffineMap>{rowMap, id}, b.parallel(2),
        [&](OpBuilder &nested, Location loc, ValueRange args) {
          LoweringBuilder b(loc, nested);
          Value idx = args[0];
          Value col = linalg::IndexOp::create(b, 1);
          Value v = b.ifElse(
              b.inRange(idx, b.i32(0), t), {f},
              [&](LoweringBuilder &b) -> SmallVector<Value> {
                return {b.extract(input, {b.toIndex(idx), col})};
              },
              [&](LoweringBuilder &b) -> SmallVector<Value> {
                return {b.scalar(f, 0.0)};
              })[0];
          linalg::YieldOp::create(b, v);
        });
    rewriter.replaceOp(op, generic.getResults());
    return success();
  }
};

/// moe.scatter => zero-filled result, then rows copied in order i = 0..M-1
/// to their in-range destinations.
struct LowerScatter : OpRewritePattern<ScatterOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ScatterOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value input = op.getInput(), indices = op.getIndices();
    auto resultType = op.getResult().getType();
    int64_t h = resultType.getDimSize(1);
    Value m = b.dim(input, 0);
    SmallVector<Value> dyn = dynRows(resultType, m);
    Value out =
        b.filled(resultType, dyn, b.scalar(resultType.getElementType()));
    Value mI32 = b.toI32(m);
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(h)};
    SmallVector<OpFoldResult> strides = {b.getIndexAttr(1), b.getIndexAttr(1)};
    out = b.forLoop(
        b.idx(0), m, {out}, [&](LoweringBuilder &b, Value i, ValueRange acc) {
          Value dst = b.extract(indices, {i});
          return b.ifThen(
              b.inRange(dst, b.i32(0), mI32), acc,
              [&](LoweringBuilder &b) -> SmallVector<Value> {
                SmallVector<OpFoldResult> from = {i, b.getIndexAttr(0)};
                SmallVector<OpFoldResult> to = {b.toIndex(dst),
                                                b.getIndexAttr(0)};
                Value row = tensor::ExtractSliceOp::create(b, input, from,
                                                           sizes, strides);
                return {tensor::InsertSliceOp::create(b, row, acc[0], to, sizes,
                                                      strides)
                            .getResult()};
              });
        })[0];
    rewriter.replaceOp(op, out);
    return success();
  }
};

/// moe.combine => linalg.generic over (t, h, j), j a reduction: an f32
/// accumulator summed in slot order, then rounded to the input type.
struct LowerCombine : OpRewritePattern<CombineOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CombineOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value input = op.getInput(), weights = op.getWeights();
    auto resultType = op.getResult().getType();
    SmallVector<Value> dyn = b.dynRowsOf(resultType, input);
    auto accType = resultType.clone(b.getF32Type());
    Value acc = b.filled(accType, dyn, b.f32(0.0));
    MLIRContext *ctx = b.getContext();
    AffineExpr t = getAffineDimExpr(0, ctx), h = getAffineDimExpr(1, ctx),
               j = getAffineDimExpr(2, ctx);
    SmallVector<Value> ins = {input};
    SmallVector<AffineMap> maps = {AffineMap::get(3, 0, {t, j, h}, ctx)};
    if (weights) {
      ins.push_back(weights);
      maps.push_back(AffineMap::get(3, 0, {t, j}, ctx));
    }
    maps.push_back(AffineMap::get(3, 0, {t, h}, ctx));
    SmallVector<utils::IteratorType> iters = {utils::IteratorType::parallel,
                                              utils::IteratorType::parallel,
                                              utils::IteratorType::reduction};
    bool weighted = static_cast<bool>(weights);
    auto generic = linalg::GenericOp::create(
        b, TypeRange{accType}, ins, ValueRange{acc}, maps, iters,
        [&](OpBuilder &nested, Location loc, ValueRange args) {
          LoweringBuilder b(loc, nested);
          Value x = b.toF32(args[0]);
          if (weighted)
            x = b.mul(b.toF32(args[1]), x);
          linalg::YieldOp::create(b, b.add(args.back(), x));
        });
    Value result =
        b.convertElements(generic.getResult(0), resultType.getElementType());
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// moe.combine_grad => one parallel linalg.generic over (t, j, h):
/// weights[t][j] * grad[t][h] in f32 (grad[t][h] without weights), rounded.
struct LowerCombineGrad : OpRewritePattern<CombineGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CombineGradOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value grad = op.getGrad(), weights = op.getWeights();
    auto resultType = op.getResult().getType();
    Type f = resultType.getElementType();
    Value init = b.empty(resultType, b.dynRowsOf(resultType, grad));
    MLIRContext *ctx = b.getContext();
    AffineExpr t = getAffineDimExpr(0, ctx), j = getAffineDimExpr(1, ctx),
               h = getAffineDimExpr(2, ctx);
    SmallVector<Value> ins = {grad};
    SmallVector<AffineMap> maps = {AffineMap::get(3, 0, {t, h}, ctx)};
    if (weights) {
      ins.push_back(weights);
      maps.push_back(AffineMap::get(3, 0, {t, j}, ctx));
    }
    maps.push_back(b.getMultiDimIdentityMap(3));
    bool weighted = static_cast<bool>(weights);
    auto generic = linalg::GenericOp::create(
        b, TypeRange{resultType}, ins, ValueRange{init}, maps, b.parallel(3),
        [&](OpBuilder &nested, Location loc, ValueRange args) {
          LoweringBuilder b(loc, nested);
          Value x = b.toF32(args[0]);
          if (weighted)
            x = b.mul(b.toF32(args[1]), x);
          linalg::YieldOp::create(b, b.fromF32(x, f));
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

/// moe.indices_to_multihot => T x E outputs (false / 0 / -1), then one pass
/// over (t, j) in order marking in-range ids.
struct LowerIndicesToMultihot : OpRewritePattern<IndicesToMultihotOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(IndicesToMultihotOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value ids = op.getIndices(), probs = op.getProbs();
    int64_t e = op.getNumExperts();
    Value t = b.dim(ids, 0);
    SmallVector<Value> dyn = dynRows(op.getMultihot().getType(), t);
    Type f = op.getProbsMultihot().getType().getElementType();
    Value hot = b.filled(op.getMultihot().getType(), dyn, b.i1(false));
    Value dense = b.filled(op.getProbsMultihot().getType(), dyn, b.scalar(f));
    Value pos = b.filled(op.getPositionMap().getType(), dyn, b.i32(-1));
    SmallVector<Value> out = b.forEachExpertSlot(
        ids, e, {hot, dense, pos},
        [&](LoweringBuilder &b, Value row, Value j, Value expert,
            ValueRange acc) -> SmallVector<Value> {
          Value col = b.toIndex(expert);
          Value p = b.extract(probs, {row, j});
          return {b.insert(b.i1(true), acc[0], {row, col}),
                  b.insert(p, acc[1], {row, col}),
                  b.insert(b.toI32(j), acc[2], {row, col})};
        });
    rewriter.replaceOp(op, out);
    return success();
  }
};

/// moe.multihot_to_indices => zeros, then one pass over (t, e) in order
/// writing each mapped probability to its slot.
struct LowerMultihotToIndices : OpRewritePattern<MultihotToIndicesOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MultihotToIndicesOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value dense = op.getProbsMultihot(), pos = op.getPositionMap();
    auto resultType = op.getProbs().getType();
    int64_t e = op.getProbsMultihot().getType().getDimSize(1), k = op.getK();
    Value t = b.dim(dense, 0);
    SmallVector<Value> dyn = dynRows(resultType, t);
    Value out =
        b.filled(resultType, dyn, b.scalar(resultType.getElementType()));
    out = b.forLoop(
        b.idx(0), t, {out}, [&](LoweringBuilder &b, Value row, ValueRange acc) {
          return b.forLoop(
              b.idx(0), b.idx(e), acc,
              [&](LoweringBuilder &b, Value col, ValueRange acc) {
                Value slot = b.extract(pos, {row, col});
                return b.ifThen(
                    b.inRange(slot, b.i32(0), b.i32(k)), acc,
                    [&](LoweringBuilder &b) -> SmallVector<Value> {
                      Value p = b.extract(dense, {row, col});
                      return {b.insert(p, acc[0], {row, b.toIndex(slot)})};
                    });
              });
        })[0];
    rewriter.replaceOp(op, out);
    return success();
  }
};

} // namespace

void mlir::moe::populateMovementLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerGather, LowerScatter, LowerCombine, LowerCombineGrad,
               LowerIndicesToMultihot, LowerMultihotToIndices>(
      patterns.getContext());
}
