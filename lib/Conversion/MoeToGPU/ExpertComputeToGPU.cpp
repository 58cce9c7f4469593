//===- ExpertComputeToGPU.cpp - the expert GEMM and GLU kernels ----------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// moe.expert_gemm (and moe.grouped_matmul, rewritten to it) is one tiled
// kernel over the ragged expert groups:
//
// - Tiles. A block owns a tileM x tileN output tile; its threads form a
//   (tileM/4) x (tileN/4) grid and each computes 4 x 4 outputs in
//   registers (rows ty + i*tileM/4, columns tx + j*tileN/4: conflict-free
//   shared-memory reads and coalesced stores). K advances tileK at a time
//   through shared memory, operands converted to f32 on the way in,
//   accumulation in f32 (math.fma).
// - Ragged groups. grid.x walks the row tiles of all experts
//   (sum_e ceil(rows_e / tileM)); each block finds its expert by a scan of
//   the clamped offsets and loops with stride gridDim.x, so any offsets,
//   even inconsistent ones, are covered without a host-side tile list.
//   grid.y is the column tile.
// - Fused stages. The A tile reads lhs through `gather` (rows outside
//   [0, rows(lhs)) read zero); the GLU epilogue keeps a second accumulator
//   for the `up` columns of the same output columns (concat: c + N,
//   interleaved: 2c + 1); then bias, activation, row scale by
//   scale[destination] and the store to `scatter[row]` (rows outside
//   [0, M) are dropped). The output starts zero-filled: rows no expert owns
//   stay zero.
//
// moe.glu is one elementwise kernel (one thread per output element).
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "Patterns.h"

#include "../Utils/FusedForms.h"
#include "../Utils/Glu.h"
#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using CmpI = arith::CmpIPredicate;

/// Outputs per thread along each tile dimension.
constexpr int64_t kThreadTile = 4;

std::optional<std::string>
mlir::moe::validateGemmTiles(const MoeGemmTiles &tiles) {
  if (tiles.tileM <= 0 || tiles.tileN <= 0 || tiles.tileK <= 0)
    return std::string("GEMM tiles must be positive");
  if (tiles.tileM % kThreadTile || tiles.tileN % kThreadTile)
    return "GEMM tile-m and tile-n must be multiples of " +
           std::to_string(kThreadTile);
  int64_t threads =
      (tiles.tileM / kThreadTile) * (tiles.tileN / kThreadTile);
  if (threads < 32 || threads > 1024)
    return "GEMM tile gives " + std::to_string(threads) +
           " threads per block; (tile-m/4)*(tile-n/4) must be in [32, 1024]";
  int64_t smem = 4 * tiles.tileK * (tiles.tileM + 2 * tiles.tileN);
  if (smem > 48 * 1024)
    return "GEMM tile needs " + std::to_string(smem) +
           " bytes of shared memory (more than 48 KiB)";
  return std::nullopt;
}

namespace {

struct ExpertGemmToGPU : OpRewritePattern<ExpertGemmOp> {
  ExpertGemmToGPU(MLIRContext *ctx, const MoeGemmTiles &tiles)
      : OpRewritePattern(ctx), tiles(tiles) {}

