//===- DispatchToLinalg.cpp - lower the dispatch-metadata ops -------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// moe.cumsum, moe.get_indices and moe.get_indptr as sequential scf loops on
// tensors. These are the reference semantics (the ops' descriptions) including
// the run-time rules: ids outside [0, E) are not counted, duplicated ids in a
// row take consecutive positions in slot order, undispatched slots go after
// all dispatched rows in (b, j) order. Every read and write is bounds-guarded
// so an inconsistent `cumsum` operand can never cause an out-of-bounds
// access; outputs start filled (-1 for index maps, 0 for offsets) so nothing
// is ever left uninitialised.
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"
#include "Utils/LoweringBuilder.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

using namespace mlir;
using namespace mlir::moe;

using CmpI = arith::CmpIPredicate;

namespace {

/// moe.cumsum => histogram of (expert, token) pairs in expert-major order,
/// then an inclusive running sum over it, in place.
struct LowerCumsum : OpRewritePattern<CumsumOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CumsumOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value ids = op.getIndices();
    auto resultType = op.getResult().getType();
    int64_t e = op.getNumExperts();
    Value t = b.dim(ids, 0);
    Value len = b.mul(b.idx(e), t);
    SmallVector<Value> dyn = dynRows(resultType, len);
    Value counts = b.filled(resultType, dyn, b.i32(0));
    Value tI32 = b.toI32(t);
    counts = b.forEachExpertSlot(
        ids, e, {counts},
        [&](LoweringBuilder &b, Value row, Value j, Value expert,
            ValueRange acc) -> SmallVector<Value> {
          Value pos = b.toIndex(b.add(b.mul(expert, tI32), b.toI32(row)));
          Value c = b.add(b.extract(acc[0], {pos}), b.i32(1));
          return {b.insert(c, acc[0], {pos})};
        })[0];
    Value result = b.forLoop(
        b.idx(0), len, {counts, b.i32(0)},
        [&](LoweringBuilder &b, Value p, ValueRange acc) -> SmallVector<Value> {
          Value running = b.add(acc[1], b.extract(acc[0], {p}));
          return {b.insert(running, acc[0], {p}), running};
        })[0];
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// moe.get_indices => one pass over (b, j): dispatched slots go to
/// cumsum[e*T + b] - 1 (minus the later duplicates of e in the row),
/// undispatched ones to the next free place after all dispatched rows.
struct LowerGetIndices : OpRewritePattern<GetIndicesOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GetIndicesOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value cumsum = op.getCumsum(), ids = op.getIndices();
    auto resultType = op.getReverseIndices().getType();
    int64_t k = op.getIndices().getType().getDimSize(1);
    Value t = b.dim(ids, 0), len = b.dim(cumsum, 0);
    Value m = b.mul(t, b.idx(k));
    SmallVector<Value> dyn = dynRows(resultType, m);
    Value rev = b.filled(resultType, dyn, b.i32(-1));
    Value tok = b.filled(resultType, dyn, b.i32(-1));
    Value tI32 = b.toI32(t), lenI32 = b.toI32(len), kI32 = b.i32(k);
    Value mI32 = b.toI32(m);
    // E = len / T (0 when T = 0).
    Value tPos = arith::MaxSIOp::create(b, tI32, b.i32(1));
    Value numExperts =
        b.select(b.cmpi(CmpI::sgt, tI32, b.i32(0)),
                 arith::DivSIOp::create(b, lenI32, tPos), b.i32(0));
    // Number of dispatched slots: the last cumsum entry.
    Value total = b.ifElse(
        b.cmpi(CmpI::sgt, lenI32, b.i32(0)), {b.getI32Type()},
        [&](LoweringBuilder &b) -> SmallVector<Value> {
          return {b.extract(cumsum, {b.sub(len, b.idx(1))})};
        },
        [&](LoweringBuilder &b) -> SmallVector<Value> {
          return {b.i32(0)};
        })[0];

