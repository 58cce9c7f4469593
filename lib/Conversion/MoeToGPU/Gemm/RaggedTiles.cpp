//===- RaggedTiles.cpp - row tiles of the ragged expert groups ------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Expert e owns GEMM rows [offsets[e], offsets[e+1]) (clamped into [0, m];
// a decreasing pair owns nothing), cut into ceil(rows / tileM) row tiles;
// tiles are numbered expert by expert. Kernels find a tile's expert on the
// device, so any offsets, even inconsistent ones, are covered without a
// host-side tile list.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using CmpI = arith::CmpIPredicate;

Value RaggedTiles::offsetAt(LoweringBuilder &b, Value expert) const {
  return b.clamp(b.toIndex(b.load(offsets, {expert})), b.idx(0), m);
}

Value RaggedTiles::tilesOf(LoweringBuilder &b, Value expert) const {
  Value lo = offsetAt(b, expert);
  Value hi = offsetAt(b, b.add(expert, b.idx(1)));
  return tilesIn(b, lo, hi);
}

Value RaggedTiles::rowsIn(LoweringBuilder &b, Value lo, Value hi) const {
  return b.sub(b.maxIdx(hi, lo), lo);
}

Value RaggedTiles::tilesOfRows(LoweringBuilder &b, Value rows) const {
  return b.ceilDiv(rows, tileM);
}

Value RaggedTiles::tilesIn(LoweringBuilder &b, Value lo, Value hi) const {
  return tilesOfRows(b, rowsIn(b, lo, hi));
}

Value RaggedTiles::total(LoweringBuilder &b) const {
  return b.forLoop(
      b.idx(0), b.idx(numExperts), {b.idx(0)},
      [&](LoweringBuilder &b, Value e, ValueRange acc) -> SmallVector<Value> {
        return {b.add(acc[0], tilesOf(b, e))};
      })[0];
}

Value RaggedTiles::upperBound(LoweringBuilder &b) const {
  return b.add(b.ceilDiv(m, tileM), b.idx(numExperts));
}

/// while (expert < E - 1 && unit >= limit(before, size(expert)))
///   before = next(before, size(expert)), ++expert;
/// with size = measure(lo, hi) of the expert's rows [lo, hi) (its tiles or
/// its rows), in rounds of `unroll` experts: a round loads the sizes of
/// experts
/// expert .. expert + unroll - 1 at once (independent loads, clamped in bounds)
/// and takes the steps in registers. One expert per round made every step a
/// dependent L2 load: a block whose first item lay in expert 127 waited
/// ~40 us before its first copy (bench/NOTES.md v27, T = 1).
static std::pair<Value, Value>
advanceWhile(const RaggedTiles &ragged, LoweringBuilder &b, Value unit,
             Value expert, Value before, int64_t unroll,
             function_ref<Value(LoweringBuilder &, Value, Value)> measure,
             function_ref<Value(LoweringBuilder &, Value, Value)> limit,
             function_ref<Value(LoweringBuilder &, Value, Value)> next) {
  Type idxType = b.getIndexType();
  auto loop = scf::WhileOp::create(
      b, TypeRange{idxType, idxType}, ValueRange{expert, before},
      [&](OpBuilder &nested, Location loc, ValueRange args) {
        LoweringBuilder nb(loc, nested);
        Value last = nb.idx(ragged.numExperts - 1);
        SmallVector<Value> sizes;
        for (int64_t j = 0; j < unroll; ++j) {
          Value e = nb.minIdx(nb.add(args[0], nb.idx(j)), last);
          // (lo, then hi: the order the IR is built in.)
          Value lo = ragged.offsetAt(nb, e);
          Value hi = ragged.offsetAt(nb, nb.add(e, nb.idx(1)));
          sizes.push_back(measure(nb, lo, hi));
        }
        Value alive = arith::ConstantIntOp::create(nb, nb.getI1Type(), 1);
        Value e = args[0], at = args[1];
        for (int64_t j = 0; j < unroll; ++j) {
          Value ej = nb.add(args[0], nb.idx(j));
          Value step =
              nb.andi(nb.andi(alive, nb.cmpi(CmpI::ult, ej, last)),
                      nb.cmpi(CmpI::uge, unit, limit(nb, at, sizes[j])));
          at = nb.select(step, next(nb, at, sizes[j]), at);
          e = nb.select(step, nb.add(ej, nb.idx(1)), e);
          alive = step;
        }
        // Another round only when all of this one's steps were taken.
        scf::ConditionOp::create(nb, alive, ValueRange{e, at});
      },
      [&](OpBuilder &nested, Location loc, ValueRange args) {
        LoweringBuilder nb(loc, nested);
        scf::YieldOp::create(nb, args);
      });
  return {loop.getResult(0), loop.getResult(1)};
}

