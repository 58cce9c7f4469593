//===- SimtEngine.cpp - the portable expert GEMM engine -------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Runs on any chip; also the reference for the tensor-core engines.
//
// - Tiles. A block owns a tileM x tileN output tile; its threads form a
//   (tileM/4) x (tileN/4) grid and each computes 4 x 4 outputs in
//   registers (rows ty + i*tileM/4, columns tx + j*tileN/4: conflict-free
//   shared-memory reads and coalesced stores). K advances tileK at a time
//   through shared memory, operands converted to f32 on the way in,
//   accumulation in f32 (math.fma). Low-precision operands are
//   dequantized on the way in (GemmOperands::lhsValue / rhsValue).
// - Ragged groups. grid.x walks the row tiles of all experts
//   (RaggedTiles); each block loops with stride gridDim.x. grid.y is the
//   column tile.
// - Fused stages. The A tile reads lhs through `gather` (rows outside
//   [0, rows(lhs)) read zero); the GLU epilogue keeps a second accumulator
//   for the `up` columns of the same output columns; then the shared
//   epilogue (Epilogue.cpp).
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

#include "mlir/Dialect/Math/IR/Math.h"

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
  int64_t threads = (tiles.tileM / kThreadTile) * (tiles.tileN / kThreadTile);
  if (threads < 32 || threads > 1024)
    return "GEMM tile gives " + std::to_string(threads) +
           " threads per block; (tile-m/4)*(tile-n/4) must be in [32, 1024]";
  int64_t smem = 4 * tiles.tileK * (tiles.tileM + 2 * tiles.tileN);
  if (smem > 48 * 1024)
    return "GEMM tile needs " + std::to_string(smem) +
           " bytes of shared memory (more than 48 KiB)";
  return std::nullopt;
}

