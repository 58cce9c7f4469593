//===- RoutingToLinalg.cpp - lower moe.topk and moe.route -----------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Both ops are per-row selections. Each row runs k selection passes: pass j
// picks the best entry that ranks strictly after pass j-1's pick in the total
// order "larger value first, lower index on ties, NaN last". Because the
// order is total, no "already taken" mask is needed and ties are resolved
// exactly as the op reference pins them. O(T * k * E) work, O(1) extra state
// per row for topk; route adds two E-element f32 rows (scores, biased scores)
// and the group mask.
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"
#include "Utils/LoweringBuilder.h"
#include "Utils/Selection.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

using namespace mlir;
using namespace mlir::moe;

using CmpF = arith::CmpFPredicate;
using CmpI = arith::CmpIPredicate;

namespace {

/// moe.topk => per-row selection loops writing values and indices.
struct LowerTopK : OpRewritePattern<TopKOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TopKOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value input = op.getInput();
    auto valuesType = op.getValues().getType();
    auto indicesType = op.getIndices().getType();
    int64_t e = op.getInput().getType().getDimSize(1), k = op.getK();
    Value t = b.dim(input, 0);
    SmallVector<Value> dyn = dynRows(valuesType, t);
    Value values = b.empty(valuesType, dyn);
    Value indices = b.empty(indicesType, dyn);
    SmallVector<Value> out =
        b.forLoop(b.idx(0), t, {values, indices},
                  [&](LoweringBuilder &b, Value row, ValueRange outs) {
                    return selectTopK(
                        b, k, e, outs,
                        [&](LoweringBuilder &b, Value col) {
                          return b.toF32(b.extract(input, {row, col}));
                        },
                        nullptr,
                        [&](LoweringBuilder &b, Value j, Value pick,
                            ValueRange outs) -> SmallVector<Value> {
                          Value v = b.extract(input, {row, b.toIndex(pick)});
                          return {b.insert(v, outs[0], {row, j}),
                                  b.insert(pick, outs[1], {row, j})};
                        });
                  });
    rewriter.replaceOp(op, out);
    return success();
  }
};

