//===- WgmmaLoaders.cpp - the Hopper engine's producer
//----------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The producer warpgroup of the Hopper engine (WgmmaEngine.cpp has the
// design): per K step it fills a pipeline stage, the lhs rows by cp.async
// (gathered rows, the 128-byte swizzle applied by hand), the rhs tile by
// TMA (multicast in 2-CTA clusters) or cp.async, completing on the
// stage's full barrier;
// and it publishes each item's record and row table to the consumers (the
// item handoff).
//
//===----------------------------------------------------------------------===//

#include "WgmmaKernel.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;
using namespace mlir::moe::gpu_lowering::wgmma;

WgmmaKernel::LhsRow WgmmaKernel::lhsRow(LoweringBuilder &b,
                                        const WorkItem &item, Value r) {
  Value inTile = b.cmpi(CmpI::ult, r, item.tileRows);
  Value row = b.add(item.rowStart, r);
  Value src;
  if (g.gather) {
    Value safeRow = b.select(inTile, row, b.idx(0));
    src = b.ifElse(
        inTile, {b.getI32Type()},
        [&](LoweringBuilder &b) -> SmallVector<Value> {
          return {b.load(g.gather, {safeRow})};
        },
        [&](LoweringBuilder &b) -> SmallVector<Value> {
          return {b.i32(-1)};
        })[0];
  } else {
    src = b.toI32(row);
  }
  Value ok = b.andi(inTile, b.inRange(src, b.i32(0), b.toI32(g.lhsRows)));
  Value srcRow = b.toIndex(b.select(ok, src, b.i32(0)));
  Value address = add64(
      b, lhsAddr,
      nvvm::toI64(b, b.mul(b.mul(srcRow, lhsStride), b.idx(elemBytes()))));
  return {address, ok, srcRow};
}

std::pair<Value, Value> WgmmaKernel::fp8Row(LoweringBuilder &b, Value index,
                                            Value baseAddr, Value stride,
                                            int64_t elemBytes) {
  Value ok = b.cmpi(CmpI::sge, index, b.i32(0));
  Value row = b.toIndex(b.select(ok, index, b.i32(0)));
  Value address = add64(
      b, baseAddr, nvvm::toI64(b, b.mul(b.mul(row, stride), b.idx(elemBytes))));
  return {address, ok};
}

