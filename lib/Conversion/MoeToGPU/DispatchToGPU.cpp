//===- DispatchToGPU.cpp - dispatch metadata as GPU kernels ---------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// - moe.cumsum: zero fill, a per-row histogram kernel (row b only touches
//   the entries e*T + b, so no atomics), then a one-block chunked inclusive
//   scan over the E*T entries.
// - moe.get_indices: -1 fill, one thread per row placing its dispatched
//   slots from the cumsum, then a one-block ordered pass placing the
//   undispatched slots after all dispatched rows in (b, j) order.
// - moe.get_indptr: one thread per expert.
// - moe.dispatch: a stable counting sort of the (b, j) slots by expert
//   in three multi-block kernels (stableBuckets, E + 1 <= kMaxSortBuckets):
//   one warp per chunk of slots ranking them (match.any.sync from sm_70,
//   else shuffles) and counting its experts, one block per expert scanning
//   its chunk counts, then one thread per slot placing it (each block
//   scans the expert totals into the offsets; block 0 writes them to the
//   offsets result).
//   Bucket E collects the out-of-range ids, which land after all dispatched
//   rows exactly as moe.get_indices defines. O(T*k + E * chunks) work, no E*T
//   intermediate. Larger E: the one-block counting sort (orderedBuckets).
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "Patterns.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using CmpI = arith::CmpIPredicate;

Value gpu_lowering::dispatchBucket(LoweringBuilder &b, Value ids, Value slot,
                                   int64_t k, int64_t e) {
  auto [row, j] = rowAndSlot(b, slot, k);
  Value expert = b.load(ids, {row, j});
  return b.select(b.inRange(expert, b.i32(0), b.i32(e)), expert, b.i32(e));
}

void gpu_lowering::emitDispatch(LoweringBuilder &b, Value ids, int64_t k,
                                int64_t e, Value m, Value mI32, Value offsets,
                                Value rev, Value tok, bool matchSync) {
  auto bucketOf = [&](LoweringBuilder &b, Value slot) -> Value {
    return dispatchBucket(b, ids, slot, k, e);
  };
  auto place = [&](LoweringBuilder &b, Value slot, Value pos) {
    auto [row, j] = rowAndSlot(b, slot, k);
    (void)j;
    when(b, b.inRange(pos, b.i32(0), mI32), [&](LoweringBuilder &b) {
      Value p = b.toIndex(pos);
      b.store(b.toI32(slot), rev, {p});
      b.store(b.toI32(row), tok, {p});
    });
  };
  if (e + 1 <= kMaxSortBuckets) {
    // The exclusive offsets of the E + 1 buckets are exactly the offsets
    // result: offsets[E] = #dispatched is where bucket E starts.
    stableBuckets(
        b, m, /*numBuckets=*/e + 1, bucketOf, offsets,
        [&](LoweringBuilder &b, Value slot, Value, Value pos) {
          place(b, slot, pos);
        },
        matchSync);
  } else {
    orderedBuckets(
        b, m, /*numBuckets=*/e + 1, bucketOf,
        [&](LoweringBuilder &b, Value totals) {
          // offsets[0] = 0, offsets[i + 1] = offsets[i] + totals[i]; the
          // out-of-range bucket E starts at offsets[E] = #dispatched.
          b.store(b.i32(0), offsets, {b.idx(0)});
          b.forLoop(b.idx(0), b.idx(e), {b.i32(0)},
                    [&](LoweringBuilder &b, Value i,
                        ValueRange acc) -> SmallVector<Value> {
                      Value next = b.add(acc[0], b.load(totals, {i}));
                      b.store(next, offsets, {b.add(i, b.idx(1))});
                      return {next};
                    });
        },
        [&](LoweringBuilder &b, Value slot, Value bucket, Value rank) {
          place(b, slot, b.add(b.load(offsets, {b.toIndex(bucket)}), rank));
        });
  }
}

