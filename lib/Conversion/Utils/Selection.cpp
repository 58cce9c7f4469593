//===- Selection.cpp - the top-k selection order --------------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Selection.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::moe;

using CmpF = arith::CmpFPredicate;
using CmpI = arith::CmpIPredicate;

/// (va, ia) ranks before (vb, ib): larger value first, lower index on equal
/// values, NaN below every number and NaNs among themselves by index.
Value mlir::moe::precedes(LoweringBuilder &b, Value va, Value ia, Value vb,
                          Value ib) {
  Value aNan = b.cmpf(CmpF::UNO, va, va);
  Value bNan = b.cmpf(CmpF::UNO, vb, vb);
  Value lowerIndex = b.cmpi(CmpI::slt, ia, ib);
  Value greater = b.cmpf(CmpF::OGT, va, vb);
  Value tie = b.andi(b.cmpf(CmpF::OEQ, va, vb), lowerIndex);
  Value numbers = b.ori(greater, tie);
  Value whenANan = b.andi(bNan, lowerIndex);
  Value whenANumber = b.select(bNan, b.i1(true), numbers);
  return b.select(aNan, whenANan, whenANumber);
}

/// Runs the k selection passes over entries [0, numEntries) of one row.
/// `valueAt` gives an entry's f32 key, `allowed` (optional) excludes
/// entries. For each slot j, `emit` receives the chosen entry and threads
/// `state` (the output tensors). Returns the final state.
SmallVector<Value> mlir::moe::selectTopK(LoweringBuilder &b, int64_t k,
                                         int64_t numEntries, ValueRange state,
                                         ValueAtFn valueAt, AllowedFn allowed,
                                         EmitSlotFn emit) {
  SmallVector<Value> init(state);
  init.push_back(b.i32(-1));  // previous pick
  init.push_back(b.f32(0.0)); // its key
  size_t n = state.size();
  SmallVector<Value> result = b.forLoop(
      b.idx(0), b.idx(k), init,
      [&](LoweringBuilder &b, Value j, ValueRange args) {
        Value prev = args[n], prevKey = args[n + 1];
        Value havePrev = b.cmpi(CmpI::sge, prev, b.i32(0));
        SmallVector<Value> best = b.forLoop(
            b.idx(0), b.idx(numEntries), {b.i32(-1), b.f32(0.0)},
            [&](LoweringBuilder &b, Value e, ValueRange cur) {
              Value ei = b.toI32(e);
              Value key = valueAt(b, e);
              Value afterPrev =
                  b.ori(b.noti(havePrev), precedes(b, prevKey, prev, key, ei));
              Value haveBest = b.cmpi(CmpI::sge, cur[0], b.i32(0));
              Value beatsBest =
                  b.ori(b.noti(haveBest), precedes(b, key, ei, cur[1], cur[0]));
              Value take = b.andi(afterPrev, beatsBest);
              if (allowed)
                take = b.andi(take, allowed(b, e));
              return SmallVector<Value>{b.select(take, ei, cur[0]),
                                        b.select(take, key, cur[1])};
            });
        // Every row has at least k selectable entries (verifier); clamp
        // anyway so a pick is always a valid index.
        Value pick = b.clamp(best[0], b.i32(0), b.i32(numEntries - 1));
        SmallVector<Value> next = emit(b, j, pick, args.take_front(n));
        next.push_back(pick);
        next.push_back(best[1]);
        return next;
      });
  result.resize(n);
  return result;
}

RoutingScores::RoutingScores(LoweringBuilder &b, int64_t numExperts,
                             bool softmax, RawLogitFn rawLogitAt)
    : rawLogitAt(std::move(rawLogitAt)), softmax(softmax) {
  negInf = b.f32(-std::numeric_limits<float>::infinity());
  maxFinite = b.f32(std::numeric_limits<float>::max());
  if (!softmax)
    return;
  Value zero = b.idx(0), end = b.idx(numExperts);
  rowMax = b.forLoop(
      zero, end, {negInf},
      [&](LoweringBuilder &b, Value col, ValueRange acc) -> SmallVector<Value> {
        return {arith::MaximumFOp::create(b, acc[0], logit(b, col))};
      })[0];
  rowSum = b.forLoop(
      zero, end, {b.f32(0.0)},
      [&](LoweringBuilder &b, Value col, ValueRange acc) -> SmallVector<Value> {
        Value x = b.sub(logit(b, col), rowMax);
        return {b.add(acc[0], math::ExpOp::create(b, x))};
      })[0];
}

Value RoutingScores::logit(LoweringBuilder &b, Value col) const {
  Value x = b.toF32(rawLogitAt(b, col));
  x = b.select(b.cmpf(CmpF::UNO, x, x), negInf, x);
  return b.select(b.cmpf(CmpF::OEQ, x, b.f32(INFINITY)), maxFinite, x);
}

Value RoutingScores::score(LoweringBuilder &b, Value col) const {
  Value x = logit(b, col);
  if (softmax) {
    Value p = b.div(math::ExpOp::create(b, b.sub(x, rowMax)), rowSum);
    // All logits -inf: no distribution; every score is 0.
    return b.select(b.cmpf(CmpF::OEQ, rowMax, negInf), b.f32(0.0), p);
  }
  Value ex = math::ExpOp::create(b, arith::NegFOp::create(b, x));
  return b.div(b.f32(1.0), b.add(b.f32(1.0), ex));
}

Value mlir::moe::groupScore(LoweringBuilder &b, Value first, int64_t perGroup,
                            bool top2, ValueAtFn keyAt) {
  Value negInf = b.f32(-std::numeric_limits<float>::infinity());
  SmallVector<Value> top = b.forLoop(
      first, b.add(first, b.idx(perGroup)), {negInf, negInf},
      [&](LoweringBuilder &b, Value col, ValueRange m) -> SmallVector<Value> {
        Value c = keyAt(b, col);
        Value gt1 = b.cmpf(CmpF::OGT, c, m[0]);
        Value gt2 = b.cmpf(CmpF::OGT, c, m[1]);
        return {b.select(gt1, c, m[0]),
                b.select(gt1, m[0], b.select(gt2, c, m[1]))};
      });
  return top2 ? b.add(top[0], top[1]) : top[0];
}

Value mlir::moe::groupKept(LoweringBuilder &b, int64_t nGroup,
                           int64_t topkGroup, Value g, ValueAtFn scoreOf) {
  Value gi = b.toI32(g), sg = scoreOf(b, g);
  Value before = b.forLoop(
      b.idx(0), b.idx(nGroup), {b.i32(0)},
      [&](LoweringBuilder &b, Value h, ValueRange n) -> SmallVector<Value> {
        Value ahead = precedes(b, scoreOf(b, h), b.toI32(h), sg, gi);
        return {b.add(n[0], arith::ExtUIOp::create(b, b.getI32Type(), ahead))};
      })[0];
  return b.cmpi(CmpI::slt, before, b.i32(topkGroup));
}