void WgmmaKernel::producer(LoweringBuilder &b, Value tid,
                           const WorkItem &item) {
  // Item handoff: row tid's destination and routing weight, loaded now and
  // stored at the handoff step (the loads complete under the copies).
  SmallVector<Value> entry;
  if (handoff)
    entry = rowEntry(b, item, tid, /*withFactor=*/true);
  // Thread t copies chunk c = t % 8 (16 bytes) of rows t / 8 + 16 j.
  Value c = arith::AndIOp::create(b, tid, b.idx(7));
  Value rg = arith::AndIOp::create(b, arith::ShRUIOp::create(b, tid, b.idx(3)),
                                   b.idx(15));
  Value swizzled =
      arith::XOrIOp::create(b, c, arith::AndIOp::create(b, rg, b.idx(7)));
  Value dstOffset =
      nvvm::toI64(b, b.add(b.mul(rg, b.idx(128)), b.mul(swizzled, b.idx(16))));
  Value elemBytes = b.idx(this->elemBytes());

  // Row start addresses and validity, fixed for the item. (fp8_block:
  // the rows as 32-bit indices, -1 when not read, whose code and scale
  // addresses (f32 [rows, K / 128]) each stage builds: two 64-bit
  // addresses and a flag a row do not fit the producer's registers.)
  SmallVector<Value> aRow, aOk, bRow, bOk, aIndex;
  for (int64_t j = 0; j < tileM / 16; ++j) {
    LhsRow row = lhsRow(b, item, b.add(rg, b.idx(16 * j)));
    if (fp8) {
      aIndex.push_back(b.select(row.ok, b.toI32(row.row), b.i32(-1)));
      continue;
    }
    aRow.push_back(row.address);
    aOk.push_back(row.ok);
  }
  // fp8_block: the weight scales of the tile's columns (f32 [E, N / 128,
  // K / 128]): one 128-column block, or the gate half's and the up half's,
  // or (256 columns) the two halves' blocks.
  SmallVector<Value> wScale;
  if (fp8) {
    SmallVector<Value> blocks;
    if (concat) {
      Value outCol = b.mul(item.colTile, b.idx(tileN / 2));
      blocks = {outCol, b.add(outCol, b.idx(g.outN))};
    } else {
      for (int64_t u = 0; u < fp8Halves(); ++u)
        blocks.push_back(
            b.add(b.mul(item.colTile, b.idx(tileN)), b.idx(128 * u)));
    }
    for (Value col : blocks) {
      Value nb = arith::DivUIOp::create(b, col, b.idx(128));
      Value offset = b.add(b.mul(item.expert, rhsScaleStride0),
                           b.mul(nb, rhsScaleStride1));
      wScale.push_back(
          add64(b, rhsScaleAddr, nvvm::toI64(b, b.mul(offset, b.idx(4)))));
    }
  }
  // K-major rhs ([E, N, K]): like lhs, rows are rhs columns.
  for (int64_t j = 0; !rhsMap && g.transposed && j < tileN / 16; ++j) {
    Value n = b.add(rg, b.idx(16 * j));
    Value col, ok;
    if (concat) {
      // Gate half then up half of output columns [colTile * tileN / 2, ...).
      int64_t half = tileN / 2;
      bool upHalf = 16 * j >= half;
      Value outCol = b.add(b.mul(item.colTile, b.idx(half)),
                           upHalf ? b.sub(n, b.idx(half)) : n);
      ok = b.cmpi(CmpI::ult, outCol, b.idx(g.outN));
      col = upHalf ? b.add(outCol, b.idx(g.outN)) : outCol;
    } else {
      col = b.add(b.mul(item.colTile, b.idx(tileN)), n);
      ok = b.cmpi(CmpI::ult, col, b.idx(g.gemmN));
    }
    col = b.minIdx(col, b.idx(g.gemmN - 1));
    Value offset =
        b.add(b.mul(item.expert, rhsStride0), b.mul(col, rhsStride1));
    bRow.push_back(add64(b, rhsAddr, nvvm::toI64(b, b.mul(offset, elemBytes))));
    bOk.push_back(ok);
  }

  // MN-major rhs ([E, K, N]): thread t copies chunk t % (tileN / 8) (8
  // columns) of K rows t / (tileN / 8) + rowsPerPass * j into the atom
  // column of its chunk (Epilogue-order columns as above).
  const int64_t chunksPerRow = tileN / 8, rowsPerPass = 128 / chunksPerRow;
  Value mnColAddr, mnOk;
  SmallVector<Value> mnDst, mnRow;
  if (!rhsMap && !g.transposed) {
    Value chunk = arith::RemUIOp::create(b, tid, b.idx(chunksPerRow));
    Value kr0 = arith::DivUIOp::create(b, tid, b.idx(chunksPerRow));
    Value col;
    if (concat) {
      int64_t half = tileN / 2;
      Value upHalf = b.cmpi(CmpI::uge, chunk, b.idx(half / 8));
      Value within = arith::RemUIOp::create(b, chunk, b.idx(half / 8));
      Value outCol =
          b.add(b.mul(item.colTile, b.idx(half)), b.mul(within, b.idx(8)));
      mnOk = b.cmpi(CmpI::ult, outCol, b.idx(g.outN));
      col = b.select(upHalf, b.add(outCol, b.idx(g.outN)), outCol);
    } else {
      col = b.add(b.mul(item.colTile, b.idx(tileN)), b.mul(chunk, b.idx(8)));
      mnOk = b.cmpi(CmpI::ult, col, b.idx(g.gemmN));
    }
    col = b.minIdx(col, b.idx(g.gemmN - 8));
    Value offset = b.add(b.mul(item.expert, rhsStride0), col);
    mnColAddr = add64(b, rhsAddr, nvvm::toI64(b, b.mul(offset, elemBytes)));
    Value atom =
        b.mul(arith::DivUIOp::create(b, chunk, b.idx(8)), b.idx(64 * 128));
    Value c8 = arith::AndIOp::create(b, chunk, b.idx(7));
    for (int64_t j = 0; j < 64 / rowsPerPass; ++j) {
      Value kr = b.add(kr0, b.idx(rowsPerPass * j));
      Value sw =
          arith::XOrIOp::create(b, c8, arith::AndIOp::create(b, kr, b.idx(7)));
      mnDst.push_back(nvvm::toI64(
          b, b.add(b.add(b.idx(aBytes()), atom),
                   b.add(b.mul(kr, b.idx(128)), b.mul(sw, b.idx(16))))));
      mnRow.push_back(kr);
    }
  }

  Value zero = b.idx(0);
  // Few K steps (main kernel): LLVM would unroll the loop completely, and
  // the unrolled copies spill in the 40-register producer (E=128, K=256:
  // 88 bytes); an opaque bound keeps it a loop. (The model layers have 12
  // steps or more, a loop anyway; the small-M kernel has the registers.)
  Value producerSteps = b.idx(kSteps);
  if (!swap && kSteps <= 8)
    producerSteps = arith::IndexCastOp::create(
        b, b.getIndexType(), nvvm::opaque(b, nvvm::i64(b, kSteps)));
  forEach(b, zero, producerSteps, b.idx(1), [&](LoweringBuilder &b, Value kt) {
    Value step = b.add(item.step, kt);
    auto [s, round] = stageOf(b, step);
    when(b, b.cmpi(CmpI::uge, step, b.idx(stages)), [&](LoweringBuilder &b) {
      Value prev = b.sub(round, b.idx(1));
      nvvm::mbarrierWait(b, emptyBarrier(b, s), parity(b, prev));
    });
    Value stageBase = stageAddress(b, s);
    // Without a K tail every chunk of a valid row is in bounds: no
    // per-step select (rows that read zeros point at row 0).
    bool kTail = g.kDim % (sliceK() * kSlices) != 0;
    // First K element of slice h of this step.
    for (int64_t h = 0; h < kSlices; ++h) {
      Value stage = add64(b, add64(b, stageBase, h * sliceBytes()), dstOffset);
      Value k =
          b.add(sliceStartK(b, kt, h), b.mul(c, b.idx(16 / this->elemBytes())));
      Value kIn = b.cmpi(CmpI::ult, k, b.idx(g.kDim));
      Value kBytes = nvvm::toI64(b, b.mul(k, elemBytes));
      auto copy = [&](Value dst, Value rowAddr, Value ok, Value fallback) {
        if (!kTail) {
          nvvm::cpAsync16(b, dst, add64(b, rowAddr, kBytes),
                          b.select(ok, b.i32(16), b.i32(0)));
          return;
        }
        Value valid = b.andi(ok, kIn);
        Value src = b.select(valid, add64(b, rowAddr, kBytes), fallback);
        nvvm::cpAsync16(b, dst, src, b.select(valid, b.i32(16), b.i32(0)));
      };
      for (int64_t j = 0; j < int64_t(aRow.size()); ++j)
        copy(add64(b, stage, 2048 * j), aRow[j], aOk[j], lhsAddr);
      for (int64_t j = 0; j < int64_t(aIndex.size()); ++j) {
        auto [address, ok] = fp8Row(b, aIndex[j], lhsAddr, lhsStride, 1);
        copy(add64(b, stage, 2048 * j), address, ok, lhsAddr);
      }
      for (int64_t j = 0; !rhsMap && g.transposed && j < tileN / 16; ++j)
        copy(add64(b, stage, aBytes() + 2048 * j), bRow[j], bOk[j], rhsAddr);
    }
    if (fp8) {
      // The step's scales (its K block is kt): chunk-0 threads copy their
      // rows' (zeros for rows out of the tile), thread 1 the weights'.
      Value area = scaleArea(b, s);
      Value kb = nvvm::toI64(b, b.mul(kt, b.idx(4)));
      Value wkb = nvvm::toI64(b, b.mul(b.mul(kt, rhsScaleStride2), b.idx(4)));
      when(b, b.cmpi(CmpI::eq, c, b.idx(0)), [&](LoweringBuilder &b) {
        for (int64_t j = 0; j < int64_t(aIndex.size()); ++j) {
          Value dst =
              add64(b, area,
                    nvvm::toI64(b, b.mul(b.add(rg, b.idx(16 * j)), b.idx(4))));
          auto [address, ok] =
              fp8Row(b, aIndex[j], lhsScaleAddr, lhsScaleStride, 4);
          nvvm::cpAsync4(b, dst, add64(b, address, kb),
                         b.select(ok, b.i32(4), b.i32(0)));
        }
      });
      when(b, b.cmpi(CmpI::eq, tid, b.idx(1)), [&](LoweringBuilder &b) {
        for (int64_t u = 0; u < int64_t(wScale.size()); ++u)
          nvvm::cpAsync4(b, add64(b, area, tileM * 4 + 4 * u),
                         add64(b, wScale[u], wkb), b.i32(4));
      });
    }
    if (mxfp4)
      loadMxScales(b, tid, stageBase, kt, item);
    if (rhsMap)
      when(b, b.cmpi(CmpI::eq, tid, b.idx(0)), [&](LoweringBuilder &b) {
        loadRhsByTma(b, stageBase, fullBarrier(b, s), kt, item);
      });
    for (int64_t h = 0; h < kSlices; ++h) {
      Value sliceBase = add64(b, stageBase, h * sliceBytes());
      for (auto [dst, kr] : llvm::zip(mnDst, mnRow)) {
        Value k = b.add(sliceStartK(b, kt, h), kr);
        Value valid =
            kTail ? b.andi(mnOk, b.cmpi(CmpI::ult, k, b.idx(g.kDim))) : mnOk;
        Value rowOffset =
            nvvm::toI64(b, b.mul(b.mul(k, rhsStride1), elemBytes));
        Value src =
            kTail ? b.select(valid, add64(b, mnColAddr, rowOffset), rhsAddr)
                  : add64(b, mnColAddr, rowOffset);
        nvvm::cpAsync16(b, add64(b, sliceBase, dst), src,
                        b.select(valid, b.i32(16), b.i32(0)));
      }
    }
    nvvm::cpAsyncArriveNoinc(b, fullBarrier(b, s));
    if (handoff)
      when(b, b.cmpi(CmpI::eq, kt, b.idx(handoffStep())),
           [&](LoweringBuilder &b) { publishItem(b, tid, item, entry); });
  });
}