/// moe.route => per-row: sanitised scores, optional group mask, selection,
/// weight normalisation and scaling (all f32).
struct LowerRoute : OpRewritePattern<RouteOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(RouteOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value logits = op.getLogits(), bias = op.getBias();
    auto weightsType = op.getWeights().getType();
    auto indicesType = op.getIndices().getType();
    Type w = weightsType.getElementType();
    int64_t e = op.getLogits().getType().getDimSize(1), k = op.getK();
    int64_t nGroup = op.getNGroup(), topkGroup = op.getTopkGroup();
    int64_t perGroup = e / nGroup;
    bool softmax = op.getScoring() == ScoringFn::softmax;
    bool top2 = op.getGroupScore() == GroupScore::top2_sum;
    float scaling = op.getScaling().convertToFloat();
    auto rowType = RankedTensorType::get({e}, b.getF32Type());

    Value t = b.dim(logits, 0);
    SmallVector<Value> dyn = dynRows(weightsType, t);
    Value weights = b.empty(weightsType, dyn);
    Value indices = b.empty(indicesType, dyn);

    SmallVector<Value> out = b.forLoop(
        b.idx(0), t, {weights, indices},
        [&](LoweringBuilder &b, Value row, ValueRange outs) {
          Value zero = b.idx(0), numExperts = b.idx(e);
          RoutingScores routing(b, e, softmax,
                                [&](LoweringBuilder &b, Value col) {
                                  return b.extract(logits, {row, col});
                                });
          // s (unbiased scores) and c (selection keys) for this row.
          Value rowInit = b.empty(rowType, {});
          SmallVector<Value> sc =
              b.forLoop(zero, numExperts, {rowInit, rowInit},
                        [&](LoweringBuilder &b, Value col,
                            ValueRange rows) -> SmallVector<Value> {
                          Value s = routing.score(b, col);
                          Value c = bias ? b.add(s, b.extract(bias, {col})) : s;
                          return {b.insert(s, rows[0], {col}),
                                  b.insert(c, rows[1], {col})};
                        });
          Value scores = sc[0], keys = sc[1];
          auto keyAt = [&](LoweringBuilder &b, Value col) {
            return b.extract(keys, {col});
          };

          // Group mask: group g is kept when fewer than topk_group groups
          // rank before it by (group score, group index).
          Value groupMask;
          if (nGroup > 1) {
            auto groupType = RankedTensorType::get({nGroup}, b.getF32Type());
            Value groupScores =
                b.forLoop(zero, b.idx(nGroup), {b.empty(groupType, {})},
                          [&](LoweringBuilder &b, Value g,
                              ValueRange acc) -> SmallVector<Value> {
                            Value score =
                                groupScore(b, b.mul(g, b.idx(perGroup)),
                                           perGroup, top2, keyAt);
                            return {b.insert(score, acc[0], {g})};
                          })[0];
            auto maskType = RankedTensorType::get({nGroup}, b.getI1Type());
            groupMask = b.forLoop(zero, b.idx(nGroup), {b.empty(maskType, {})},
                                  [&](LoweringBuilder &b, Value g,
                                      ValueRange acc) -> SmallVector<Value> {
                                    Value kept = groupKept(
                                        b, nGroup, topkGroup, g,
                                        [&](LoweringBuilder &b, Value h) {
                                          return b.extract(groupScores, {h});
                                        });
                                    return {b.insert(kept, acc[0], {g})};
                                  })[0];
          }

          // Select k experts, then write unbiased weights.
          auto picked = selectTopK(
              b, k, e, outs, keyAt,
              groupMask ? AllowedFn([&](LoweringBuilder &b, Value col) {
                return b.extract(groupMask, {arith::DivUIOp::create(
                                                b, col, b.idx(perGroup))});
              })
                        : AllowedFn(nullptr),
              [&](LoweringBuilder &b, Value j, Value pick,
                  ValueRange outs) -> SmallVector<Value> {
                // Weights are written below, once the k picks are known.
                return {outs[0], b.insert(pick, outs[1], {row, j})};
              });
          Value rowIds = picked[1];
          // Normalise and scale: read back the k picks of this row.
          Value kIdx = b.idx(k);
          Value sum = b.forLoop(
              zero, kIdx, {b.f32(0.0)},
              [&](LoweringBuilder &b, Value j,
                  ValueRange acc) -> SmallVector<Value> {
                Value id = b.extract(rowIds, {row, j});
                return {b.add(acc[0], b.extract(scores, {b.toIndex(id)}))};
              })[0];
          Value denom = b.f32(1.0);
          if (op.getNormalize())
            denom =
                b.select(b.cmpf(CmpF::OGT, sum, b.f32(0.0)), sum, b.f32(1.0));
          Value rowWeights =
              b.forLoop(zero, kIdx, {picked[0]},
                        [&](LoweringBuilder &b, Value j,
                            ValueRange acc) -> SmallVector<Value> {
                          Value id = b.extract(rowIds, {row, j});
                          Value s = b.extract(scores, {b.toIndex(id)});
                          Value wv = b.mul(b.div(s, denom), b.f32(scaling));
                          return {b.insert(b.fromF32(wv, w), acc[0], {row, j})};
                        })[0];
          return SmallVector<Value>{rowWeights, rowIds};
        });
    rewriter.replaceOp(op, out);
    return success();
  }
};

