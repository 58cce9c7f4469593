//===- Route.cpp - moe.route as GPU kernels -------------------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
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
//===----------------------------------------------------------------------===//

#include "Routing.h"

#include "Utils/Selection.h"

#include <limits>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;
using namespace mlir::moe::gpu_lowering::routing;

using CmpF = arith::CmpFPredicate;
using CmpI = arith::CmpIPredicate;

void routing::routePerThread(LoweringBuilder &b, const RouteConfig &cfg) {
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

//===----------------------------------------------------------------------===//
// One row on a warp
//===----------------------------------------------------------------------===//

namespace {

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

} // namespace

void routing::routeRowOnWarp(LoweringBuilder &b, const RouteConfig &cfg,
                             const WarpSelectMode &mode, Value rowIdx,
                             Value lane, Value rowValid,
                             OrderedSumFn orderedSum) {
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
    Value sk = mode.key(b, key);
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

namespace {

/// Rows (= warps) per block of the softmax route kernel.
constexpr int64_t kRouteBlockRows = 16;
/// Largest entries per lane (E <= 128) for which the softmax row sums are
/// added through shared memory: at E = 256 (DeepSeek-V3) the one lane's
/// 256 dependent adds held the block's other warps longer than the 32
/// shuffle steps took (route kernel 39.8 -> 45.5 us at T = 16384, NOTES
/// v61).
constexpr int64_t kSharedSumRegs = 4;

} // namespace

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
void routing::routePerWarp(LoweringBuilder &b, const RouteConfig &cfg,
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