namespace {

struct CumsumToGPU : OpRewritePattern<CumsumOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CumsumOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = op.getResult().getType();
    int64_t e = static_cast<int64_t>(op.getNumExperts());
    Value ids = toBuffer(b, op.getIndices());
    Value t = b.memDim(ids, 0);
    Value len = b.mul(b.idx(e), t);
    Value counts = allocBuffer(b, resultType, dynRows(resultType, len));
    fillBuffer(b, counts, b.i32(0));
    Value tI32 = b.toI32(t);
    launchForEach(b, t, [&](LoweringBuilder &b, Value row) {
      forEachExpertSlotOfRow(
          b, ids, row, e, [&](LoweringBuilder &b, Value j, Value expert) {
            // e * T + row in index arithmetic (E*T < 2^31 is verified for
            // static T only).
            Value pos = b.add(b.mul(b.toIndex(expert), b.toIndex(tI32)), row);
            b.store(b.add(b.load(counts, {pos}), b.i32(1)), counts, {pos});
          });
    });
    inclusiveScan(b, counts, len);
    rewriter.replaceOp(op, toTensor(b, counts));
    return success();
  }
};

struct GetIndicesToGPU : OpRewritePattern<GetIndicesOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GetIndicesOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = op.getReverseIndices().getType();
    int64_t k = op.getIndices().getType().getDimSize(1);
    Value cumsum = toBuffer(b, op.getCumsum());
    Value ids = toBuffer(b, op.getIndices());
    Value t = b.memDim(ids, 0), len = b.memDim(cumsum, 0);
    Value m = b.mul(t, b.idx(k));
    Value rev = allocBuffer(b, resultType, dynRows(resultType, m));
    Value tok = allocBuffer(b, resultType, dynRows(resultType, m));
    fillBuffer(b, rev, b.i32(-1));
    fillBuffer(b, tok, b.i32(-1));
    Value tI32 = b.toI32(t), lenI32 = b.toI32(len), mI32 = b.toI32(m);
    Value kI32 = b.i32(k);
    // E = len / T (0 when T = 0).
    Value numExperts =
        b.select(b.cmpi(CmpI::sgt, tI32, b.i32(0)),
                 arith::DivSIOp::create(
                     b, lenI32, arith::MaxSIOp::create(b, tI32, b.i32(1))),
                 b.i32(0));
    auto write = [&](LoweringBuilder &b, Value pos, Value row, Value j) {
      when(b, b.inRange(pos, b.i32(0), mI32), [&](LoweringBuilder &b) {
        Value p = b.toIndex(pos);
        Value rowI32 = b.toI32(row);
        b.store(b.add(b.mul(rowI32, kI32), b.toI32(j)), rev, {p});
        b.store(rowI32, tok, {p});
      });
    };

    // Dispatched slots: position cumsum[e*T + b] - 1 minus the later
    // duplicates of e in the row.
    launchForEach(b, t, [&](LoweringBuilder &b, Value row) {
      forEachSlotOfRow(
          b, ids, row, [&](LoweringBuilder &b, Value j, Value expert) {
            when(b, b.inRange(expert, b.i32(0), numExperts),
                 [&](LoweringBuilder &b) {
                   Value later = b.forLoop(
                       b.add(j, b.idx(1)), b.idx(k), {b.i32(0)},
                       [&](LoweringBuilder &b, Value jj,
                           ValueRange c) -> SmallVector<Value> {
                         Value same =
                             b.cmpi(CmpI::eq, b.load(ids, {row, jj}), expert);
                         return {b.add(c[0], arith::ExtUIOp::create(
                                                 b, b.getI32Type(), same))};
                       })[0];
                   Value at = b.add(b.mul(expert, tI32), b.toI32(row));
                   Value end = b.ifElse(
                       b.inRange(at, b.i32(0), lenI32), {b.getI32Type()},
                       [&](LoweringBuilder &b) -> SmallVector<Value> {
                         return {b.load(cumsum, {b.toIndex(at)})};
                       },
                       [&](LoweringBuilder &b) -> SmallVector<Value> {
                         return {b.i32(0)};
                       })[0];
                   write(b, b.sub(b.sub(end, b.i32(1)), later), row, j);
                 });
          });
    });

    // Undispatched slots, in (b, j) order after all dispatched rows.
    orderedBuckets(
        b, m, /*numBuckets=*/1,
        [&](LoweringBuilder &b, Value slot) -> Value {
          auto [row, j] = rowAndSlot(b, slot, k);
          Value expert = b.load(ids, {row, j});
          return b.select(b.inRange(expert, b.i32(0), numExperts), b.i32(-1),
                          b.i32(0));
        },
        [&](LoweringBuilder &, Value) {},
        [&](LoweringBuilder &b, Value slot, Value, Value rank) {
          auto [row, j] = rowAndSlot(b, slot, k);
          Value total = b.ifElse(
              b.cmpi(CmpI::sgt, lenI32, b.i32(0)), {b.getI32Type()},
              [&](LoweringBuilder &b) -> SmallVector<Value> {
                return {b.load(cumsum, {b.sub(len, b.idx(1))})};
              },
              [&](LoweringBuilder &b) -> SmallVector<Value> {
                return {b.i32(0)};
              })[0];
          write(b, b.add(total, rank), row, j);
        });
    rewriter.replaceOp(op, {toTensor(b, rev), toTensor(b, tok)});
    return success();
  }
};

