//===- WarpSelect.cpp - top-k of a row across a warp ----------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// One warp per token row when E <= 512 and n_group <= 32: lane l holds
// the R = ceil(E / 32) consecutive entries l * R .. l * R + R - 1 of the
// row in registers, and each of the k picks is one warp-wide argmax. A
// key is the i32 order key alone (0 = not selectable, NaN 1):
// the warp's largest key (redux.sync umax on sm_80 and later, else a
// butterfly), the lowest entry holding it (umin), then the pick leaves the
// candidates; when R <= kSortedSelectRegs each lane sorts its entries once
// and a pick compares only the lanes' heads (warpSelectSorted), else every
// pick scans the lane's R keys and clears the picked one. (Keys of i64,
// (order key) << 32 | ~index, with a butterfly maximum below the previous
// pick's, were the first form, 1.5x slower: bench/NOTES.md v22.) Either
// way (key
// descending, entry ascending) is exactly the selection order of
// Selection.h's `precedes` (larger value first, -0 == +0, lower index on
// ties, NaN below every number and NaNs by index): the picks are those of
// `selectTopK`.
//
//===----------------------------------------------------------------------===//

#include "Routing.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;
using namespace mlir::moe::gpu_lowering::routing;

using CmpF = arith::CmpFPredicate;
using CmpI = arith::CmpIPredicate;

//===----------------------------------------------------------------------===//
// Selection keys
//===----------------------------------------------------------------------===//

Value routing::orderKey(LoweringBuilder &b, Value v) {
  Type i32 = b.getI32Type();
  Value zero = b.f32(0.0);
  Value canonical = b.select(b.cmpf(CmpF::OEQ, v, zero), zero, v);
  Value bits = arith::BitcastOp::create(b, i32, canonical);
  Value negative = b.cmpi(CmpI::slt, bits, b.i32(0));
  Value key = b.select(negative, arith::XOrIOp::create(b, bits, b.i32(-1)),
                       arith::OrIOp::create(b, bits, b.i32(INT32_MIN)));
  return b.select(b.cmpf(CmpF::UNO, v, v), b.i32(0), key);
}

namespace {

/// The selection key of a selectable value: orderKey(v), with NaN 1
/// instead of 0 (still below every number: -inf is 0x007fffff), so that 0
/// can mean "not selectable". Entries with equal keys rank by index.
Value selectionKey(LoweringBuilder &b, Value v) {
  Value key = orderKey(b, v);
  return b.select(b.cmpi(CmpI::eq, key, b.i32(0)), b.i32(1), key);
}

} // namespace

Value routing::WarpSelectMode::key(LoweringBuilder &b, Value v) const {
  return selectionKey(b, v);
}

//===----------------------------------------------------------------------===//
// The k picks
//===----------------------------------------------------------------------===//

