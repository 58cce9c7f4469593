//===- Selection.cpp - the top-k selection order --------------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Selection.h"

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
  init.push_back(b.i32(-1));   // previous pick
  init.push_back(b.f32(0.0));  // its key
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
              Value afterPrev = b.ori(b.noti(havePrev),
                                      precedes(b, prevKey, prev, key, ei));
              Value haveBest = b.cmpi(CmpI::sge, cur[0], b.i32(0));
              Value beatsBest = b.ori(b.noti(haveBest),
                                      precedes(b, key, ei, cur[1], cur[0]));
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

