//===- RoutingToGPU.cpp - moe.topk / moe.route as GPU kernels -------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// One warp per token row when E <= 512 and n_group <= 32: lane l holds
// the R = ceil(E / 32) consecutive entries l * R .. l * R + R - 1 of the
// row in registers, and each of the k picks is one warp-wide argmax. With
// warp-select=i64, entries compare as one unsigned i64 per entry, (order
// key of the value) << 32 | ~index, and pick j is the butterfly (gpu.shuffle
// xor) maximum of the keys below pick j - 1's. With warp-select=i32 (the
// default) a key is the i32 order key alone (0 = not selectable, NaN 1):
// the warp's largest key (redux.sync umax on sm_80 and later, else a
// butterfly), the lowest entry holding it (umin), then the pick leaves the
// candidates; when R <= kSortedSelectRegs each lane sorts its entries once
// and a pick compares only the lanes' heads (warpSelectSorted), else every
// pick scans the lane's R keys and clears the picked one. Either way (key
// descending, entry ascending) is exactly the selection order of
// Selection.h's `precedes` (larger value first, -0 == +0, lower index on
// ties, NaN below every number and NaNs by index): the picks are those of
// `selectTopK`.
// moe.route computes every score once with the same f32 operations as
// RoutingScores / groupScore / groupKept, in the same order wherever the
// rounding depends on it: the softmax row max is a maximumf butterfly
// (exact in any order), the softmax sum is added in expert order (for E
// <= 128 by the route kernel's 16-row blocks: the warps write their
// exponentials to shared memory and lane j of warp 0 adds row j's;
// elsewhere lane l adds its R exponentials to the running sum and hands
// it to lane l + 1), a group score is the top-2 of a multiset (exact in any
// order), the normalising sum runs over the slots in order. Results are
// bit-identical to the one-thread-per-row kernel, which remains for larger E /
// n_group: it runs the k selection passes of Selection.h serially over the row
// (O(k * E) per row), with the group mask in a T x n_group scratch buffer.
//
// moe.route_dispatch is split into route + dispatch, whose kernels are in
// DispatchToGPU.cpp; with route-dispatch-small (the default), a launch
// with few rows (T <= 64, k <= 32, E <= 256) is one kernel instead, a
// thread-block cluster of up to 8 blocks (routeDispatchCluster), chosen on
// the host.
//
//===----------------------------------------------------------------------===//
#include "Gemm/NVVMBuilder.h"
#include "KernelBuilder.h"
#include "Patterns.h"

#include "Utils/Selection.h"
#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include <limits>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using CmpF = arith::CmpFPredicate;
using CmpI = arith::CmpIPredicate;

namespace {

/// Largest row length (E) and group count of the one-warp-per-row kernels
/// (E / 32 entries per lane live in registers; every lane evaluates the
/// n_group^2 group ranking).
constexpr int64_t kMaxWarpRowEntries = 512;
constexpr int64_t kMaxWarpGroups = 32;

bool useWarpPerRow(int64_t e, int64_t nGroup) {
  return e <= kMaxWarpRowEntries && nGroup <= kMaxWarpGroups;
}

//===----------------------------------------------------------------------===//
// Selection keys
//===----------------------------------------------------------------------===//

/// An unsigned i32 whose integer order is the order of f32 values in
/// `precedes`: larger value -> larger key, -0 and +0 the same key (OEQ),
/// NaN 0, below every number (-inf is 0x007fffff).
Value orderKey(LoweringBuilder &b, Value v) {
  Type i32 = b.getI32Type();
  Value zero = b.f32(0.0);
  Value canonical = b.select(b.cmpf(CmpF::OEQ, v, zero), zero, v);
  Value bits = arith::BitcastOp::create(b, i32, canonical);
  Value negative = b.cmpi(CmpI::slt, bits, b.i32(0));
  Value key = b.select(negative, arith::XOrIOp::create(b, bits, b.i32(-1)),
                       arith::OrIOp::create(b, bits, b.i32(INT32_MIN)));
  return b.select(b.cmpf(CmpF::UNO, v, v), b.i32(0), key);
}

/// How the warp-per-row kernels select (option `warp-select`): i64 keys
/// with the entry in the low half and a butterfly argmax over the keys
/// ranking after the previous pick, or i32 order keys (the default), the
/// lanes' best (their sorted heads when a lane holds at most
/// kSortedSelectRegs entries), redux.sync
/// umax / umin (a butterfly before sm_80) and the pick leaving the
/// candidates.
struct WarpSelectMode {
  bool i32Keys = false;
  bool redux = false;
  /// match.any.sync for the slot ranks (sm_70 and later).
  bool matchSync = false;
  Value key(LoweringBuilder &b, Value v, Value entryI32) const;
  Value none(LoweringBuilder &b) const {
    return i32Keys ? b.i32(0)
                   : arith::ConstantIntOp::create(b, b.getI64Type(), 0);
  }
};

/// The selection key of a selectable value: orderKey(v), with NaN 1
/// instead of 0 (still below every number: -inf is 0x007fffff), so that 0
/// can mean "not selectable". Entries with equal keys rank by index.
Value selectionKey(LoweringBuilder &b, Value v) {
  Value key = orderKey(b, v);
  return b.select(b.cmpi(CmpI::eq, key, b.i32(0)), b.i32(1), key);
}

/// orderKey(v) << 32 | ~entry (entry in [0, 2^31)): (va, ia) precedes
/// (vb, ib) exactly when key(va, ia) > key(vb, ib) as unsigned i64. Every
/// key is > 0 (its low half is >= 2^31), so 0 can mean "not selectable".
Value selectionKey64(LoweringBuilder &b, Value v, Value entryI32) {
  Type i64 = b.getI64Type();
  Value hi =
      arith::ShLIOp::create(b, arith::ExtUIOp::create(b, i64, orderKey(b, v)),
                            arith::ConstantIntOp::create(b, i64, 32));
  Value lo = arith::ExtUIOp::create(
      b, i64, arith::XOrIOp::create(b, entryI32, b.i32(-1)));
  return arith::OrIOp::create(b, hi, lo);
}

Value WarpSelectMode::key(LoweringBuilder &b, Value v, Value entryI32) const {
  return i32Keys ? selectionKey(b, v) : selectionKey64(b, v, entryI32);
}

//===----------------------------------------------------------------------===//
// One row across a warp
//===----------------------------------------------------------------------===//

/// A row of `numEntries` spread over a warp: lane l holds the consecutive
/// entries l * R + r, r < R = ceil(numEntries / 32), in registers (so the
/// row in index order is lane-major, which the in-order softmax sum uses).
struct WarpRow {
  int64_t numEntries;
  Value lane; // index