std::pair<Value, Value> RaggedTiles::advance(LoweringBuilder &b, Value unit,
                                             Value expert, Value before,
                                             int64_t scale,
                                             int64_t unroll) const {
  return advanceWhile(
      *this, b, unit, expert, before, unroll,
      [&](LoweringBuilder &b, Value lo, Value hi) {
        return tilesIn(b, lo, hi);
      },
      [&](LoweringBuilder &b, Value before, Value tiles) {
        return b.mul(b.add(before, tiles), b.idx(scale));
      },
      [&](LoweringBuilder &b, Value before, Value tiles) {
        return b.add(before, tiles);
      });
}

std::pair<Value, Value>
RaggedTiles::advanceUnits(LoweringBuilder &b, Value unit, Value expert,
                          Value before,
                          function_ref<Value(LoweringBuilder &, Value)> unitsOf,
                          int64_t unroll) const {
  auto after = [&](LoweringBuilder &b, Value before, Value rows) {
    return b.add(before, unitsOf(b, rows));
  };
  return advanceWhile(
      *this, b, unit, expert, before, unroll,
      [&](LoweringBuilder &b, Value lo, Value hi) { return rowsIn(b, lo, hi); },
      after, after);
}

/// Experts per lane up to which locate keeps the lane's offsets and units
/// in registers (E <= 256); above, they would not fit the 40-register
/// producer of the wgmma kernel (E = 2048: 64 per lane, ~1 KB of spills).
static constexpr int64_t kLocateUnrolledChunk = 8;

/// locate for many experts per lane: the same sums in two rolled loops
/// over the lane's experts, the offsets loaded again in the second (L1 /
/// L2 hits) instead of kept.
RaggedTiles::Start RaggedTiles::locateStreamed(
    LoweringBuilder &b, Value lane, Value threshold,
    function_ref<Value(LoweringBuilder &, Value)> unitsOf,
    int64_t chunk) const {
  Value numE = b.idx(numExperts);
  Value first = b.mul(lane, b.idx(chunk));
  // Units of expert first + j given its start offset `lo`: (units, end).
  auto unitsAt = [&](LoweringBuilder &b, Value j,
                     Value lo) -> std::pair<Value, Value> {
    Value e = b.add(first, j);
    Value hi = offsetAt(b, b.minIdx(b.add(e, b.idx(1)), numE));
    Value valid = b.cmpi(CmpI::ult, e, numE);
    return {b.select(valid, unitsOf(b, rowsIn(b, lo, hi)), b.idx(0)), hi};
  };
  Value lo0 = offsetAt(b, b.minIdx(first, numE));
  Value sum = b.forLoop(
      b.idx(0), b.idx(chunk), {lo0, b.idx(0)},
      [&](LoweringBuilder &b, Value j, ValueRange acc) -> SmallVector<Value> {
        auto [units, hi] = unitsAt(b, j, acc[0]);
        return {hi, b.add(acc[1], units)};
      })[1];
  Value sum32 = b.toI32(sum);
  Value inclusive = warpInclusiveSum(b, sum32, lane);
  Value total = b.toIndex(
      warpShuffle(b, inclusive, kWarpSize - 1, gpu::ShuffleMode::IDX));
  Value at0 = b.toIndex(b.sub(inclusive, sum32));
  SmallVector<Value> r = b.forLoop(
      b.idx(0), b.idx(chunk), {lo0, at0, b.idx(0), b.idx(0)},
      [&](LoweringBuilder &b, Value j, ValueRange acc) -> SmallVector<Value> {
        auto [units, hi] = unitsAt(b, j, acc[0]);
        Value at = b.add(acc[1], units);
        Value counted = b.andi(b.cmpi(CmpI::ule, at, threshold),
                               b.cmpi(CmpI::ult, b.add(first, j), numE));
        return {hi, at, b.add(acc[2], b.select(counted, b.idx(1), b.idx(0))),
                b.select(counted, at, acc[3])};
      });
  SmallVector<Value> reduced = warpAllReduce(
      b, {b.toI32(r[2]), b.toI32(r[3])},
      [](LoweringBuilder &b, ValueRange x, ValueRange y) -> SmallVector<Value> {
        return {b.add(x[0], y[0]), arith::MaxUIOp::create(b, x[1], y[1])};
      });
  Value expert = b.minIdx(b.toIndex(reduced[0]), b.idx(numExperts - 1));
  return {total, expert, b.toIndex(reduced[1])};
}

