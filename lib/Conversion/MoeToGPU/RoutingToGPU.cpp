//===- RoutingToGPU.cpp - moe.topk / moe.route as GPU kernels -------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// One thread per token row runs the k selection passes of Selection.h over
// the row (O(k * E) per row, E <= a few hundred), writing its picks straight
// to the output buffers. moe.route recomputes scores on the fly (softmax
// from the row max and sum, or the sigmoid) instead of keeping an E-wide
// row; the group mask of group-limited routing lives in a T x n_group
// scratch buffer. moe.route_dispatch is split into route + dispatch, whose
// kernels are in DispatchToGPU.cpp.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "Patterns.h"

#include "../Utils/Selection.h"
#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using CmpF = arith::CmpFPredicate;
using CmpI = arith::CmpIPredicate;

namespace {

struct TopKToGPU : OpRewritePattern<TopKOp> {
  using OpRewritePattern::OpRewritePattern;

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
    launchForEach(b, t, [&](LoweringBuilder &b, Value row) {
      selectTopK(
          b, k, e, {},
          [&](LoweringBuilder &b, Value col) {
            return b.toF32(b.load(input, {row, col}));
          },
          nullptr,
          [&](LoweringBuilder &b, Value j, Value pick,
              ValueRange) -> SmallVector<Value> {
            b.store(b.load(input, {row, b.toIndex(pick)}), values, {row, j});
            b.store(pick, indices, {row, j});
            return {};
          });
    });
    rewriter.replaceOp(op, {toTensor(b, values), toTensor(b, indices)});
    return success();
  }
};