  int64_t regs() const { return (numEntries + kWarpSize - 1) / kWarpSize; }
  /// Every lane's entry of register r is < numEntries.
  bool full() const { return regs() * kWarpSize == numEntries; }
  Value entry(LoweringBuilder &b, int64_t r) const {
    return b.add(b.mul(lane, b.idx(regs())), b.idx(r));
  }
  /// entry < numEntries (i1).
  Value valid(LoweringBuilder &b, int64_t r) const {
    if (full())
      return b.i1(true);
    return b.cmpi(CmpI::ult, entry(b, r), b.idx(numEntries));
  }
  /// The entry clamped into the row: always a legal column.
  Value column(LoweringBuilder &b, int64_t r) const {
    if (full())
      return entry(b, r);
    return b.minIdx(entry(b, r), b.idx(numEntries - 1));
  }
  /// The lane holding entry `e` (i32).
  Value owner(LoweringBuilder &b, Value e) const {
    return arith::DivUIOp::create(b, e, b.i32(regs()));
  }
};

/// Result of warpSelect: for q < ceil(k / 32), lane l holds slot q * 32 + l
/// (when < k): its pick and, when scores were given, the pick's score.
struct WarpPicks {
  SmallVector<Value> picks, scores;
  Value scoreSum; // sum of the k picks' scores in slot order (when asked)
};

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

/// warp-select=i32: `keys[r]` is register r's selection key (0 = not
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

/// warp-select=i32 with each lane's entries sorted first, (key descending,
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

/// warp-select=i64: `keys[r]` is register r's i64 selection key (0 = not
/// selectable). Pass j takes the largest key below the previous pick's
/// key (the best entry ranking strictly after it): a per-lane maximum,
/// then a butterfly; the pick is the key's ~low half. The pick's score is
/// read in the lane that holds it and broadcast.
WarpPicks warpSelect64(LoweringBuilder &b, const WarpRow &row, int64_t k,
                       ArrayRef<Value> keys, ArrayRef<Value> scores,
                       bool sumScores) {
  Type i64 = b.getI64Type();
  bool withScores = !scores.empty();
  Value first = arith::ConstantIntOp::create(b, i64, -1);
  return warpSelectLoop(
      b, row, k, first, withScores, sumScores,
      [&](LoweringBuilder &b, ValueRange state) -> WarpPick {
        Value prev = state[0];
        Value zero64 = arith::ConstantIntOp::create(b, i64, 0);
        Value best = zero64;
        for (Value key : keys) {
          Value after = b.cmpi(CmpI::ult, key, prev);
          best = arith::MaxUIOp::create(b, best, b.select(after, key, zero64));
        }
        best = warpAllReduce(b, {best},
                             [](LoweringBuilder &b, ValueRange x,
                                ValueRange y) -> SmallVector<Value> {
                               return {arith::MaxUIOp::create(b, x[0], y[0])};
                             })[0];
        // ~low half = the entry; no key left (not reachable: the verifier
        // keeps >= k selectable entries) gives -1, clamped to 0 as in
        // selectTopK.
        Value entry = arith::XOrIOp::create(
            b, arith::TruncIOp::create(b, b.getI32Type(), best), b.i32(-1));
        WarpPick p;
        p.pick = b.clamp(entry, b.i32(0), b.i32(row.numEntries - 1));
        if (withScores) {
          p.score = b.f32(0.0);
          for (auto [key, s] : llvm::zip_equal(keys, scores))
            p.score = b.select(b.cmpi(CmpI::eq, key, best), s, p.score);
          p.score = warpShuffle(b, p.score, row.owner(b, p.pick),
                                gpu::ShuffleMode::IDX);
        }
        p.state.push_back(best);
        return p;
      });
}

/// warpSelect (i32 keys) or warpSelect64, by `mode`.
WarpPicks warpSelectWith(LoweringBuilder &b, const WarpSelectMode &mode,
                         const WarpRow &row, int64_t k, ArrayRef<Value> keys,
                         ArrayRef<Value> scores, bool sumScores) {
  if (mode.i32Keys && static_cast<int64_t>(keys.size()) <= kSortedSelectRegs)
    return warpSelectSorted(b, row, k, keys, scores, sumScores, mode.redux);
  if (mode.i32Keys)
    return warpSelect(b, row, k, keys, scores, sumScores, mode.redux);
  return warpSelect64(b, row, k, keys, scores, sumScores);
}

/// Visits the slots a lane holds after warpSelect: body(j, q) for
/// j = q * 32 + lane < k.
void forEachLaneSlot(
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

/// Top-2 (or max) of a multiset of f32 keys as `groupScore` computes it:
/// (m0, m1) with m0 >= m1, NaN keys ignored, -inf padding.
std::pair<Value, Value> pushTop2(LoweringBuilder &b, Value m0, Value m1,
                                 Value c) {
  Value gt1 = b.cmpf(CmpF::OGT, c, m0);
  Value gt2 = b.cmpf(CmpF::OGT, c, m1);
  return {b.select(gt1, c, m0), b.select(gt1, m0, b.select(gt2, c, m1))};
}

/// Merge of two (m0, m1) pairs (NaN-free, m0 >= m1): the top two of the
/// four. Numerically symmetric; only zero signs may depend on the order,
/// and group scores are only compared (OEQ: -0 == +0).
SmallVector<Value> mergeTop2(LoweringBuilder &b, ValueRange x, ValueRange y,
                             bool top2) {
  Value xFirst = b.cmpf(CmpF::OGT, x[0], y[0]);
  Value m0 = b.select(xFirst, x[0], y[0]);
  if (!top2)
    return {m0};
  Value other = b.select(xFirst, y[0], x[0]);
  Value seconds = b.select(b.cmpf(CmpF::OGT, x[1], y[1]), x[1], y[1]);
  Value m1 = b.select(b.cmpf(CmpF::OGT, other, seconds), other, seconds);
  return {m0, m1};
}

//===----------------------------------------------------------------------===//
// moe.topk
//===----------------------------------------------------------------------===//

void topkPerThread(LoweringBuilder &b, int64_t k, int64_t e, Value input,
                   Value t, Value values, Value indices) {
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
}

void topkPerWarp(LoweringBuilder &b, int64_t k, int64_t e, Value input, Value t,
                 Value values, Value indices, const WarpSelectMode &mode) {
  launchWarpPerRow(b, t, [&](LoweringBuilder &b, Value rowIdx, Value lane) {
    WarpRow row{e, lane};
    SmallVector<Value> keys;
    for (int64_t r = 0; r < row.regs(); ++r) {
      Value v = b.toF32(b.load(input, {rowIdx, row.column(b, r)}));
      Value key = mode.key(b, v, b.toI32(row.entry(b, r)));
      if (!row.full())
        key = b.select(row.valid(b, r), key, mode.none(b));
      keys.push_back(key);
    }
    WarpPicks picks =
        warpSelectWith(b, mode, row, k, keys, {}, /*sumScores=*/false);
    forEachLaneSlot(b, row, k, [&](LoweringBuilder &b, Value j, int64_t q) {
      Value pick = picks.picks[q];
      b.store(b.load(input, {rowIdx, b.toIndex(pick)}), values, {rowIdx, j});
      b.store(pick, indices, {rowIdx, j});
    });
  });
}

struct TopKToGPU : OpRewritePattern<TopKOp> {
  TopKToGPU(MLIRContext *ctx, WarpSelectMode mode)
      : OpRewritePattern(ctx), mode(mode) {}

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
    if (useWarpPerRow(e, 1))
      topkPerWarp(b, k, e, input, t, values, indices, mode);
    else
      topkPerThread(b, k, e, input, t, values, indices);
    rewriter.replaceOp(op, {toTensor(b, values), toTensor(b, indices)});
    return success();
  }

  WarpSelectMode mode;
};

//===----------------------------------------------------------------------===//
// moe.route
//===----------------------------------------------------------------------===//

/// What the route kernels need of a moe.route.
struct RouteConfig {
  int64_t e, k, nGroup, topkGroup, perGroup;
  bool softmax, top2, normalize;
  float scaling;
  Type w;
  Value logits, bias, t, weights, indices;
};

void routePerThread(LoweringBuilder &b, const RouteConfig &cfg) {
  int64_t e = cfg.e, k = cfg.k, nGroup = cfg.nGroup, perGroup = cfg.perGroup;
  Value logits = cfg.logits, bias = cfg.bias, t = cfg.t;
  Value indices = cfg.indices, weights = cfg.weights;
  Value groupScores, groupMask;
  if (nGroup > 1) {
    groupScores =
        allocScratch(b, {ShapedType::kDynamic, nGroup}, b.getF32Type(), {t});
    groupMask =
        allocScratch(b, {ShapedType::kDynamic, nGroup}, b.getI32Type(), {t});
  }

  launchForEach(b, t, [&](LoweringBuilder &b, Value row) {
    Value zero = b.idx(0), one = b.idx(1);
    RoutingScores routing(b, e, cfg.softmax,
                          [&](LoweringBuilder &b, Value col) {
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
        b.store(
            groupScore(b, b.mul(g, b.idx(perGroup)), perGroup, cfg.top2, keyAt),
            groupScores, {row, g});
      });
      forEach(b, zero, b.idx(nGroup), one, [&](LoweringBuilder &b, Value g) {
        Value kept = groupKept(b, nGroup, cfg.topkGroup, g,
                               [&](LoweringBuilder &b, Value h) {
                                 return b.load(groupScores, {row, h});
                               });
        b.store(arith::ExtUIOp::create(b, b.getI32Type(), kept), groupMask,
                {row, g});
      });
    }

    selectTopK(b, k, e, {}, keyAt,
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
    Value sum = b.forLoop(
        zero, kIdx, {b.f32(0.0)},
        [&](LoweringBuilder &b, Value j, ValueRange acc) -> SmallVector<Value> {
          return {b.add(acc[0], pickedScore(b, j))};
        })[0];
    Value denom = b.f32(1.0);
    if (cfg.normalize)
      denom = b.select(b.cmpf(CmpF::OGT, sum, b.f32(0.0)), sum, b.f32(1.0));
    forEach(b, zero, kIdx, one, [&](LoweringBuilder &b, Value j) {
      Value wv = b.mul(b.div(pickedScore(b, j), denom), b.f32(cfg.scaling));
      b.store(b.fromF32(wv, cfg.w), weights, {row, j});
    });
  });
}

/// Keys of the experts of dropped groups set to 0 (group-limited routing,
/// topk_group < n_group): group scores as `groupScore` computes them, kept
/// groups as `groupKept` ranks them.
void dropGroups(LoweringBuilder &b, const RouteConfig &cfg, const WarpRow &row,
                ArrayRef<Value> keys, MutableArrayRef<Value> selection,
                const WarpSelectMode &mode) {
  int64_t nGroup = cfg.nGroup, perGroup = cfg.perGroup;
  int64_t regs = row.regs();
  Type i32 = b.getI32Type();
  Value negInf = b.f32(-std::numeric_limits<float>::infinity());
  auto reduce = [&](LoweringBuilder &b, Value m0, Value m1,
                    int64_t width) -> Value {
    SmallVector<Value> top{m0};
    if (cfg.top2)
      top.push_back(m1);
    // Butterfly over aligned segments of `width` lanes.
    for (int64_t offset = width / 2; offset >= 1; offset /= 2) {
      SmallVector<Value> other;
      for (Value v : top)
        other.push_back(warpShuffle(b, v, offset, gpu::ShuffleMode::XOR));
      top = mergeTop2(b, top, other, cfg.top2);
    }
    return cfg.top2 ? b.add(top[0], top[1]) : top[0];
  };
  // Order keys of the n_group group scores, the same in every lane.
  SmallVector<Value> groupOrder;
  // The lane's group when all its entries are in one (else null).
  Value laneGroup;
  int64_t lanesPerGroup = perGroup / regs;
  if (perGroup % regs == 0 && llvm::isPowerOf2_64(lanesPerGroup)) {
    // Group g is lanes [g, g + 1) * lanesPerGroup (E is a multiple of R, so
    // a lane's entries are all valid or all past E, and the lanes past
    // E / R form segments of their own): the lane's top-2, a butterfly
    // inside each segment, then group g's score from its first lane.
    Value m0 = negInf, m1 = negInf;
    for (int64_t r = 0; r < regs; ++r)
      std::tie(m0, m1) = pushTop2(b, m0, m1, keys[r]);
    Value score = reduce(b, m0, m1, lanesPerGroup);
    for (int64_t g = 0; g < nGroup; ++g)
      groupOrder.push_back(orderKey(
          b, warpShuffle(b, score, g * lanesPerGroup, gpu::ShuffleMode::IDX)));
    laneGroup = arith::DivUIOp::create(b, row.lane, b.idx(lanesPerGroup));
  } else {
    // Any layout: per group, the lane's top-2 of its entries in the group,
    // then a butterfly over the whole warp.
    for (int64_t g = 0; g < nGroup; ++g) {
      Value m0 = negInf, m1 = negInf;
      for (int64_t r = 0; r < regs; ++r) {
        Value entry = row.entry(b, r);
        Value member =
            b.andi(b.cmpi(CmpI::uge, entry, b.idx(g * perGroup)),
                   b.cmpi(CmpI::ult, entry, b.idx((g + 1) * perGroup)));
        std::tie(m0, m1) =
            pushTop2(b, m0, m1, b.select(member, keys[r], negInf));
      }
      groupOrder.push_back(orderKey(b, reduce(b, m0, m1, kWarpSize)));
    }
  }
  // groupKept: fewer than topk_group groups rank before g (a larger order
  // key, or an equal one and a lower group index). Bit g of `kept`.
  Value kept = b.i32(0);
  for (int64_t g = 0; g < nGroup; ++g) {
    Value before = b.i32(0);
    for (int64_t h = 0; h < nGroup; ++h) {
      if (h == g)
        continue;
      Value ahead =
          b.cmpi(h < g ? CmpI::uge : CmpI::ugt, groupOrder[h], groupOrder[g]);
      before = b.add(before, arith::ExtUIOp::create(b, i32, ahead));
    }
    Value isKept = arith::ExtUIOp::create(
        b, i32, b.cmpi(CmpI::slt, before, b.i32(cfg.topkGroup)));
    kept = arith::OrIOp::create(b, kept,
                                arith::ShLIOp::create(b, isKept, b.i32(g)));
  }
  // An entry's group is < n_group <= 32 when valid; clamped to 31 so that
  // the shift is always defined (invalid entries have key 0 anyway).
  auto keptBit = [&](LoweringBuilder &b, Value group) -> Value {
    Value g = b.toI32(b.minIdx(group, b.idx(kWarpSize - 1)));
    Value bit =
        arith::AndIOp::create(b, arith::ShRUIOp::create(b, kept, g), b.i32(1));
    return b.cmpi(CmpI::ne, bit, b.i32(0));
  };
  Value laneKept = laneGroup ? keptBit(b, laneGroup) : Value();
  for (int64_t r = 0; r < regs; ++r) {
    Value allowed = laneKept
                        ? laneKept
                        : keptBit(b, arith::DivUIOp::create(b, row.entry(b, r),
                                                            b.idx(perGroup)));
    selection[r] = b.select(allowed, selection[r], mode.none(b));
  }
}

/// The softmax row sum of a warp's exponentials (lane l holds entries
/// l * R + r), added in expert order: (..((0 + e_0) + e_1) ..).
using OrderedSumFn =
    function_ref<Value(LoweringBuilder &, ArrayRef<Value> exps)>;

/// Routes row `rowIdx` on the calling warp (all 32 lanes, `lane` = lane
/// id): weights and indices into cfg.weights / cfg.indices, stored only
/// where `rowValid` (null: always). `orderedSum` (null: the lanes hand
/// the running sum on, 32 shuffles) adds the softmax exponentials.
void routeRowOnWarp(LoweringBuilder &b, const RouteConfig &cfg,
                    const WarpSelectMode &mode, Value rowIdx, Value lane,
                    Value rowValid = nullptr,
                    OrderedSumFn orderedSum = nullptr) {
  int64_t e = cfg.e, k = cfg.k;
  WarpRow row{e, lane};
  int64_t regs = row.regs();
  Value negInf = b.f32(-std::numeric_limits<float>::infinity());
  Value zero = b.f32(0.0);
  // RoutingScores without softmax: logit() is the sanitised logit,
  // score() the sigmoid.
  RoutingScores sanitised(b, e, /*softmax=*/false,
                          [&](LoweringBuilder &b, Value col) {
                            return b.load(cfg.logits, {rowIdx, col});
                          });
  SmallVector<Value> cols, valid, scores;
  for (int64_t r = 0; r < regs; ++r) {
    cols.push_back(row.column(b, r));
    valid.push_back(row.valid(b, r));
  }
  if (cfg.softmax) {
    // RoutingScores' softmax, exp(x - rowMax) / rowSum and 0 for a row
    // of -inf, with entries past E at -inf. rowMax: maximumf in any
    // order is exact. rowSum: added in expert order as RoutingScores'
    // loop does, (..((0 + e_0) + e_1) ..) + e_{E-1}: lane l adds its
    // entries to the running sum, which lane l + 1 takes over.
    SmallVector<Value> x;
    Value localMax = negInf;
    for (int64_t r = 0; r < regs; ++r) {
      Value v = sanitised.logit(b, cols[r]);
      if (!row.full())
        v = b.select(valid[r], v, negInf);
      x.push_back(v);
      localMax = arith::MaximumFOp::create(b, localMax, v);
    }
    Value rowMax =
        warpAllReduce(b, {localMax},
                      [](LoweringBuilder &b, ValueRange p,
                         ValueRange q) -> SmallVector<Value> {
                        return {arith::MaximumFOp::create(b, p[0], q[0])};
                      })[0];
    SmallVector<Value> ex;
    for (int64_t r = 0; r < regs; ++r)
      ex.push_back(math::ExpOp::create(b, b.sub(x[r], rowMax)));
    Value rowSum = zero;
    if (orderedSum) {
      rowSum = orderedSum(b, ex);
    } else {
      for (int64_t l = 0; l * regs < e; ++l) {
        Value partial = rowSum;
        for (int64_t r = 0; r < regs && l * regs + r < e; ++r)
          partial = b.add(partial, ex[r]);
        rowSum = warpShuffle(b, partial, l, gpu::ShuffleMode::IDX);
      }
    }
    Value dead = b.cmpf(CmpF::OEQ, rowMax, negInf);
    for (int64_t r = 0; r < regs; ++r)
      scores.push_back(b.select(dead, zero, b.div(ex[r], rowSum)));
  } else {
    for (int64_t r = 0; r < regs; ++r)
      scores.push_back(sanitised.score(b, cols[r]));
  }
  // Selection keys: score + bias in f32, then the i64 selection key (0
  // past E).
  SmallVector<Value> keys, selection;
  for (int64_t r = 0; r < regs; ++r) {
    Value key = scores[r];
    if (cfg.bias)
      key = b.add(key, b.load(cfg.bias, {cols[r]}));
    if (!row.full())
      key = b.select(valid[r], key, negInf);
    keys.push_back(key);
    Value sk = mode.key(b, key, b.toI32(row.entry(b, r)));
    if (!row.full())
      sk = b.select(valid[r], sk, mode.none(b));
    selection.push_back(sk);
  }
  if (cfg.nGroup > 1 && cfg.topkGroup < cfg.nGroup)
    dropGroups(b, cfg, row, keys, selection, mode);

  WarpPicks picks =
      warpSelectWith(b, mode, row, k, selection, scores, cfg.normalize);
  // Normalise by the sum of the picks' unbiased scores and scale.
  Value denom = b.f32(1.0);
  if (cfg.normalize)
    denom = b.select(b.cmpf(CmpF::OGT, picks.scoreSum, zero), picks.scoreSum,
                     b.f32(1.0));
  auto store = [&](LoweringBuilder &b) {
    forEachLaneSlot(b, row, k, [&](LoweringBuilder &b, Value j, int64_t q) {
      b.store(picks.picks[q], cfg.indices, {rowIdx, j});
      Value wv = b.mul(b.div(picks.scores[q], denom), b.f32(cfg.scaling));
      b.store(b.fromF32(wv, cfg.w), cfg.weights, {rowIdx, j});
    });
  };
  if (rowValid)
    when(b, rowValid, store);
  else
    store(b);
}

/// Rows (= warps) per block of the softmax route kernel.
constexpr int64_t kRouteBlockRows = 16;
/// Largest entries per lane (E <= 128) for which the softmax row sums are
/// added through shared memory: at E = 256 (DeepSeek-V3) the one lane's
/// 256 dependent adds held the block's other warps longer than the 32
/// shuffle steps took (route kernel 39.8 -> 45.5 us at T = 16384, NOTES
/// v61).
constexpr int64_t kSharedSumRegs = 4;

/// One warp per row. With softmax and E <= 32 * kSharedSumRegs,
/// kRouteBlockRows rows a block and the ordered row sums off the warps:
/// every warp writes its row's
/// exponentials to shared memory (one row of R * 32 + 1 f32 per warp,
/// the padding makes lane j's walk along row j conflict-free), then lane
/// j of warp 0 adds row j's in expert order (entries past E are exp(-inf)
/// = 0 and add nothing) and hands the sums back: one lane per row does
/// the sequential adds instead of 32 dependent shuffles per row. Warps
/// past the last row compute on row 0 and store nothing, so that every
/// warp reaches the barriers.
void routePerWarp(LoweringBuilder &b, const RouteConfig &cfg,
                  const WarpSelectMode &mode) {
  WarpRow shape{cfg.e, Value()};
  if (!cfg.softmax || shape.regs() > kSharedSumRegs) {
    launchWarpPerRow(b, cfg.t,
                     [&](LoweringBuilder &b, Value rowIdx, Value lane) {
                       routeRowOnWarp(b, cfg, mode, rowIdx, lane);
                     });
    return;
  }
  int64_t width = shape.regs() * kWarpSize;
  Type f32 = b.getF32Type();
  launch(
      b, b.ceilDiv(cfg.t, kRouteBlockRows), b.idx(1),
      kRouteBlockRows * kWarpSize,
      {workgroupType({kRouteBlockRows, width + 1}, f32),
       workgroupType({kRouteBlockRows}, f32)},
      [&](LoweringBuilder &kb, const KernelIds &ids, ArrayRef<Value> shared) {
        Value exps = shared[0], sums = shared[1];
        Value warp = arith::DivUIOp::create(kb, ids.threadX, kb.idx(kWarpSize));
        Value lane = arith::RemUIOp::create(kb, ids.threadX, kb.idx(kWarpSize));
        Value row = kb.add(kb.mul(ids.blockX, kb.idx(kRouteBlockRows)), warp);
        Value rowValid = kb.cmpi(CmpI::ult, row, cfg.t);
        // T = 0 still launches one block (uniform: no barrier is reached).
        when(
            kb, kb.cmpi(CmpI::ugt, cfg.t, kb.idx(0)), [&](LoweringBuilder &kb) {
              auto orderedSum = [&](LoweringBuilder &kb,
                                    ArrayRef<Value> ex) -> Value {
                int64_t regs = shape.regs();
                for (int64_t r = 0; r < regs; ++r)
                  kb.store(
                      ex[r], exps,
                      {warp, kb.add(kb.mul(lane, kb.idx(regs)), kb.idx(r))});
                gpu::BarrierOp::create(kb);
                Value summer =
                    kb.andi(kb.cmpi(CmpI::eq, warp, kb.idx(0)),
                            kb.cmpi(CmpI::ult, lane, kb.idx(kRouteBlockRows)));
                when(kb, summer, [&](LoweringBuilder &kb) {
                  Value sum = kb.f32(0.0);
                  for (int64_t i = 0; i < width; ++i)
                    sum = kb.add(sum, kb.load(exps, {lane, kb.idx(i)}));
                  kb.store(sum, sums, {lane});
                });
                gpu::BarrierOp::create(kb);
                return kb.load(sums, {warp});
              };
              routeRowOnWarp(kb, cfg, mode, kb.select(rowValid, row, kb.idx(0)),
                             lane, rowValid, orderedSum);
            });
      });
}

//===----------------------------------------------------------------------===//
// moe.route_dispatch at small T
//===----------------------------------------------------------------------===//

/// route_dispatch in one launch of up to kClusterBlocks blocks forming one
/// thread-block cluster, for T <= kClusterRows, k <= kClusterMaxK and E <=
/// kClusterMaxExperts (bucket counters in shared memory): block
/// b (= its cluster rank) routes rows [8 b, 8 b + 8), one per warp, and
/// ranks their slots; the blocks' bucket counts meet through distributed
/// shared memory after a cluster barrier, so no block passes over all rows
/// and no counter needs zeroing.
constexpr int64_t kClusterBlocks = 8, kClusterThreads = 256;
constexpr int64_t kClusterRowsPerBlock = kClusterThreads / kWarpSize;
constexpr int64_t kClusterRows = kClusterBlocks * kClusterRowsPerBlock;
constexpr int64_t kClusterMaxK = kClusterThreads / kClusterRowsPerBlock;
constexpr int64_t kClusterMaxExperts = 256;

/// The cluster kernel. Block b's slots are [b R k, (b + 1) R k) (R = 8
/// rows): thread s takes slot b R k + s, its bucket (the expert, E for an
/// id outside [0, E)) and its rank among the earlier slots of its warp with
/// that bucket (shuffles); per bucket, the warps' counts become the
/// earlier warps' (in place) and the block's total is published in shared
/// memory. After the cluster barrier each block reads every block's totals
/// of its q = ceil((E + 1) / 256) buckets per thread (DSMEM loads): the
/// earlier blocks' sum and the bucket total, whose exclusive scan over the
/// buckets (a block scan) is the offsets result (written by block 0). Slot
/// s goes to offsets[bucket] + earlier blocks' + earlier warps' count +
/// rank: the same stable counting sort as stableBuckets (moe.dispatch).
void routeDispatchCluster(LoweringBuilder &b, const RouteConfig &cfg,
                          const WarpSelectMode &mode, Value m, Value offsets,
                          Value rev, Value tok, bool allowDependents) {
  Type i32 = b.getI32Type();
  int64_t e = cfg.e, k = cfg.k, nb = cfg.e + 1;
  constexpr int64_t warps = kClusterRowsPerBlock;
  int64_t perThread = (nb + kClusterThreads - 1) / kClusterThreads;
  Value one = b.idx(1);
  // One block per 8 rows, all of them one cluster (at T <= 8 a plain
  // one-block launch: the runtime launches a 1-CTA cluster so).
  Value blocks = b.maxIdx(b.ceilDiv(cfg.t, warps), one);
  SmallVector<MemRefType> wg = {
      workgroupType({warps, nb}, i32), workgroupType({nb}, i32),
      workgroupType({nb}, i32), workgroupType({nb}, i32),
      workgroupType({warps}, i32)};
  launchInClusters(
      b, blocks, /*clusterX=*/blocks, kClusterThreads,
      /*dynamicSharedBytes=*/Value(), wg,
      [&](LoweringBuilder &b, const KernelIds &ids, ArrayRef<Value> shared) {
        Value counts = shared[0], blockTotals = shared[1],
              earlierBlocks = shared[2], offs = shared[3], warpSums = shared[4];
        Value tid = ids.threadX;
        Value rank = ids.blockX;
        Value w = arith::DivUIOp::create(b, tid, b.idx(kWarpSize));
        Value lane = arith::RemUIOp::create(b, tid, b.idx(kWarpSize));
        Value zero = b.idx(0);
        // The first GEMM may be launched now (it waits for this kernel on the
        // device before it reads anything).
        if (allowDependents)
          nvvm::allowDependents(b);
        // Phase 1: warp w routes row R b + w (a warp-uniform guard).
        Value row = b.add(b.mul(rank, b.idx(warps)), w);
        when(b, b.cmpi(CmpI::ult, row, cfg.t), [&](LoweringBuilder &b) {
          routeRowOnWarp(b, cfg, mode, row, lane);
        });
        forEach(b, lane, b.idx(nb), b.idx(kWarpSize),
                [&](LoweringBuilder &b, Value bk) {
                  b.store(b.i32(0), counts, {w, bk});
                });
        // The block's routed indices are visible to it, its counters zero.
        gpu::BarrierOp::create(b);
        // Phase 2: the block's slots, ranked within their warps.
        Value slot = b.add(b.mul(rank, b.idx(warps * k)), tid);
        Value valid = b.andi(b.cmpi(CmpI::ult, tid, b.idx(warps * k)),
                             b.cmpi(CmpI::ult, slot, m));
        Value bucket = b.ifElse(
            valid, {i32},
            [&](LoweringBuilder &b) -> SmallVector<Value> {
              return {dispatchBucket(b, cfg.indices, slot, k, e)};
            },
            [&](LoweringBuilder &b) -> SmallVector<Value> {
              return {b.i32(-1)};
            })[0];
        Value before, total;
        std::tie(before, total) =
            warpRankOf(b, bucket, b.toI32(lane), mode.matchSync);
        Value placed = b.cmpi(CmpI::sge, bucket, b.i32(0));
        Value last = b.cmpi(CmpI::eq, total, b.add(before, b.i32(1)));
        when(b, b.andi(placed, last), [&](LoweringBuilder &b) {
          b.store(total, counts, {w, b.toIndex(bucket)});
        });
        gpu::BarrierOp::create(b);
        // Thread t's buckets q t .. q t + q - 1: the earlier warps' counts in
        // place, the block's total published.
        auto forMyBuckets =
            [&](LoweringBuilder &b,
                function_ref<void(LoweringBuilder &, int64_t, Value)> body) {
              for (int64_t j = 0; j < perThread; ++j) {
                Value bk = b.add(b.mul(tid, b.idx(perThread)), b.idx(j));
                when(b, b.cmpi(CmpI::ult, bk, b.idx(nb)),
                     [&](LoweringBuilder &b) { body(b, j, bk); });
              }
            };
        forMyBuckets(b, [&](LoweringBuilder &b, int64_t, Value bk) {
          b.store(exclusiveColumnScan(b, counts, warps, bk), blockTotals, {bk});
        });
        // Every block's totals are published (release / acquire at cluster
        // scope).
        nvvm::clusterSync(b);
        // Phase 3: per bucket, the earlier blocks' count and the total.
        Value rankI32 = b.toI32(rank);
        Value totalsBase = nvvm::bufferAddress(b, blockTotals);
        SmallVector<Value> bucketTotals;
        Value mySum = b.i32(0);
        for (int64_t j = 0; j < perThread; ++j) {
          Value bk = b.add(b.mul(tid, b.idx(perThread)), b.idx(j));
          Value in = b.cmpi(CmpI::ult, bk, b.idx(nb));
          Value address = arith::AddIOp::create(
              b, totalsBase,
              nvvm::toI64(b, b.mul(b.minIdx(bk, b.idx(nb - 1)), b.idx(4))));
          Value earlier = b.i32(0), sum = b.i32(0);
          for (int64_t r = 0; r < kClusterBlocks; ++r) {
            // Ranks past the cluster read the last one's and count nothing.
            Value inCluster = b.cmpi(CmpI::ult, b.idx(r), blocks);
            Value peer = b.toI32(b.minIdx(b.idx(r), b.sub(blocks, one)));
            Value v = b.select(inCluster,
                               nvvm::loadSharedClusterI32(b, address, peer),
                               b.i32(0));
            sum = b.add(sum, v);
            earlier =
                b.add(earlier, b.select(b.cmpi(CmpI::slt, b.i32(r), rankI32), v,
                                        b.i32(0)));
          }
          sum = b.select(in, sum, b.i32(0));
          when(b, in, [&](LoweringBuilder &b) {
            b.store(earlier, earlierBlocks, {bk});
          });
          bucketTotals.push_back(sum);
          mySum = b.add(mySum, sum);
        }
        // The exclusive scan of the totals over the buckets: the threads'
        // sums by warp scans, then the earlier warps' sums (lane l < 8 holds
        // warp l's; a butterfly adds those below w).
        Value incl = warpInclusiveSum(b, mySum, lane);
        when(b, b.cmpi(CmpI::eq, lane, b.idx(kWarpSize - 1)),
             [&](LoweringBuilder &b) { b.store(incl, warpSums, {w}); });
        gpu::BarrierOp::create(b);
        Value laneWarp = b.minIdx(lane, b.idx(warps - 1));
        Value earlierWarps = b.select(b.cmpi(CmpI::ult, lane, w),
                                      b.load(warpSums, {laneWarp}), b.i32(0));
        Value base = warpAllReduce(b, {earlierWarps},
                                   [](LoweringBuilder &b, ValueRange x,
                                      ValueRange y) -> SmallVector<Value> {
                                     return {b.add(x[0], y[0])};
                                   })[0];
        Value running = b.add(base, b.sub(incl, mySum));
        Value isFirst = b.cmpi(CmpI::eq, rank, zero);
        forMyBuckets(b, [&](LoweringBuilder &b, int64_t j, Value bk) {
          Value start = running;
          for (int64_t i = 0; i < j; ++i)
            start = b.add(start, bucketTotals[i]);
          b.store(start, offs, {bk});
          when(b, isFirst,
               [&](LoweringBuilder &b) { b.store(start, offsets, {bk}); });
        });
        gpu::BarrierOp::create(b);
        // Phase 4: placement.
        when(b, placed, [&](LoweringBuilder &b) {
          Value bk = b.toIndex(bucket);
          Value pos =
              b.add(b.add(b.load(offs, {bk}), b.load(earlierBlocks, {bk})),
                    b.add(b.load(counts, {w, bk}), before));
          Value p = b.toIndex(pos);
          auto [slotRow, j] = rowAndSlot(b, slot, k);
          (void)j;
          b.store(b.toI32(slot), rev, {p});
          b.store(b.toI32(slotRow), tok, {p});
        });
        // No block leaves while a peer may still read its totals.
        nvvm::clusterSync(b);
      });
}

/// The route kernels' view of a moe.route or moe.route_dispatch (weights
/// and indices allocated for T rows).
template <typename OpT> RouteConfig routeConfigOf(LoweringBuilder &b, OpT op) {
  auto weightsType = op.getWeights().getType();
  auto indicesType = op.getIndices().getType();
  RouteConfig cfg;
  cfg.w = weightsType.getElementType();
  cfg.e = op.getLogits().getType().getDimSize(1);
  cfg.k = static_cast<int64_t>(op.getK());
  cfg.nGroup = op.getNGroup();
  cfg.topkGroup = op.getTopkGroup();
  cfg.perGroup = cfg.e / cfg.nGroup;
  cfg.softmax = op.getScoring() == ScoringFn::softmax;
  cfg.top2 = op.getGroupScore() == GroupScore::top2_sum;
  cfg.normalize = op.getNormalize();
  cfg.scaling = op.getScaling().convertToFloat();
  cfg.logits = toBuffer(b, op.getLogits());
  cfg.bias = op.getBias() ? toBuffer(b, op.getBias()) : Value();
  cfg.t = b.memDim(cfg.logits, 0);
  cfg.weights = allocBuffer(b, weightsType, dynRows(weightsType, cfg.t));
  cfg.indices = allocBuffer(b, indicesType, dynRows(indicesType, cfg.t));
  return cfg;
}

struct RouteToGPU : OpRewritePattern<RouteOp> {
  RouteToGPU(MLIRContext *ctx, WarpSelectMode mode)
      : OpRewritePattern(ctx), mode(mode) {}