    SmallVector<Value> out = b.forEachSlot(
        ids, {rev, tok, b.i32(0)},
        [&](LoweringBuilder &b, Value row, Value j, Value expert,
            ValueRange acc) -> SmallVector<Value> {
          Value rowI32 = b.toI32(row);
          Value jI32 = b.toI32(j);
          Value valid = b.inRange(expert, b.i32(0), numExperts);
          // Later slots of this row naming the same expert: the
          // duplicates take consecutive places ending at cumsum - 1.
          Value later = b.forLoop(
              b.idx(0), b.idx(k), {b.i32(0)},
              [&](LoweringBuilder &b, Value jj,
                  ValueRange c) -> SmallVector<Value> {
                Value same =
                    b.cmpi(CmpI::eq, b.extract(ids, {row, jj}), expert);
                Value after =
                    b.andi(same, b.cmpi(CmpI::sgt, b.toI32(jj), jI32));
                return {b.add(
                    c[0], arith::ExtUIOp::create(b, b.getI32Type(), after))};
              })[0];
          SmallVector<Value> placed = b.ifElse(
              valid, {b.getI32Type(), b.getI32Type()},
              [&](LoweringBuilder &b) -> SmallVector<Value> {
                Value at = b.add(b.mul(expert, tI32), rowI32);
                Value inCumsum = b.inRange(at, b.i32(0), lenI32);
                Value end = b.ifElse(
                    inCumsum, {b.getI32Type()},
                    [&](LoweringBuilder &b) -> SmallVector<Value> {
                      return {b.extract(cumsum, {b.toIndex(at)})};
                    },
                    [&](LoweringBuilder &b) -> SmallVector<Value> {
                      return {b.i32(0)};
                    })[0];
                Value pos = b.sub(b.sub(end, b.i32(1)), later);
                return {pos, acc[2]};
              },
              [&](LoweringBuilder &b) -> SmallVector<Value> {
                return {b.add(total, acc[2]), b.add(acc[2], b.i32(1))};
              });
          Value pos = placed[0];
          SmallVector<Value> written =
              b.ifThen(b.inRange(pos, b.i32(0), mI32), acc.take_front(2),
                       [&](LoweringBuilder &b) -> SmallVector<Value> {
                         Value p = b.toIndex(pos);
                         Value slot = b.add(b.mul(rowI32, kI32), jI32);
                         return {b.insert(slot, acc[0], {p}),
                                 b.insert(rowI32, acc[1], {p})};
                       });
          return {written[0], written[1], placed[1]};
        });
    rewriter.replaceOp(op, {out[0], out[1]});
    return success();
  }
};