void WgmmaKernel::publishItem(LoweringBuilder &b, Value tid,
                              const WorkItem &item, ArrayRef<Value> entry) {
  // The previous item's epilogue has read its record and table.
  Value index = itemOrdinal(b, item.step);
  when(b, b.cmpi(CmpI::ne, index, b.idx(0)), [&](LoweringBuilder &b) {
    nvvm::mbarrierWait(b, tableEmpty(b), parity(b, b.sub(index, b.idx(1))));
  });
  // The record: the staged epilogue needs the expert and the column tile
  // only (its rows are in the table), which the copies keep live anyway.
  when(b, b.cmpi(CmpI::eq, tid, b.idx(0)), [&](LoweringBuilder &b) {
    Value fields[] = {item.expert, item.colTile};
    for (int64_t i = 0; i < 2; ++i)
      nvvm::storeShared(b, recordAddress(b, i), {b.toI32(fields[i])});
  });
  if (!entry.empty()) {
    nvvm::storeShared(b,
                      add64(b, rowTableAddress(b, b.idx(0)),
                            nvvm::toI64(b, b.mul(tid, b.idx(4)))),
                      {entry[0]});
    if (entry.size() > 1)
      nvvm::storeShared(b, factorTableAddress(b, tid), {entry[1]});
  }
  // Release: the consumers' wait orders these stores before their reads.
  nvvm::mbarrierArrive(b, tableFull(b));
}