namespace {

/// Unsigned maximum (`max`) or minimum of an i32 over the warp, in every
/// lane: one redux.sync where the chip has it (sm_80 and later), else a
/// shuffle butterfly.
Value warpReduceU32(LoweringBuilder &b, Value v, bool max, bool redux) {
  if (redux)
    return NVVM::ReduxOp::create(
        b, b.getI32Type(), v,
        max ? NVVM::ReduxKind::UMAX : NVVM::ReduxKind::UMIN, b.i32(-1));
  return warpAllReduce(b, {v},
                       [&](LoweringBuilder &b, ValueRange x,
                           ValueRange y) -> SmallVector<Value> {
                         if (max)
                           return {arith::MaxUIOp::create(b, x[0], y[0])};
                         return {arith::MinUIOp::create(b, x[0], y[0])};
                       })[0];
}

/// One selection pass of warpSelectLoop: from the loop-carried key state,
/// the pick (the same in every lane), its score (null without scores)
/// and the next key state.
struct WarpPick {
  Value pick, score;
  SmallVector<Value> state;
};
using WarpPickFn = function_ref<WarpPick(LoweringBuilder &, ValueRange state)>;

/// The k selection passes of `selectTopK` over a row spread across the
/// warp: `state` is the key state each pass (`pass`) consumes and renews,
/// `withScores` whether passes fetch a score for their pick. Lane l keeps
/// the picks (and scores) of slots q * 32 + l; with `sumScores`, the picks'
/// scores are summed in slot order (0 + s_0 + s_1 + ...), as RouteToGPU's
/// per-thread kernel does.
WarpPicks warpSelectLoop(LoweringBuilder &b, const WarpRow &row, int64_t k,
                         ValueRange state, bool withScores, bool sumScores,
                         WarpPickFn pass) {
  int64_t slotRegs = (k + kWarpSize - 1) / kWarpSize;
  size_t keyState = state.size();
  // Loop state: the key state, score sum, per slot register: pick, score.
  SmallVector<Value> init(state.begin(), state.end());
  if (sumScores)
    init.push_back(b.f32(0.0));
  for (int64_t q = 0; q < slotRegs; ++q) {
    init.push_back(b.i32(0));
    if (withScores)
      init.push_back(b.f32(0.0));
  }
  size_t slotsAt = keyState + (sumScores ? 1 : 0), perSlot = withScores ? 2 : 1;
  SmallVector<Value> final = b.forLoop(
      b.idx(0), b.idx(k), init,
      [&](LoweringBuilder &b, Value j, ValueRange args) -> SmallVector<Value> {
        WarpPick p = pass(b, args.take_front(keyState));
        SmallVector<Value> next = std::move(p.state);
        if (sumScores)
          next.push_back(b.add(args[keyState], p.score));
        for (int64_t q = 0; q < slotRegs; ++q) {
          Value slot = b.add(b.idx(q * kWarpSize), row.lane);
          Value mine = b.cmpi(CmpI::eq, j, slot);
          size_t at = slotsAt + q * perSlot;
          next.push_back(b.select(mine, p.pick, args[at]));
          if (withScores)
            next.push_back(b.select(mine, p.score, args[at + 1]));
        }
        return next;
      });
  WarpPicks result;
  if (sumScores)
    result.scoreSum = final[keyState];
  for (int64_t q = 0; q < slotRegs; ++q) {
    size_t at = slotsAt + q * perSlot;
    result.picks.push_back(final[at]);
    if (withScores)
      result.scores.push_back(final[at + 1]);
  }
  return result;
}

/// `keys[r]` is register r's selection key (0 = not
/// selectable), `scores[r]` (optional) a value to fetch for each pick.
/// Pass j takes the best entry not picked yet: the lane's best register
/// (the first of its largest keys: its entries ascend), the warp's
/// largest key, the lowest entry holding it; the pick's key is then
/// cleared (it is unique, so this equals ranking strictly after the
/// previous pick). The pick's score is read in the lane that holds it and
/// broadcast.
WarpPicks warpSelect(LoweringBuilder &b, const WarpRow &row, int64_t k,
                     ArrayRef<Value> keys, ArrayRef<Value> scores,
                     bool sumScores, bool redux) {
  int64_t regs = static_cast<int64_t>(keys.size());
  bool withScores = !scores.empty();
  SmallVector<Value> entries;
  for (int64_t r = 0; r < regs; ++r)
    entries.push_back(b.toI32(row.entry(b, r)));
  return warpSelectLoop(
      b, row, k, keys, withScores, sumScores,
      [&](LoweringBuilder &b, ValueRange keysIn) -> WarpPick {
        Value laneKey = b.i32(0), laneEntry = b.i32(0);
        for (int64_t r = 0; r < regs; ++r) {
          Value better = b.cmpi(CmpI::ugt, keysIn[r], laneKey);
          laneKey = b.select(better, keysIn[r], laneKey);
          laneEntry = b.select(better, entries[r], laneEntry);
        }
        Value best = warpReduceU32(b, laneKey, /*max=*/true, redux);
        // No key left (not reachable: the verifier keeps >= k selectable
        // entries): every lane offers entry 0, as selectTopK's clamp.
        Value offer =
            b.select(b.cmpi(CmpI::eq, laneKey, best), laneEntry, b.i32(-1));
        WarpPick p;
        p.pick = b.clamp(warpReduceU32(b, offer, /*max=*/false, redux),
                         b.i32(0), b.i32(row.numEntries - 1));
        if (withScores)
          p.score = b.f32(0.0);
        for (int64_t r = 0; r < regs; ++r) {
          Value picked = b.cmpi(CmpI::eq, entries[r], p.pick);
          p.state.push_back(b.select(picked, b.i32(0), keysIn[r]));
          if (withScores)
            p.score = b.select(picked, scores[r], p.score);
        }
        if (withScores)
          p.score = warpShuffle(b, p.score, row.owner(b, p.pick),
                                gpu::ShuffleMode::IDX);
        return p;
      });
}

/// Largest entries per lane for which warpSelectSorted is used (its sort
/// costs R (R - 1) / 2 compare-exchanges once; each pass then looks at
/// one key per lane instead of R).
constexpr int64_t kSortedSelectRegs = 4;

/// The same with each lane's entries sorted first, (key descending,
/// entry ascending) = `precedes`' order, by an odd-even transposition
/// network: pass j then compares only the lanes' heads (redux umax of the
/// head keys, umin of the entries of the heads holding it), and the lane
/// that owns the pick pops its head. A lane's head is its first entry of
/// its largest key, so the picks are exactly warpSelect's (no key left,
/// not reachable: entry 0, as there).
WarpPicks warpSelectSorted(LoweringBuilder &b, const WarpRow &row, int64_t k,
                           ArrayRef<Value> keys, ArrayRef<Value> scores,
                           bool sumScores, bool redux) {
  int64_t regs = static_cast<int64_t>(keys.size());
  bool withScores = !scores.empty();
  SmallVector<Value> key(keys.begin(), keys.end()), entry, score;
  for (int64_t r = 0; r < regs; ++r)
    entry.push_back(b.toI32(row.entry(b, r)));
  if (withScores)
    score.assign(scores.begin(), scores.end());
  auto exchange = [&](int64_t i, int64_t j) {
    // Entry j goes first: a larger key, or the same key and a lower entry.
    Value later =
        arith::OrIOp::create(b, b.cmpi(CmpI::ugt, key[j], key[i]),
                             b.andi(b.cmpi(CmpI::eq, key[j], key[i]),
                                    b.cmpi(CmpI::ult, entry[j], entry[i])));
    auto swap = [&](SmallVector<Value> &v) {
      Value vi = b.select(later, v[j], v[i]);
      v[j] = b.select(later, v[i], v[j]);
      v[i] = vi;
    };
    swap(key);
    swap(entry);
    if (withScores)
      swap(score);
  };
  for (int64_t round = 0; round < regs; ++round)
    for (int64_t i = round % 2; i + 1 < regs; i += 2)
      exchange(i, i + 1);
  SmallVector<Value> state(key);
  state.append(entry);
  if (withScores)
    state.append(score);
  return warpSelectLoop(
      b, row, k, state, withScores, sumScores,
      [&](LoweringBuilder &b, ValueRange in) -> WarpPick {
        ValueRange inKey = in.take_front(regs);
        ValueRange inEntry = in.slice(regs, regs);
        Value best = warpReduceU32(b, inKey[0], /*max=*/true, redux);
        Value offer =
            b.select(b.cmpi(CmpI::eq, inKey[0], best), inEntry[0], b.i32(-1));
        Value first = warpReduceU32(b, offer, /*max=*/false, redux);
        Value left = b.cmpi(CmpI::ne, best, b.i32(0));
        WarpPick p;
        p.pick =
            b.select(left, b.clamp(first, b.i32(0), b.i32(row.numEntries - 1)),
                     b.i32(0));
        // The owner pops its head (entries are unique).
        Value pop = b.andi(b.cmpi(CmpI::eq, inEntry[0], first), left);
        auto popped = [&](ValueRange v, Value fill) {
          for (int64_t r = 0; r < regs; ++r)
            p.state.push_back(
                b.select(pop, r + 1 < regs ? v[r + 1] : fill, v[r]));
        };
        popped(inKey, b.i32(0));
        popped(inEntry, b.i32(-1));
        if (withScores) {
          ValueRange inScore = in.slice(2 * regs, regs);
          popped(inScore, b.f32(0.0));
          p.score = warpShuffle(b, inScore[0], row.owner(b, p.pick),
                                gpu::ShuffleMode::IDX);
        }
        return p;
      });
}

} // namespace

WarpPicks routing::warpSelectWith(LoweringBuilder &b,
                                  const WarpSelectMode &mode,
                                  const WarpRow &row, int64_t k,
                                  ArrayRef<Value> keys, ArrayRef<Value> scores,
                                  bool sumScores) {
  if (static_cast<int64_t>(keys.size()) <= kSortedSelectRegs)
    return warpSelectSorted(b, row, k, keys, scores, sumScores, mode.redux);
  return warpSelect(b, row, k, keys, scores, sumScores, mode.redux);
}

void routing::forEachLaneSlot(
    LoweringBuilder &b, const WarpRow &row, int64_t k,
    function_ref<void(LoweringBuilder &, Value, int64_t)> body) {
  for (int64_t q = 0; q * kWarpSize < k; ++q) {
    Value j = b.add(b.idx(q * kWarpSize), row.lane);
    if ((q + 1) * kWarpSize <= k) {
      body(b, j, q);
      continue;
    }
    when(b, b.cmpi(CmpI::ult, j, b.idx(k)),
         [&](LoweringBuilder &b) { body(b, j, q); });
  }
}