/// moe.route_grad => per row (all f32): the forward's scores s, the
/// selected sum S and the dot D of grad with the selected scores, ds
/// scattered at the picks (in order; ids outside [0, E) skipped), then the
/// scoring's Jacobian: softmax s * (ds - <ds, s>), sigmoid ds * s * (1 - s).
struct LowerRouteGrad : OpRewritePattern<RouteGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(RouteGradOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value grad = op.getGrad(), logits = op.getLogits();
    Value indices = op.getIndices();
    auto resultType = op.getResult().getType();
    Type o = resultType.getElementType();
    int64_t e = op.getLogits().getType().getDimSize(1);
    int64_t k = op.getGrad().getType().getDimSize(1);
    bool softmax = op.getScoring() == ScoringFn::softmax;
    bool normalize = op.getNormalize();
    Value scaling = b.f32(op.getScaling().convertToFloat());
    auto rowType = RankedTensorType::get({e}, b.getF32Type());
    Value t = b.dim(logits, 0);
    Value result = b.empty(resultType, dynRows(resultType, t));
    Value zero = b.idx(0), numExperts = b.idx(e), kIdx = b.idx(k);
    Value eI32 = b.i32(e);
    result = b.forLoop(
        zero, t, {result},
        [&](LoweringBuilder &b, Value row,
            ValueRange outs) -> SmallVector<Value> {
          RoutingScores routing(b, e, softmax,
                                [&](LoweringBuilder &b, Value col) {
                                  return b.extract(logits, {row, col});
                                });
          Value scores = b.forLoop(
              zero, numExperts, {b.empty(rowType, {})},
              [&](LoweringBuilder &b, Value col,
                  ValueRange acc) -> SmallVector<Value> {
                return {b.insert(routing.score(b, col), acc[0], {col})};
              })[0];
          // The valid picks' S and D.
          auto forPicks = [&](LoweringBuilder &b, ValueRange init,
                              function_ref<SmallVector<Value>(
                                  LoweringBuilder &, Value, Value, ValueRange)>
                                  body) {
            return b.forLoop(zero, kIdx, init,
                             [&](LoweringBuilder &b, Value j,
                                 ValueRange acc) -> SmallVector<Value> {
                               Value id = b.extract(indices, {row, j});
                               return b.ifThen(b.inRange(id, b.i32(0), eI32),
                                               acc, [&](LoweringBuilder &b) {
                                                 return body(
                                                     b, j, b.toIndex(id), acc);
                                               });
                             });
          };
          SmallVector<Value> sd =
              forPicks(b, {b.f32(0.0), b.f32(0.0)},
                       [&](LoweringBuilder &b, Value j, Value id,
                           ValueRange acc) -> SmallVector<Value> {
                         Value s = b.extract(scores, {id});
                         Value g = b.toF32(b.extract(grad, {row, j}));
                         return {b.add(acc[0], s), b.add(acc[1], b.mul(g, s))};
                       });
          Value sum = sd[0], dot = sd[1];
          Value normalized =
              normalize ? b.cmpf(CmpF::OGT, sum, b.f32(0.0)) : Value();
          Value dsInit = b.filled(rowType, {}, b.f32(0.0));
          Value ds = forPicks(
              b, {dsInit},
              [&](LoweringBuilder &b, Value j, Value id,
                  ValueRange acc) -> SmallVector<Value> {
                Value g = b.toF32(b.extract(grad, {row, j}));
                Value d = g;
                if (normalized) {
                  Value safe = b.select(normalized, sum, b.f32(1.0));
                  Value n = b.div(b.sub(g, b.div(dot, safe)), safe);
                  d = b.select(normalized, n, g);
                }
                Value old = b.extract(acc[0], {id});
                return {b.insert(b.add(old, b.mul(scaling, d)), acc[0], {id})};
              })[0];
          Value dsDot = b.forLoop(
              zero, numExperts, {b.f32(0.0)},
              [&](LoweringBuilder &b, Value col,
                  ValueRange acc) -> SmallVector<Value> {
                return {b.add(acc[0], b.mul(b.extract(ds, {col}),
                                            b.extract(scores, {col})))};
              })[0];
          return b.forLoop(
              zero, numExperts, {outs[0]},
              [&](LoweringBuilder &b, Value col,
                  ValueRange acc) -> SmallVector<Value> {
                Value s = b.extract(scores, {col});
                Value d = b.extract(ds, {col});
                Value v = softmax ? b.mul(s, b.sub(d, dsDot))
                                  : b.mul(b.mul(d, s), b.sub(b.f32(1.0), s));
                return {b.insert(b.fromF32(v, o), acc[0], {row, col})};
              });
        })[0];
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void mlir::moe::populateRoutingLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerTopK, LowerRoute, LowerRouteGrad>(patterns.getContext());
}
