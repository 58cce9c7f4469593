//===- MovementToGPU.cpp - data-movement ops as GPU kernels ---------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// - moe.gather: one thread per output element, rows on grid.x, a row's
//   columns across a block (coalesced).
// - moe.combine: one thread per 16 bytes of an output row (16-byte loads
//   and stores where the buffers' layouts allow, checked on the host; else
//   element by element), summing the k slots in slot order in f32
//   (deterministic, the same sums on both paths).
// - moe.scatter: "the later row wins on a duplicate destination" becomes
//   an owner map: owner[d] = max{i : indices[i] = d} by atomic max (order
//   independent, so deterministic), then one thread per output element
//   copies row owner[d] or writes 0.
// - indices <-> multi-hot: one thread per token row, visiting its slots /
//   experts in order, so "later slot / higher expert wins" holds.
//
//===----------------------------------------------------------------------===//

#include "Gemm/NVVMBuilder.h"
#include "KernelBuilder.h"
#include "Patterns.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using CmpI = arith::CmpIPredicate;

/// out[row, col] = valid ? input[src, col] : 0 (src an i32 row index).
static void copyOrZero(LoweringBuilder &b, Value valid, Value input, Value src,
                       Value out, Value row, Value col) {
  Type f = cast<MemRefType>(out.getType()).getElementType();
  Value v = b.ifElse(
      valid, {f},
      [&](LoweringBuilder &b) -> SmallVector<Value> {
        return {b.load(input, {b.toIndex(src), col})};
      },
      [&](LoweringBuilder &b) -> SmallVector<Value> {
        return {b.scalar(f, 0.0)};
      })[0];
  b.store(v, out, {row, col});
}

namespace {

struct GatherToGPU : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GatherOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = op.getResult().getType();
    Value input = toBuffer(b, op.getInput());
    Value indices = toBuffer(b, op.getIndices());
    Value m = b.memDim(indices, 0);
    Value tI32 = b.toI32(b.memDim(input, 0));
    Value out = allocBuffer(b, resultType, dynRows(resultType, m));
    launchRowsCols(b, m, b.idx(resultType.getDimSize(1)),
                   [&](LoweringBuilder &b, Value row, Value col) {
                     Value src = b.load(indices, {row});
                     copyOrZero(b, b.inRange(src, b.i32(0), tI32), input, src,
                                out, row, col);
                   });
    rewriter.replaceOp(op, toTensor(b, out));
    return success();
  }
};

struct ScatterToGPU : OpRewritePattern<ScatterOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ScatterOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = op.getResult().getType();
    Value input = toBuffer(b, op.getInput());
    Value indices = toBuffer(b, op.getIndices());
    Value m = b.memDim(input, 0);
    Value mI32 = b.toI32(m);
    Value owner = allocScratch(b, {ShapedType::kDynamic}, b.getI32Type(), {m});
    fillBuffer(b, owner, b.i32(-1));
    launchForEach(b, m, [&](LoweringBuilder &b, Value i) {
      Value dst = b.load(indices, {i});
      when(b, b.inRange(dst, b.i32(0), mI32), [&](LoweringBuilder &b) {
        memref::AtomicRMWOp::create(b, arith::AtomicRMWKind::maxs, b.toI32(i),
                                    owner, ValueRange{b.toIndex(dst)});
      });
    });
    Value out = allocBuffer(b, resultType, dynRows(resultType, m));
    launchRowsCols(b, m, b.idx(resultType.getDimSize(1)),
                   [&](LoweringBuilder &b, Value row, Value col) {
                     Value src = b.load(owner, {row});
                     copyOrZero(b, b.cmpi(CmpI::sge, src, b.i32(0)), input, src,
                                out, row, col);
                   });
    rewriter.replaceOp(op, toTensor(b, out));
    return success();
  }
};