  LogicalResult matchAndRewrite(ExpertGemmOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = op.getResult().getType();
    Type o = resultType.getElementType();
    Type f32 = b.getF32Type();
    bool transposed = op.getTransposeRhs();
    int64_t e = op.getRhs().getType().getDimSize(0);
    int64_t kDim = op.getLhs().getType().getDimSize(1);
    int64_t outN = resultType.getDimSize(1);
    std::optional<GluParams> glu;
    if (op.hasGluEpilogue())
      glu = gluParamsOf(op);
    int64_t numAcc = glu ? 2 : 1;

    const int64_t bm = tiles.tileM, bn = tiles.tileN, bk = tiles.tileK;
    const int64_t tyCount = bm / kThreadTile, txCount = bn / kThreadTile;
    const int64_t threads = tyCount * txCount;

    Value lhs = toBuffer(b, op.getLhs());
    Value rhs = toBuffer(b, op.getRhs());
    Value offsets = toBuffer(b, op.getOffsets());
    Value gather = op.getGather() ? toBuffer(b, op.getGather()) : Value();
    Value bias = op.getBias() ? toBuffer(b, op.getBias()) : Value();
    Value scatter = op.getScatter() ? toBuffer(b, op.getScatter()) : Value();
    Value scale = op.getScale() ? toBuffer(b, op.getScale()) : Value();

    Value m = gather ? b.memDim(gather, 0) : b.memDim(lhs, 0);
    Value lhsRows = b.memDim(lhs, 0);
    Value out = allocBuffer(b, resultType, dynRows(resultType, m));
    fillBuffer(b, out, b.scalar(o));

    // Upper bound of the row tiles of well-formed offsets; blocks loop over
    // the real count, so fewer blocks are never wrong.
    Value gridX = b.add(b.ceilDiv(m, bm), b.idx(e));
    Value gridY = b.idx((outN + bn - 1) / bn);

    SmallVector<MemRefType> shared = {workgroupType({bk, bm}, f32)};
    for (int64_t a = 0; a < numAcc; ++a)
      shared.push_back(workgroupType({bk, bn}, f32));

    // GEMM column of accumulator `a` for output column `c`.
    auto gemmColumn = [&](LoweringBuilder &b, int64_t a, Value c) -> Value {
      if (!glu)
        return c;
      if (glu->layout == GluLayout::concat)
        return a == 0 ? c : b.add(c, b.idx(outN));
      Value twice = b.mul(c, b.idx(2));
      return a == 0 ? twice : b.add(twice, b.idx(1));
    };

    launch(b, gridX, gridY, threads, shared,
           [&](LoweringBuilder &b, const KernelIds &ids,
               ArrayRef<Value> smem) {
             Value zero = b.idx(0), one = b.idx(1);
             Value tid = ids.threadX;
             Value tx = arith::RemUIOp::create(b, tid, b.idx(txCount));
             Value ty = arith::DivUIOp::create(b, tid, b.idx(txCount));
             Value n0 = b.mul(ids.blockY, b.idx(bn));
             auto offsetAt = [&](LoweringBuilder &b, Value i) {
               return b.clamp(b.toIndex(b.load(offsets, {i})), zero, m);
             };
             auto tilesOf = [&](LoweringBuilder &b, Value expert) {
               Value lo = offsetAt(b, expert);
               Value hi = offsetAt(b, b.add(expert, one));
               Value rows = b.sub(b.maxIdx(hi, lo), lo);
               return b.ceilDiv(rows, bm);
             };
             Value totalTiles =
                 b.forLoop(zero, b.idx(e), {zero},
                           [&](LoweringBuilder &b, Value x,
                               ValueRange acc) -> SmallVector<Value> {
                             return {b.add(acc[0], tilesOf(b, x))};
                           })[0];
             forEach(b, ids.blockX, totalTiles, ids.gridX,
                     [&](LoweringBuilder &b, Value tile) {
               // Expert of this tile and the tile's index within it.
               SmallVector<Value> found = b.forLoop(
                   zero, b.idx(e), {zero, zero, zero},
                   [&](LoweringBuilder &b, Value x,
                       ValueRange acc) -> SmallVector<Value> {
                     Value next = b.add(acc[0], tilesOf(b, x));
                     Value here = b.andi(b.cmpi(CmpI::uge, tile, acc[0]),
                                         b.cmpi(CmpI::ult, tile, next));
                     return {next, b.select(here, x, acc[1]),
                             b.select(here, b.sub(tile, acc[0]), acc[2])};
                   });
               Value expert = found[1];
               Value lo = offsetAt(b, expert);
               Value hi = offsetAt(b, b.add(expert, one));
               Value rowStart = b.add(lo, b.mul(found[2], b.idx(bm)));
               Value tileRows = b.minIdx(b.sub(hi, rowStart), b.idx(bm));

               // Source row of tile row r (gather applied), or -1.
               auto sourceRow = [&](LoweringBuilder &b, Value r) -> Value {
                 Value row = b.add(rowStart, r);
                 if (!gather)
                   return b.toI32(row);
                 Value src = b.load(gather, {row});
                 return b.select(b.inRange(src, b.i32(0), b.toI32(lhsRows)),
                                 src, b.i32(-1));
               };

               // Staging plan: iteration `it` of thread `tid` moves element
               // q = tid + it * threads of a tile. The A rows a thread stages
               // (and their gathered source rows) are fixed for the whole
               // tile, so they are loaded once, before the K loop.
               const int64_t aElems = bm * bk, bElems = bk * bn;
               const int64_t aIters = (aElems + threads - 1) / threads;
               const int64_t bIters = (bElems + threads - 1) / threads;
               SmallVector<Value> aR, aKK, aSrc;
               for (int64_t it = 0; it < aIters; ++it) {
                 Value q = b.add(tid, b.idx(it * threads));
                 Value r = arith::DivUIOp::create(b, q, b.idx(bk));
                 Value ok = b.cmpi(CmpI::ult, r, tileRows);
                 if (aElems % threads)
                   ok = b.andi(ok, b.cmpi(CmpI::ult, q, b.idx(aElems)));
                 aR.push_back(r);
                 aKK.push_back(arith::RemUIOp::create(b, q, b.idx(bk)));
                 aSrc.push_back(b.ifElse(
                     ok, {b.getI32Type()},
                     [&](LoweringBuilder &b) -> SmallVector<Value> {
                       return {sourceRow(b, r)};
                     },
                     [&](LoweringBuilder &b) -> SmallVector<Value> {
                       return {b.i32(-1)};
                     })[0]);
               }

               SmallVector<Value> init(numAcc * kThreadTile * kThreadTile,
                                       b.f32(0.0));
               SmallVector<Value> acc = b.forLoop(
                   zero, b.idx(kDim), b.idx(bk), init,
                   [&](LoweringBuilder &b, Value k0,
                       ValueRange accIn) -> SmallVector<Value> {
                     // Issue every global load of this K step first (they
                     // are independent), converting to f32; out-of-range
                     // elements read zero. rhs addresses are clamped into
                     // the tensor, so its loads need no branch.
                     SmallVector<Value> aVals;
                     for (int64_t it = 0; it < aIters; ++it) {
                       Value kg = b.add(k0, aKK[it]);
                       Value ok = b.andi(b.cmpi(CmpI::sge, aSrc[it], b.i32(0)),
                                         b.cmpi(CmpI::ult, kg, b.idx(kDim)));
                       aVals.push_back(b.ifElse(
                           ok, {f32},
                           [&](LoweringBuilder &b) -> SmallVector<Value> {
                             return {b.toF32(
                                 b.load(lhs, {b.toIndex(aSrc[it]), kg}))};
                           },
                           [&](LoweringBuilder &b) -> SmallVector<Value> {
                             return {b.f32(0.0)};
                           })[0]);
                     }
                     // (value, kk, c) of each staged B element.
                     struct BElem {
                       Value v, kk, c;
                       int64_t a;
                       Value valid;
                     };
                     SmallVector<BElem> bVals;
                     for (int64_t a = 0; a < numAcc; ++a) {
                       for (int64_t it = 0; it < bIters; ++it) {
                         Value q = b.add(tid, b.idx(it * threads));
                         // Coalesce along the contiguous dim of rhs.
                         Value kk, c;
                         if (transposed) {
                           c = arith::DivUIOp::create(b, q, b.idx(bk));
                           kk = arith::RemUIOp::create(b, q, b.idx(bk));
                         } else {
                           kk = arith::DivUIOp::create(b, q, b.idx(bn));
                           c = arith::RemUIOp::create(b, q, b.idx(bn));
                         }
                         Value kg = b.add(k0, kk), cg = b.add(n0, c);
                         Value ok = b.andi(
                             b.cmpi(CmpI::ult, kg, b.idx(kDim)),
                             b.cmpi(CmpI::ult, cg, b.idx(outN)));
                         Value valid =
                             bElems % threads
                                 ? b.cmpi(CmpI::ult, q, b.idx(bElems))
                                 : Value();
                         Value kgSafe = b.minIdx(kg, b.idx(kDim - 1));
                         Value col =
                             gemmColumn(b, a, b.minIdx(cg, b.idx(outN - 1)));
                         SmallVector<Value> at =
                             transposed ? SmallVector<Value>{expert, col, kgSafe}
                                        : SmallVector<Value>{expert, kgSafe, col};
                         Value v = b.toF32(b.load(rhs, at));
                         bVals.push_back(
                             {b.select(ok, v, b.f32(0.0)), kk, c, a, valid});
                       }
                     }
                     // Everyone is done reading the previous step's tiles.
                     gpu::BarrierOp::create(b);
                     for (int64_t it = 0; it < aIters; ++it) {
                       auto put = [&, it](LoweringBuilder &b) {
                         b.store(aVals[it], smem[0], {aKK[it], aR[it]});
                       };
                       if (aElems % threads)
                         when(b,
                              b.cmpi(CmpI::ult,
                                     b.add(tid, b.idx(it * threads)),
                                     b.idx(aElems)),
                              put);
                       else
                         put(b);
                     }
                     for (BElem &e : bVals) {
                       auto put = [&](LoweringBuilder &b) {
                         b.store(e.v, smem[1 + e.a], {e.kk, e.c});
                       };
                       if (e.valid)
                         when(b, e.valid, put);
                       else
                         put(b);
                     }
                     gpu::BarrierOp::create(b);
                     // Register-tiled products over this K step.
                     return b.forLoop(
                         zero, b.idx(bk), accIn,
                         [&](LoweringBuilder &b, Value kk,
                             ValueRange cur) -> SmallVector<Value> {
                           SmallVector<Value> av, next(cur);
                           for (int64_t i = 0; i < kThreadTile; ++i)
                             av.push_back(b.load(
                                 smem[0],
                                 {kk, b.add(ty, b.idx(i * tyCount))}));
                           for (int64_t a = 0; a < numAcc; ++a) {
                             for (int64_t j = 0; j < kThreadTile; ++j) {
                               Value bv = b.load(
                                   smem[1 + a],
                                   {kk, b.add(tx, b.idx(j * txCount))});
                               for (int64_t i = 0; i < kThreadTile; ++i) {
                                 int64_t slot =
                                     (a * kThreadTile + i) * kThreadTile + j;
                                 next[slot] =
                                     math::FmaOp::create(b, av[i], bv, cur[slot]);
                               }
                             }
                           }
                           return next;
                         });
                   });

               // Epilogue: bias, GLU, scale, store to the destination row.
               Value mI32 = b.toI32(m);
               for (int64_t i = 0; i < kThreadTile; ++i) {
                 Value r = b.add(ty, b.idx(i * tyCount));
                 Value rowOk = b.cmpi(CmpI::ult, r, tileRows);
                 when(b, rowOk, [&](LoweringBuilder &b) {
                   Value row = b.add(rowStart, r);
                   Value dest = scatter ? b.load(scatter, {row}) : b.toI32(row);
                   Value destOk = b.inRange(dest, b.i32(0), mI32);
                   when(b, destOk, [&](LoweringBuilder &b) {
                     Value d = b.toIndex(dest);
                     Value factor =
                         scale ? b.toF32(b.load(scale, {d})) : Value();
                     for (int64_t j = 0; j < kThreadTile; ++j) {
                       Value c = b.add(n0, b.add(tx, b.idx(j * txCount)));
                       when(b, b.cmpi(CmpI::ult, c, b.idx(outN)),
                            [&](LoweringBuilder &b) {
                         SmallVector<Value> v;
                         for (int64_t a = 0; a < numAcc; ++a) {
                           Value x = acc[(a * kThreadTile + i) * kThreadTile + j];
                           if (bias)
                             x = b.add(x, b.toF32(b.load(
                                              bias, {expert,
                                                     gemmColumn(b, a, c)})));
                           v.push_back(x);
                         }
                         Value y = glu ? gluValue(b, *glu, v[0], v[1]) : v[0];
                         if (factor)
                           y = b.mul(y, factor);
                         b.store(b.fromF32(y, o), out, {d, c});
                       });
                     }
                   });
                 });
               }
             });
           });
    rewriter.replaceOp(op, toTensor(b, out));
    return success();
  }