/// moe.get_indptr => end_e = cumsum[(e+1)*T - 1] (0 when T = 0), with a
/// leading 0 when exclusive.
struct LowerGetIndptr : OpRewritePattern<GetIndptrOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GetIndptrOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value cumsum = op.getCumsum();
    auto resultType = op.getResult().getType();
    Type r = resultType.getElementType();
    int64_t e = op.getNumExperts();
    int64_t shift = op.getInclusive() ? 0 : 1;
    Value len = b.dim(cumsum, 0);
    Value t = arith::DivUIOp::create(b, len, b.idx(e));
    Value result = b.filled(resultType, {}, b.scalar(r, 0));
    Value hasTokens = b.cmpi(CmpI::sgt, t, b.idx(0));
    result = b.forLoop(
        b.idx(0), b.idx(e), {result},
        [&](LoweringBuilder &b, Value expert,
            ValueRange acc) -> SmallVector<Value> {
          Value end = b.ifElse(
              hasTokens, {b.getI32Type()},
              [&](LoweringBuilder &b) -> SmallVector<Value> {
                Value at = b.sub(b.mul(b.add(expert, b.idx(1)), t), b.idx(1));
                return {b.extract(cumsum, {at})};
              },
              [&](LoweringBuilder &b) -> SmallVector<Value> {
                return {b.i32(0)};
              })[0];
          if (r != end.getType())
            end = arith::ExtSIOp::create(b, r, end);
          return {b.insert(end, acc[0], {b.add(expert, b.idx(shift))})};
        })[0];
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// moe.dispatch => a counting sort: histogram of in-range ids into
/// offsets[e + 1], exclusive prefix sum, then one ordered pass over (b, j)
/// placing each slot at its expert's cursor (or after all dispatched rows).
struct LowerDispatch : OpRewritePattern<DispatchOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DispatchOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value ids = op.getIndices();
    auto mapType = op.getReverseIndices().getType();
    int64_t e = op.getNumExperts();
    int64_t k = op.getIndices().getType().getDimSize(1);
    Value t = b.dim(ids, 0);
    Value m = b.mul(t, b.idx(k));
    Value mI32 = b.toI32(m), kI32 = b.i32(k);
    SmallVector<Value> dyn = dynRows(mapType, m);

    // Histogram into offsets[e + 1], then the running sum.
    Value offsets = b.filled(op.getOffsets().getType(), {}, b.i32(0));
    offsets = b.forEachExpertSlot(
        ids, e, {offsets},
        [&](LoweringBuilder &b, Value row, Value j, Value expert,
            ValueRange acc) -> SmallVector<Value> {
          Value at = b.add(b.toIndex(expert), b.idx(1));
          Value c = b.add(b.extract(acc[0], {at}), b.i32(1));
          return {b.insert(c, acc[0], {at})};
        })[0];
    offsets = b.forLoop(
        b.idx(1), b.idx(e + 1), {offsets},
        [&](LoweringBuilder &b, Value i, ValueRange acc) -> SmallVector<Value> {
          Value sum = b.add(b.extract(acc[0], {b.sub(i, b.idx(1))}),
                            b.extract(acc[0], {i}));
          return {b.insert(sum, acc[0], {i})};
        })[0];
    Value total = b.extract(offsets, {b.idx(e)});

    // Ordered placement; `cursor` starts at the exclusive offsets.
    auto cursorType = RankedTensorType::get({e}, b.getI32Type());
    Value cursor = tensor::ExtractSliceOp::create(
        b, cursorType, offsets, ArrayRef<OpFoldResult>{b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(e)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
    Value rev = b.filled(mapType, dyn, b.i32(-1));
    Value tok = b.filled(mapType, dyn, b.i32(-1));
    SmallVector<Value> out = b.forEachSlot(
        ids, {rev, tok, cursor, b.i32(0)},
        [&](LoweringBuilder &b, Value row, Value j, Value expert,
            ValueRange acc) -> SmallVector<Value> {
          Value rowI32 = b.toI32(row);
          SmallVector<Value> placed = b.ifElse(
              b.inRange(expert, b.i32(0), b.i32(e)),
              {b.getI32Type(), cursorType, b.getI32Type()},
              [&](LoweringBuilder &b) -> SmallVector<Value> {
                Value at = b.toIndex(expert);
                Value pos = b.extract(acc[2], {at});
                Value next = b.insert(b.add(pos, b.i32(1)), acc[2], {at});
                return {pos, next, acc[3]};
              },
              [&](LoweringBuilder &b) -> SmallVector<Value> {
                return {b.add(total, acc[3]), acc[2], b.add(acc[3], b.i32(1))};
              });
          Value pos = placed[0];
          SmallVector<Value> written =
              b.ifThen(b.inRange(pos, b.i32(0), mI32), acc.take_front(2),
                       [&](LoweringBuilder &b) -> SmallVector<Value> {
                         Value p = b.toIndex(pos);
                         Value slot = b.add(b.mul(rowI32, kI32), b.toI32(j));
                         return {b.insert(slot, acc[0], {p}),
                                 b.insert(rowI32, acc[1], {p})};
                       });
          return {written[0], written[1], placed[1], placed[2]};
        });
    rewriter.replaceOp(op, {offsets, out[0], out[1]});
    return success();
  }
};

} // namespace

void mlir::moe::populateDispatchLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerCumsum, LowerGetIndices, LowerGetIndptr, LowerDispatch>(
      patterns.getContext());
}