  LogicalResult matchAndRewrite(RouteOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    RouteConfig cfg = routeConfigOf(b, op);
    if (useWarpPerRow(cfg.e, cfg.nGroup))
      routePerWarp(b, cfg, mode);
    else
      routePerThread(b, cfg);
    rewriter.replaceOp(op,
                       {toTensor(b, cfg.weights), toTensor(b, cfg.indices)});
    return success();
  }

  WarpSelectMode mode;
};

/// moe.route_dispatch as one kernel when the rows are few (option
/// route-dispatch-small): the host picks it for T <= kClusterRows, else the
/// route kernel and moe.dispatch's kernels (what SplitRouteDispatch +
/// RouteToGPU + DispatchToGPU emit). Needs the warp-per-row route, k <=
/// kClusterMaxK and E <= kClusterMaxExperts; otherwise the op is split.
struct RouteDispatchToGPU : OpRewritePattern<RouteDispatchOp> {
  RouteDispatchToGPU(MLIRContext *ctx, WarpSelectMode mode,
                     bool allowDependents)
      : OpRewritePattern(ctx, /*benefit=*/2), mode(mode),
        allowDependents(allowDependents) {}

  LogicalResult matchAndRewrite(RouteDispatchOp op,
                                PatternRewriter &rewriter) const override {
    int64_t e = op.getLogits().getType().getDimSize(1);
    if (!useWarpPerRow(e, op.getNGroup()) || e > kClusterMaxExperts ||
        static_cast<int64_t>(op.getK()) > kClusterMaxK)
      return failure();
    LoweringBuilder b(op.getLoc(), rewriter);
    RouteConfig cfg = routeConfigOf(b, op);
    auto mapType = op.getReverseIndices().getType();
    Value m = b.mul(cfg.t, b.idx(cfg.k));
    Value mI32 = b.toI32(m);
    Value offsets = allocBuffer(b, op.getOffsets().getType(), {});
    Value rev = allocBuffer(b, mapType, dynRows(mapType, m));
    Value tok = allocBuffer(b, mapType, dynRows(mapType, m));
    Value small = b.cmpi(CmpI::ule, cfg.t, b.idx(kClusterRows));
    scf::IfOp::create(
        b, small,
        [&](OpBuilder &nested, Location loc) {
          LoweringBuilder nb(loc, nested);
          routeDispatchCluster(nb, cfg, mode, m, offsets, rev, tok,
                               allowDependents);
          scf::YieldOp::create(nb);
        },
        [&](OpBuilder &nested, Location loc) {
          LoweringBuilder nb(loc, nested);
          routePerWarp(nb, cfg, mode);
          Value ids = cfg.indices;
          emitDispatch(nb, ids, cfg.k, e, m, mI32, offsets, rev, tok,
                       mode.matchSync);
          scf::YieldOp::create(nb);
        });
    rewriter.replaceOp(op, {toTensor(b, cfg.weights), toTensor(b, cfg.indices),
                            toTensor(b, offsets), toTensor(b, rev),
                            toTensor(b, tok)});
    return success();
  }

  WarpSelectMode mode;
  bool allowDependents;
};

} // namespace

void mlir::moe::populateRoutingToGPUPatterns(RewritePatternSet &patterns,
                                             StringRef chip, bool i32Keys,
                                             bool smallRouteDispatch,
                                             bool allowDependents) {
  // redux.sync: sm_80 and later ("sm_90a" -> 90); match.sync: sm_70.
  WarpSelectMode mode;
  mode.i32Keys = i32Keys;
  mode.redux = chipAtLeast(chip, 80);
  mode.matchSync = chipAtLeast(chip, 70);
  patterns.add<TopKToGPU, RouteToGPU>(patterns.getContext(), mode);
  // The one-kernel form runs in a thread-block cluster (sm_90 and later);
  // older chips keep the split form (route, then dispatch).
  if (smallRouteDispatch && chipAtLeast(chip, 90))
    patterns.add<RouteDispatchToGPU>(patterns.getContext(), mode,
                                     allowDependents);
}