WorkItem WgmmaKernel::receiveItem(LoweringBuilder &b, Value step) {
  Value index = itemOrdinal(b, step);
  nvvm::mbarrierWait(b, tableFull(b), parity(b, index));
  Value fields[2];
  for (int64_t i = 0; i < 2; ++i)
    fields[i] =
        b.toIndex(nvvm::loadShared(b, b.getI32Type(), recordAddress(b, i)));
  return WorkItem{fields[0], {}, {}, fields[1], step, {}};
}

/// The rhs tile of K step `kt` by TMA, in the layouts the cp.async loaders
/// write: K-major as two boxes of tileN / 2 rows (the gate and the up half
/// with concat GLU), MN-major as tileN / 64 boxes of 64 columns x 64 K rows.
/// The 3-D map ([E, rows, K] or [E, K, N]) zero-fills past each expert's
/// end, so K and N tails need no masking.
void WgmmaKernel::loadRhsByTma(LoweringBuilder &b, Value stage, Value barrier,
                               Value kt, const WorkItem &item) {
  // In a cluster both halves of a shared tile land here (one multicast by
  // each CTA): the expected bytes are the whole tile either way. (mxfp4:
  // one row of packed pairs a weight row, mxRowBytes for the stage's K.)
  nvvm::mbarrierArriveExpectTx(
      b, barrier, b.i32(mxfp4 ? tileN * mxRowBytes() : kSlices * tileN * 128));
  Value expert = b.toI32(item.expert);
  int64_t half = tileN / 2;
  // First rhs column of tile part `p` of `parts` equal parts.
  auto columnOf = [&](int64_t p, int64_t parts) -> Value {
    int64_t width = tileN / parts;
    if (!concat)
      return b.add(b.mul(item.colTile, b.idx(tileN)), b.idx(p * width));
    bool up = p * width >= half;
    Value c = b.add(b.mul(item.colTile, b.idx(half)),
                    b.idx(p * width - (up ? half : 0)));
    return up ? b.add(c, b.idx(g.outN)) : c;
  };
  if (mxfp4) {
    // Two boxes of tileN / 2 rows x mxRowBytes at byte kt * mxRowBytes of
    // K / 2.
    Value k0 = b.toI32(b.mul(kt, b.idx(mxRowBytes())));
    for (int64_t p = 0; p < 2; ++p)
      nvvm::tmaLoad3D(
          b, add64(b, mxWeightTile(b, stage), p * half * mxRowBytes()), rhsMap,
          barrier, {k0, b.toI32(columnOf(p, 2)), expert}, Value());
    return;
  }
  Value rhsBase = add64(b, stage, aBytes());
  // Box p of the tile's boxes: K-major two of tileN / 2 rows, MN-major
  // tileN / 64 of 64 columns.
  const int64_t boxes = g.transposed ? 2 : tileN / 64;
  // (Box p of each of the stage's kSlices K slices.)
  auto loadBox = [&](LoweringBuilder &b, int64_t p, Value ctaMask) {
    for (int64_t h = 0; h < kSlices; ++h) {
      Value dst =
          add64(b, rhsBase, h * sliceBytes() + p * (tileN / boxes) * 128);
      Value k0 = b.toI32(sliceStartK(b, kt, h));
      SmallVector<Value, 3> at =
          g.transposed
              ? SmallVector<Value, 3>{k0, b.toI32(columnOf(p, 2)), expert}
              : SmallVector<Value, 3>{b.toI32(columnOf(p, boxes)), k0, expert};
      nvvm::tmaLoad3D(b, dst, rhsMap, barrier, at, ctaMask);
    }
  };
  if (cluster == 1) {
    for (int64_t p = 0; p < boxes; ++p)
      loadBox(b, p, Value());
    return;
  }
  // Shared tile: CTA r multicasts boxes [r * boxes / 2, (r + 1) * boxes /
  // 2) to both CTAs; otherwise each CTA loads its whole (own) tile.
  scf::IfOp::create(
      b, item.multicast,
      [&](OpBuilder &nested, Location loc) {
        LoweringBuilder b(loc, nested);
        Value mask = arith::ConstantIntOp::create(b, b.getI16Type(), 3);
        Value upper = b.cmpi(CmpI::ne, clusterRank(b), b.idx(0));
        scf::IfOp::create(
            b, upper,
            [&](OpBuilder &nested, Location loc) {
              LoweringBuilder b(loc, nested);
              for (int64_t p = boxes / 2; p < boxes; ++p)
                loadBox(b, p, mask);
              scf::YieldOp::create(b);
            },
            [&](OpBuilder &nested, Location loc) {
              LoweringBuilder b(loc, nested);
              for (int64_t p = 0; p < boxes / 2; ++p)
                loadBox(b, p, mask);
              scf::YieldOp::create(b);
            });
        scf::YieldOp::create(b);
      },
      [&](OpBuilder &nested, Location loc) {
        LoweringBuilder b(loc, nested);
        for (int64_t p = 0; p < boxes; ++p)
          loadBox(b, p, Value());
        scf::YieldOp::create(b);
      });
}