struct GetIndptrToGPU : OpRewritePattern<GetIndptrOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GetIndptrOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = op.getResult().getType();
    Type r = resultType.getElementType();
    int64_t e = static_cast<int64_t>(op.getNumExperts());
    int64_t shift = op.getInclusive() ? 0 : 1;
    Value cumsum = toBuffer(b, op.getCumsum());
    Value len = b.memDim(cumsum, 0);
    Value t = arith::DivUIOp::create(b, len, b.idx(e));
    Value result = allocBuffer(b, resultType, {});
    launchForEach(b, b.idx(e + shift), [&](LoweringBuilder &b, Value i) {
      // Entry i holds the end of expert i - shift (entry 0 of the
      // exclusive form is 0).
      Value expert = b.sub(i, b.idx(shift));
      Value valid = b.andi(b.cmpi(CmpI::uge, i, b.idx(shift)),
                           b.cmpi(CmpI::ugt, t, b.idx(0)));
      Value end = b.ifElse(
          valid, {b.getI32Type()},
          [&](LoweringBuilder &b) -> SmallVector<Value> {
            Value at = b.sub(b.mul(b.add(expert, b.idx(1)), t), b.idx(1));
            return {b.load(cumsum, {at})};
          },
          [&](LoweringBuilder &b) -> SmallVector<Value> {
            return {b.i32(0)};
          })[0];
      if (r != end.getType())
        end = arith::ExtSIOp::create(b, r, end);
      b.store(end, result, {i});
    });
    rewriter.replaceOp(op, toTensor(b, result));
    return success();
  }
};

struct DispatchToGPU : OpRewritePattern<DispatchOp> {
  DispatchToGPU(MLIRContext *ctx, bool matchSync)
      : OpRewritePattern(ctx), matchSync(matchSync) {}

  LogicalResult matchAndRewrite(DispatchOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto mapType = op.getReverseIndices().getType();
    int64_t e = static_cast<int64_t>(op.getNumExperts());
    int64_t k = op.getIndices().getType().getDimSize(1);
    Value ids = toBuffer(b, op.getIndices());
    Value t = b.memDim(ids, 0);
    Value m = b.mul(t, b.idx(k));
    Value mI32 = b.toI32(m);
    Value offsets = allocBuffer(b, op.getOffsets().getType(), {});
    Value rev = allocBuffer(b, mapType, dynRows(mapType, m));
    Value tok = allocBuffer(b, mapType, dynRows(mapType, m));
    emitDispatch(b, ids, k, e, m, mI32, offsets, rev, tok, matchSync);
    rewriter.replaceOp(
        op, {toTensor(b, offsets), toTensor(b, rev), toTensor(b, tok)});
    return success();
  }

  bool matchSync;
};

} // namespace

void mlir::moe::populateDispatchToGPUPatterns(RewritePatternSet &patterns,
                                              StringRef chip) {
  patterns.add<CumsumToGPU, GetIndicesToGPU, GetIndptrToGPU>(
      patterns.getContext());
  // match.any.sync: sm_70 and later.
  patterns.add<DispatchToGPU>(patterns.getContext(), chipAtLeast(chip, 70));
}
