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
    Value groupScores, groupMask;
    if (nGroup > 1) {
      groupScores = allocScratch(b, {ShapedType::kDynamic, nGroup},
                                 b.getF32Type(), {t});
      groupMask = allocScratch(b, {ShapedType::kDynamic, nGroup},
                               b.getI32Type(), {t});
    }

    launchForEach(b, t, [&](LoweringBuilder &b, Value row) {
      Value zero = b.idx(0), one = b.idx(1);
      RoutingScores routing(b, e, softmax, [&](LoweringBuilder &b, Value col) {
        return b.load(logits, {row, col});
      });
      auto scoreAt = [&](LoweringBuilder &b, Value col) {
        return routing.score(b, col);
      };
      // Selection key: the score plus the routing bias.
      auto keyAt = [&](LoweringBuilder &b, Value col) -> Value {
        Value s = scoreAt(b, col);
        return bias ? b.add(s, b.load(bias, {col})) : s;
      };

      if (nGroup > 1) {
        // Group scores, then the kept-group mask (scratch buffers).
        forEach(b, zero, b.idx(nGroup), one, [&](LoweringBuilder &b, Value g) {
          b.store(groupScore(b, b.mul(g, b.idx(perGroup)), perGroup, top2,
                             keyAt),
                  groupScores, {row, g});
        });
        forEach(b, zero, b.idx(nGroup), one, [&](LoweringBuilder &b, Value g) {
          Value kept = groupKept(b, nGroup, topkGroup, g,
                                 [&](LoweringBuilder &b, Value h) {
                                   return b.load(groupScores, {row, h});
                                 });
          b.store(arith::ExtUIOp::create(b, b.getI32Type(), kept), groupMask,
                  {row, g});
        });
      }

      selectTopK(
          b, k, e, {}, keyAt,
          nGroup > 1 ? AllowedFn([&](LoweringBuilder &b, Value col) {
            Value g = arith::DivUIOp::create(b, col, b.idx(perGroup));
            return b.cmpi(CmpI::ne, b.load(groupMask, {row, g}), b.i32(0));
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