struct RouteToGPU : OpRewritePattern<RouteOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(RouteOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto weightsType = op.getWeights().getType();
    auto indicesType = op.getIndices().getType();
    Type w = weightsType.getElementType();
    int64_t e = op.getLogits().getType().getDimSize(1);
    int64_t k = static_cast<int64_t>(op.getK());
    int64_t nGroup = op.getNGroup(), topkGroup = op.getTopkGroup();
    int64_t perGroup = e / nGroup;
    bool softmax = op.getScoring() == ScoringFn::softmax;
    bool top2 = op.getGroupScore() == GroupScore::top2_sum;
    bool normalize = op.getNormalize();
    float scaling = op.getScaling().convertToFloat();

    Value logits = toBuffer(b, op.getLogits());
    Value bias = op.getBias() ? toBuffer(b, op.getBias()) : Value();
    Value t = b.memDim(logits, 0);
    Value weights = allocBuffer(b, weightsType, dynRows(weightsType, t));
    Value indices = allocBuffer(b, indicesType, dynRows(indicesType, t));
    Value groupScores, groupKept;
    if (nGroup > 1) {
      groupScores = allocScratch(b, {ShapedType::kDynamic, nGroup},
                                 b.getF32Type(), {t});
      groupKept = allocScratch(b, {ShapedType::kDynamic, nGroup},
                               b.getI32Type(), {t});
    }

    launchForEach(b, t, [&](LoweringBuilder &b, Value row) {
      Value zero = b.idx(0), one = b.idx(1), numExperts = b.idx(e);
      Value negInf = b.f32(-std::numeric_limits<float>::infinity());
      Value maxFinite = b.f32(std::numeric_limits<float>::max());
      // Logit with NaN -> -inf and +inf -> largest finite.
      auto logitAt = [&](LoweringBuilder &b, Value col) {
        Value x = b.toF32(b.load(logits, {row, col}));
        x = b.select(b.cmpf(CmpF::UNO, x, x), negInf, x);
        return b.select(b.cmpf(CmpF::OEQ, x, b.f32(INFINITY)), maxFinite, x);
      };
      Value rowMax, rowSum;
      if (softmax) {
        rowMax = b.forLoop(zero, numExperts, {negInf},
                           [&](LoweringBuilder &b, Value col,
                               ValueRange acc) -> SmallVector<Value> {
                             return {arith::MaximumFOp::create(
                                 b, acc[0], logitAt(b, col))};
                           })[0];
        rowSum = b.forLoop(zero, numExperts, {b.f32(0.0)},
                           [&](LoweringBuilder &b, Value col,
                               ValueRange acc) -> SmallVector<Value> {
                             Value x = b.sub(logitAt(b, col), rowMax);
                             return {b.add(acc[0], math::ExpOp::create(b, x))};
                           })[0];
      }
      // Unbiased score of expert `col`.
      auto scoreAt = [&](LoweringBuilder &b, Value col) -> Value {
        Value x = logitAt(b, col);
        if (softmax) {
          Value p = b.div(math::ExpOp::create(b, b.sub(x, rowMax)), rowSum);
          // All logits -inf: no distribution; every score is 0.
          return b.select(b.cmpf(CmpF::OEQ, rowMax, negInf), b.f32(0.0), p);
        }
        Value ex = math::ExpOp::create(b, arith::NegFOp::create(b, x));
        return b.div(b.f32(1.0), b.add(b.f32(1.0), ex));
      };
      // Selection key: the score plus the routing bias.
      auto keyAt = [&](LoweringBuilder &b, Value col) -> Value {
        Value s = scoreAt(b, col);
        return bias ? b.add(s, b.load(bias, {col})) : s;
      };

      if (nGroup > 1) {
        // Group scores (top-2 sum or max of the keys), then group g is kept
        // when fewer than topk_group groups rank before it.
        forEach(b, zero, b.idx(nGroup), one, [&](LoweringBuilder &b, Value g) {
          Value first = b.mul(g, b.idx(perGroup));
          SmallVector<Value> top = b.forLoop(
              first, b.add(first, b.idx(perGroup)), {negInf, negInf},
              [&](LoweringBuilder &b, Value col,
                  ValueRange m) -> SmallVector<Value> {
                Value c = keyAt(b, col);
                Value gt1 = b.cmpf(CmpF::OGT, c, m[0]);
                Value gt2 = b.cmpf(CmpF::OGT, c, m[1]);
                return {b.select(gt1, c, m[0]),
                        b.select(gt1, m[0], b.select(gt2, c, m[1]))};
              });
          b.store(top2 ? b.add(top[0], top[1]) : top[0], groupScores,
                  {row, g});
        });
        forEach(b, zero, b.idx(nGroup), one, [&](LoweringBuilder &b, Value g) {
          Value gi = b.toI32(g), sg = b.load(groupScores, {row, g});
          Value before = b.forLoop(
              zero, b.idx(nGroup), {b.i32(0)},
              [&](LoweringBuilder &b, Value h,
                  ValueRange n) -> SmallVector<Value> {
                Value ahead = precedes(b, b.load(groupScores, {row, h}),
                                       b.toI32(h), sg, gi);
                return {b.add(n[0], arith::ExtUIOp::create(
                                        b, b.getI32Type(), ahead))};
              })[0];
          Value kept = arith::ExtUIOp::create(
              b, b.getI32Type(), b.cmpi(CmpI::slt, before, b.i32(topkGroup)));
          b.store(kept, groupKept, {row, g});
        });
      }

      selectTopK(
          b, k, e, {}, keyAt,
          nGroup > 1 ? AllowedFn([&](LoweringBuilder &b, Value col) {
            Value g = arith::DivUIOp::create(b, col, b.idx(perGroup));
            return b.cmpi(CmpI::ne, b.load(groupKept, {row, g}), b.i32(0));
          })
                     : AllowedFn(nullptr),
          [&](LoweringBuilder &b, Value j, Value pick,
              ValueRange) -> SmallVector<Value> {
            b.store(pick, indices, {row, j});
            return {};
          });

      // Normalise and scale the unbiased scores of the k picks.
      Value kIdx = b.idx(k);
      auto pickedScore = [&](LoweringBuilder &b, Value j) {
        return scoreAt(b, b.toIndex(b.load(indices, {row, j})));
      };
      Value sum = b.forLoop(zero, kIdx, {b.f32(0.0)},
                            [&](LoweringBuilder &b, Value j,
                                ValueRange acc) -> SmallVector<Value> {
                              return {b.add(acc[0], pickedScore(b, j))};
                            })[0];
      Value denom = b.f32(1.0);
      if (normalize)
        denom = b.select(b.cmpf(CmpF::OGT, sum, b.f32(0.0)), sum, b.f32(1.0));
      forEach(b, zero, kIdx, one, [&](LoweringBuilder &b, Value j) {
        Value wv = b.mul(b.div(pickedScore(b, j), denom), b.f32(scaling));
        b.store(b.fromF32(wv, w), weights, {row, j});
      });
    });
    rewriter.replaceOp(op, {toTensor(b, weights), toTensor(b, indices)});
    return success();
  }
};

} // namespace

void mlir::moe::populateRoutingToGPUPatterns(RewritePatternSet &patterns) {
  patterns.add<TopKToGPU, RouteToGPU>(
      patterns.getContext());
}