void gpu_lowering::emitSimtExpertGemm(LoweringBuilder &b, const GemmOperands &g,
                                      const MoeGemmTiles &tiles) {
  Type f32 = b.getF32Type();
  const int64_t e = g.numExperts, kDim = g.kDim, outN = g.outN;
  const int64_t numAcc = g.glu ? 2 : 1;
  const int64_t bm = tiles.tileM, bn = tiles.tileN, bk = tiles.tileK;
  const int64_t tyCount = bm / kThreadTile, txCount = bn / kThreadTile;
  const int64_t threads = tyCount * txCount;
  RaggedTiles ragged{g.offsets, g.m, e, bm};

  Value gridX = ragged.upperBound(b);
  Value gridY = b.idx((outN + bn - 1) / bn);

  SmallVector<MemRefType> shared = {workgroupType({bk, bm}, f32)};
  for (int64_t a = 0; a < numAcc; ++a)
    shared.push_back(workgroupType({bk, bn}, f32));

  launch(
      b, gridX, gridY, threads, shared,
      [&](LoweringBuilder &b, const KernelIds &ids, ArrayRef<Value> smem) {
        Value zero = b.idx(0);
        Value tid = ids.threadX;
        Value tx = arith::RemUIOp::create(b, tid, b.idx(txCount));
        Value ty = arith::DivUIOp::create(b, tid, b.idx(txCount));
        Value n0 = b.mul(ids.blockY, b.idx(bn));
        Value totalTiles = ragged.total(b);
        forEach(
            b, ids.blockX, totalTiles, ids.gridX,
            [&](LoweringBuilder &b, Value tile) {
              auto [expert, before] = ragged.advance(b, tile, zero, zero);
              Value lo = ragged.offsetAt(b, expert);
              Value hi = ragged.offsetAt(b, b.add(expert, b.idx(1)));
              Value rowStart = b.add(lo, b.mul(b.sub(tile, before), b.idx(bm)));
              Value tileRows = b.minIdx(b.sub(hi, rowStart), b.idx(bm));

              // Source row of tile row r (gather applied), or -1.
              auto sourceRow = [&](LoweringBuilder &b, Value r) -> Value {
                Value row = b.add(rowStart, r);
                if (!g.gather)
                  return b.toI32(row);
                Value src = b.load(g.gather, {row});
                return b.select(b.inRange(src, b.i32(0), b.toI32(g.lhsRows)),
                                src, b.i32(-1));
              };

              // Staging plan: iteration `it` of thread `tid` moves element
              // q = tid + it * threads of a tile. The A rows a thread stages
              // (and their gathered source rows) are fixed for the whole tile,
              // so they are loaded once, before the K loop.
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
                    // Issue every global load of this K step first (they are
                    // independent), converting to f32; out-of-range elements
                    // read zero. rhs addresses are clamped into the tensor, so
                    // its loads need no branch.
                    SmallVector<Value> aVals;
                    for (int64_t it = 0; it < aIters; ++it) {
                      Value kg = b.add(k0, aKK[it]);
                      Value ok = b.andi(b.cmpi(CmpI::sge, aSrc[it], b.i32(0)),
                                        b.cmpi(CmpI::ult, kg, b.idx(kDim)));
                      aVals.push_back(b.ifElse(
                          ok, {f32},
                          [&](LoweringBuilder &b) -> SmallVector<Value> {
                            return {g.lhsValue(b, b.toIndex(aSrc[it]), kg)};
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
                        if (g.transposed) {
                          c = arith::DivUIOp::create(b, q, b.idx(bk));
                          kk = arith::RemUIOp::create(b, q, b.idx(bk));
                        } else {
                          kk = arith::DivUIOp::create(b, q, b.idx(bn));
                          c = arith::RemUIOp::create(b, q, b.idx(bn));
                        }
                        Value kg = b.add(k0, kk), cg = b.add(n0, c);
                        Value ok = b.andi(b.cmpi(CmpI::ult, kg, b.idx(kDim)),
                                          b.cmpi(CmpI::ult, cg, b.idx(outN)));
                        Value valid = bElems % threads
                                          ? b.cmpi(CmpI::ult, q, b.idx(bElems))
                                          : Value();
                        Value kgSafe = b.minIdx(kg, b.idx(kDim - 1));
                        Value col =
                            g.gemmColumn(b, a, b.minIdx(cg, b.idx(outN - 1)));
                        Value v = g.rhsValue(b, expert, col, kgSafe);
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
                             b.cmpi(CmpI::ult, b.add(tid, b.idx(it * threads)),
                                    b.idx(aElems)),
                             put);
                      else
                        put(b);
                    }
                    for (BElem &be : bVals) {
                      auto put = [&](LoweringBuilder &b) {
                        b.store(be.v, smem[1 + be.a], {be.kk, be.c});
                      };
                      if (be.valid)
                        when(b, be.valid, put);
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
                                smem[0], {kk, b.add(ty, b.idx(i * tyCount))}));
                          for (int64_t a = 0; a < numAcc; ++a) {
                            for (int64_t j = 0; j < kThreadTile; ++j) {
                              Value bv =
                                  b.load(smem[1 + a],
                                         {kk, b.add(tx, b.idx(j * txCount))});
                              for (int64_t i = 0; i < kThreadTile; ++i) {
                                int64_t slot =
                                    (a * kThreadTile + i) * kThreadTile + j;
                                next[slot] = math::FmaOp::create(b, av[i], bv,
                                                                 cur[slot]);
                              }
                            }
                          }
                          return next;
                        });
                  });

              // Epilogue: bias, GLU, scale, store to the destination row.
              for (int64_t i = 0; i < kThreadTile; ++i) {
                Value r = b.add(ty, b.idx(i * tyCount));
                when(
                    b, b.cmpi(CmpI::ult, r, tileRows), [&](LoweringBuilder &b) {
                      RowTarget target = rowTarget(b, g, b.add(rowStart, r));
                      when(b, target.valid, [&](LoweringBuilder &b) {
                        for (int64_t j = 0; j < kThreadTile; ++j) {
                          Value c = b.add(n0, b.add(tx, b.idx(j * txCount)));
                          when(b, b.cmpi(CmpI::ult, c, b.idx(outN)),
                               [&](LoweringBuilder &b) {
                                 SmallVector<Value> v;
                                 for (int64_t a = 0; a < numAcc; ++a)
                                   v.push_back(
                                       acc[(a * kThreadTile + i) * kThreadTile +
                                           j]);
                                 storeOutput(b, g, target, expert, c, v);
                               });
                        }
                      });
                    });
              }
            });
      });
}