RaggedTiles::Start RaggedTiles::locate(
    LoweringBuilder &b, Value lane, Value threshold,
    function_ref<Value(LoweringBuilder &, Value)> unitsOf) const {
  int64_t chunk = (numExperts + kWarpSize - 1) / kWarpSize;
  Value numE = b.idx(numExperts);
  Value first = b.mul(lane, b.idx(chunk));
  if (chunk > kLocateUnrolledChunk)
    return locateStreamed(b, lane, threshold, unitsOf, chunk);
  // The offsets of experts first .. first + chunk - 1 and the end of the
  // last (clamped to offsets[E]): independent loads.
  SmallVector<Value> offs;
  for (int64_t j = 0; j <= chunk; ++j)
    offs.push_back(offsetAt(b, b.minIdx(b.add(first, b.idx(j)), numE)));
  SmallVector<Value> units;
  Value sum = b.idx(0);
  for (int64_t j = 0; j < chunk; ++j) {
    Value rows = rowsIn(b, offs[j], offs[j + 1]);
    Value valid = b.cmpi(CmpI::ult, b.add(first, b.idx(j)), numE);
    units.push_back(b.select(valid, unitsOf(b, rows), b.idx(0)));
    sum = b.add(sum, units.back());
  }
  Value sum32 = b.toI32(sum);
  Value inclusive = warpInclusiveSum(b, sum32, lane);
  Value total = b.toIndex(
      warpShuffle(b, inclusive, kWarpSize - 1, gpu::ShuffleMode::IDX));
  // The experts counted form a prefix (the unit prefix does not decrease):
  // the count is the lanes' sum, the units before the first uncounted
  // expert the lanes' largest counted end.
  Value at = b.toIndex(b.sub(inclusive, sum32));
  Value count = b.idx(0), end = b.idx(0);
  for (int64_t j = 0; j < chunk; ++j) {
    at = b.add(at, units[j]);
    Value counted = b.andi(b.cmpi(CmpI::ule, at, threshold),
                           b.cmpi(CmpI::ult, b.add(first, b.idx(j)), numE));
    count = b.add(count, b.select(counted, b.idx(1), b.idx(0)));
    end = b.select(counted, at, end);
  }
  SmallVector<Value> reduced = warpAllReduce(
      b, {b.toI32(count), b.toI32(end)},
      [](LoweringBuilder &b, ValueRange x, ValueRange y) -> SmallVector<Value> {
        return {b.add(x[0], y[0]), arith::MaxUIOp::create(b, x[1], y[1])};
      });
  Value expert = b.minIdx(b.toIndex(reduced[0]), b.idx(numExperts - 1));
  return {total, expert, b.toIndex(reduced[1])};
}