  MoeGemmTiles tiles;
};

struct GluToGPU : OpRewritePattern<GluOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GluOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = op.getResult().getType();
    Type f = resultType.getElementType();
    int64_t n = resultType.getDimSize(1);
    GluParams p = gluParamsOf(op);
    bool concat = p.layout == GluLayout::concat;
    Value input = toBuffer(b, op.getInput());
    Value rows = b.memDim(input, 0);
    Value out = allocBuffer(b, resultType, dynRows(resultType, rows));
    launchRowsCols(b, rows, b.idx(n),
                   [&](LoweringBuilder &b, Value row, Value col) {
                     Value gateCol = concat ? col : b.mul(col, b.idx(2));
                     Value upCol = concat ? b.add(col, b.idx(n))
                                          : b.add(gateCol, b.idx(1));
                     Value gate = b.toF32(b.load(input, {row, gateCol}));
                     Value up = b.toF32(b.load(input, {row, upCol}));
                     b.store(b.fromF32(gluValue(b, p, gate, up), f), out,
                             {row, col});
                   });
    rewriter.replaceOp(op, toTensor(b, out));
    return success();
  }
};

} // namespace

void mlir::moe::populateExpertComputeToGPUPatterns(RewritePatternSet &patterns,
                                                   const MoeGemmTiles &tiles) {
  patterns.add<ExpertGemmToGPU>(patterns.getContext(), tiles);
  patterns.add<GluToGPU>(patterns.getContext());
}