struct CombineToGPU : OpRewritePattern<CombineOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CombineOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = op.getResult().getType();
    Type f = resultType.getElementType();
    int64_t k = op.getInput().getType().getDimSize(1);
    int64_t h = resultType.getDimSize(1);
    Value input = toBuffer(b, op.getInput());
    Value weights = op.getWeights() ? toBuffer(b, op.getWeights()) : Value();
    Value t = b.memDim(input, 0);
    Value out = allocBuffer(b, resultType, dynRows(resultType, t));
    // A thread sums `vec` adjacent columns (16 bytes): by 16-byte loads and
    // stores where both buffers' rows allow it (checked here, on the host:
    // unit inner strides, 16-byte aligned rows and bases), else element by
    // element; the same f32 sums in slot order either way.
    const int64_t bytes = f.getIntOrFloatBitWidth() / 8;
    const int64_t vec = 16 / bytes;
    Value inputOk = nvvm::rowsAligned16(b, input, {0, 1}, 2);
    Value vectorOk = b.andi(inputOk, nvvm::rowsAligned16(b, out, {0}, 1));
    Value inAddr = nvvm::bufferAddress(b, input);
    Value outAddr = nvvm::bufferAddress(b, out);
    Value inS0 = nvvm::bufferStride(b, input, 0);
    Value inS1 = nvvm::bufferStride(b, input, 1);
    Value outS0 = nvvm::bufferStride(b, out, 0);
    auto vecType = VectorType::get({vec}, f);
    launchRowsCols(
        b, t, b.idx(llvm::divideCeil(h, vec)),
        [&](LoweringBuilder &b, Value row, Value chunk) {
          Value c0 = b.mul(chunk, b.idx(vec));
          auto weightOf = [&](LoweringBuilder &b, Value j) -> Value {
            return weights ? b.toF32(b.load(weights, {row, j})) : Value();
          };
          Value whole = b.cmpi(CmpI::ule, b.add(c0, b.idx(vec)), b.idx(h));
          scf::IfOp::create(
              b, b.andi(whole, vectorOk),
              [&](OpBuilder &nested, Location loc) {
                LoweringBuilder b(loc, nested);
                SmallVector<Value> sum(vec, b.f32(0.0));
                for (int64_t j = 0; j < k; ++j) {
                  Value offset =
                      b.add(b.add(b.mul(row, inS0), b.mul(b.idx(j), inS1)), c0);
                  Value ptr = nvvm::globalPtr(
                      b, arith::AddIOp::create(
                             b, inAddr,
                             nvvm::toI64(b, b.mul(offset, b.idx(bytes)))));
                  Value v = LLVM::LoadOp::create(b, vecType, ptr, 16);
                  Value w = weightOf(b, b.idx(j));
                  for (int64_t e = 0; e < vec; ++e) {
                    Value x = b.toF32(
                        LLVM::ExtractElementOp::create(b, v, nvvm::i64(b, e)));
                    if (w)
                      x = b.mul(w, x);
                    sum[e] = b.add(sum[e], x);
                  }
                }
                Value result = LLVM::PoisonOp::create(b, vecType);
                for (int64_t e = 0; e < vec; ++e)
                  result = LLVM::InsertElementOp::create(
                      b, result, b.fromF32(sum[e], f), nvvm::i64(b, e));
                Value offset = b.add(b.mul(row, outS0), c0);
                Value ptr = nvvm::globalPtr(
                    b, arith::AddIOp::create(
                           b, outAddr,
                           nvvm::toI64(b, b.mul(offset, b.idx(bytes)))));
                LLVM::StoreOp::create(b, result, ptr, 16);
                scf::YieldOp::create(b);
              },
              [&](OpBuilder &nested, Location loc) {
                LoweringBuilder b(loc, nested);
                for (int64_t e = 0; e < vec; ++e) {
                  Value col = b.add(c0, b.idx(e));
                  when(b, b.cmpi(CmpI::ult, col, b.idx(h)),
                       [&](LoweringBuilder &b) {
                         Value sum = b.forLoop(
                             b.idx(0), b.idx(k), {b.f32(0.0)},
                             [&](LoweringBuilder &b, Value j,
                                 ValueRange acc) -> SmallVector<Value> {
                               Value x = b.toF32(b.load(input, {row, j, col}));
                               if (Value w = weightOf(b, j))
                                 x = b.mul(w, x);
                               return {b.add(acc[0], x)};
                             })[0];
                         b.store(b.fromF32(sum, f), out, {row, col});
                       });
                }
                scf::YieldOp::create(b);
              });
        });
    rewriter.replaceOp(op, toTensor(b, out));
    return success();
  }
};

struct IndicesToMultihotToGPU : OpRewritePattern<IndicesToMultihotOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(IndicesToMultihotOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    int64_t e = static_cast<int64_t>(op.getNumExperts());
    auto hotType = op.getMultihot().getType();
    auto denseType = op.getProbsMultihot().getType();
    auto posType = op.getPositionMap().getType();
    Type f = denseType.getElementType();
    Value ids = toBuffer(b, op.getIndices());
    Value probs = toBuffer(b, op.getProbs());
    Value t = b.memDim(ids, 0);
    Value hot = allocBuffer(b, hotType, dynRows(hotType, t));
    Value dense = allocBuffer(b, denseType, dynRows(denseType, t));
    Value pos = allocBuffer(b, posType, dynRows(posType, t));
    launchForEach(b, t, [&](LoweringBuilder &b, Value row) {
      forEach(b, b.idx(0), b.idx(e), b.idx(1),
              [&](LoweringBuilder &b, Value c) {
                b.store(b.i1(false), hot, {row, c});
                b.store(b.scalar(f, 0.0), dense, {row, c});
                b.store(b.i32(-1), pos, {row, c});
              });
      forEachExpertSlotOfRow(
          b, ids, row, e, [&](LoweringBuilder &b, Value j, Value expert) {
            Value c = b.toIndex(expert);
            b.store(b.i1(true), hot, {row, c});
            b.store(b.load(probs, {row, j}), dense, {row, c});
            b.store(b.toI32(j), pos, {row, c});
          });
    });
    rewriter.replaceOp(
        op, {toTensor(b, hot), toTensor(b, dense), toTensor(b, pos)});
    return success();
  }
};

struct MultihotToIndicesToGPU : OpRewritePattern<MultihotToIndicesOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MultihotToIndicesOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = op.getProbs().getType();
    Type f = resultType.getElementType();
    int64_t e = op.getProbsMultihot().getType().getDimSize(1);
    int64_t k = static_cast<int64_t>(op.getK());
    Value dense = toBuffer(b, op.getProbsMultihot());
    Value pos = toBuffer(b, op.getPositionMap());
    Value t = b.memDim(dense, 0);
    Value out = allocBuffer(b, resultType, dynRows(resultType, t));
    launchForEach(b, t, [&](LoweringBuilder &b, Value row) {
      forEach(b, b.idx(0), b.idx(k), b.idx(1),
              [&](LoweringBuilder &b, Value j) {
                b.store(b.scalar(f, 0.0), out, {row, j});
              });
      forEach(b, b.idx(0), b.idx(e), b.idx(1),
              [&](LoweringBuilder &b, Value c) {
                Value slot = b.load(pos, {row, c});
                when(b, b.inRange(slot, b.i32(0), b.i32(k)),
                     [&](LoweringBuilder &b) {
                       b.store(b.load(dense, {row, c}), out,
                               {row, b.toIndex(slot)});
                     });
              });
    });
    rewriter.replaceOp(op, toTensor(b, out));
    return success();
  }
};

} // namespace

void mlir::moe::populateMovementToGPUPatterns(RewritePatternSet &patterns) {
  patterns.add<GatherToGPU, ScatterToGPU, CombineToGPU, IndicesToMultihotToGPU,
               MultihotToIndicesToGPU>(patterns.getContext());
}
