//===- WgmmaEpilogue.cpp - the Hopper engine's output paths
//-----------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The epilogues of the Hopper engine on the accumulator fragments
// (WgmmaEngine.cpp has the fragment layout): GLU, bias and routing-weight
// scaling (Epilogue.cpp's outputValue), then the stores: the main
// kernel's through the warpgroup's shared staging (whole scattered rows by
// 16-byte stores), the small-M kernel's through its transposed staging;
// plus the rows' destinations and routing weights they need (the main
// kernel's from the item handoff's row table, the small-M kernel's
// fetched before the MMAs). (Element stores straight from the fragments,
// v15, and rows copied out by cp.async.bulk, v44 / v52, were measured
// slower: bench/NOTES.md.)
//
//===----------------------------------------------------------------------===//

#include "WgmmaKernel.h"

#include "Utils/LowPrecision.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;
using namespace mlir::moe::gpu_lowering::wgmma;

WgmmaKernel::RowFactors WgmmaKernel::tableFactors(LoweringBuilder &b, Value ct,
                                                  Value cw) {
  Value wgRow0 = b.mul(cw, b.idx(64));
  RowFactors factors;
  Value warp = arith::ShRUIOp::create(b, ct, b.idx(5));
  Value lane = arith::AndIOp::create(b, ct, b.idx(31));
  Value row0 =
      b.add(b.mul(warp, b.idx(16)), arith::ShRUIOp::create(b, lane, b.idx(2)));
  for (int64_t h = 0; g.scale && h < 2; ++h)
    factors.h[h] = nvvm::loadShared(
        b, b.getF32Type(),
        factorTableAddress(b, b.add(wgRow0, b.add(row0, b.idx(8 * h)))));
  return factors;
}

SmallVector<Value> WgmmaKernel::rowEntry(LoweringBuilder &b,
                                         const WorkItem &item, Value r,
                                         bool withFactor) {
  bool factor = withFactor && g.scale;
  SmallVector<Type, 2> types = {b.getI32Type()};
  if (factor)
    types.push_back(b.getF32Type());
  return b.ifElse(
      b.cmpi(CmpI::ult, r, item.tileRows), types,
      [&](LoweringBuilder &b) -> SmallVector<Value> {
        RowTarget t = rowTarget(b, g, b.add(item.rowStart, r), factor);
        SmallVector<Value> v = {b.select(t.valid, b.toI32(t.dest), b.i32(-1))};
        if (factor)
          v.push_back(t.factor);
        return v;
      },
      [&](LoweringBuilder &b) -> SmallVector<Value> {
        SmallVector<Value> v = {b.i32(-1)};
        if (factor)
          v.push_back(b.f32(0.0f));
        return v;
      });
}

void WgmmaKernel::epilogueStaged(LoweringBuilder &b, Value ct, Value cw,
                                 const WorkItem &item, Value acc,
                                 const RowFactors &factors) {
  const int64_t outBytes = g.outElem.getIntOrFloatBitWidth() / 8;
  const int64_t passCols = kEpilogueRowBytes / outBytes;
  const int64_t vec = 16 / outBytes;
  const bool partialTiles = g.outN % outPerTile != 0;
  Value warp = arith::ShRUIOp::create(b, ct, b.idx(5));
  Value lane = arith::AndIOp::create(b, ct, b.idx(31));
  Value quad = arith::AndIOp::create(b, lane, b.idx(3));
  // Fragment rows of this thread within the warpgroup's 64: row0, row0 + 8
  // (both = lane / 4 mod 8, the swizzle key).
  Value row0 =
      b.add(b.mul(warp, b.idx(16)), arith::ShRUIOp::create(b, lane, b.idx(2)));
  Value swizzle = arith::ShRUIOp::create(b, lane, b.idx(2));
  Value colBase = b.mul(item.colTile, b.idx(outPerTile));
  Value staging = epilogueAddress(b, cw);
  auto value = [&](LoweringBuilder &b, int64_t i) -> Value {
    return LLVM::ExtractValueOp::create(b, acc, ArrayRef<int64_t>{i});
  };

  const Value *factor = factors.h;
  Value rowTable = rowTableAddress(b, cw);

  // Shared address of pass-local output column `cl` (+ `dynamic`
  // elements, the quad's part) of fragment row row0 + 8h. Staging rows are
  // 1024-aligned groups of 256 bytes, so for 16-bit outputs (chunk = a
  // constant, the quad's bytes within it) the address is a per-thread base
  // XOR a constant: two live registers instead of one per store.
  Value rowBase[2];
  for (int64_t h = 0; h < 2; ++h)
    rowBase[h] =
        nvvm::opaque(b, add64(b, staging,
                              nvvm::toI64(b, b.mul(b.add(row0, b.idx(8 * h)),
                                                   b.idx(kEpilogueRowBytes)))));
  // Where 16-byte chunk `chunk` of staging row `row` lies: at chunk
  // chunk ^ (row % 8), which puts the 8 rows of a fragment store in 8
  // different bank groups.
  auto physicalChunk = [&](LoweringBuilder &b, Value chunk, Value key) {
    return arith::XOrIOp::create(b, chunk, key).getResult();
  };
  auto sharedAddress = [&](LoweringBuilder &b, int64_t h, int64_t cl,
                           Value dynamic) -> Value {
    int64_t bytes = cl * outBytes;
    if (outBytes == 2) {
      // dynamic * 2 + bytes % 16 < 16: no carry out of the chunk.
      Value key = b.add(b.mul(swizzle, b.idx(16)), b.mul(dynamic, b.idx(2)));
      Value threadBase =
          arith::OrIOp::create(b, rowBase[h], nvvm::toI64(b, key));
      return arith::XOrIOp::create(b, threadBase, nvvm::i64(b, bytes));
    }
    Value all = b.add(b.idx(bytes), b.mul(dynamic, b.idx(outBytes)));
    Value chunk = arith::ShRUIOp::create(b, all, b.idx(4));
    Value within = arith::AndIOp::create(b, all, b.idx(15));
    Value physical =
        b.add(b.mul(physicalChunk(b, chunk, swizzle), b.idx(16)), within);
    return add64(b, rowBase[h], nvvm::toI64(b, physical));
  };
  auto outValue = [&](LoweringBuilder &b, int64_t h, Value c,
                      ArrayRef<Value> v) {
    Value col = partialTiles ? b.minIdx(c, b.idx(g.outN - 1)) : c;
    return outputValue(b, g, factor[h], item.expert, col, v);
  };

  Value wgBarrier = b.toI32(b.add(cw, b.idx(1)));
  // quantizesOut: the amax of each fragment row's outputs (as stored), the
  // thread's share of them; the tile is one pass (128 16-bit columns).
  const bool quantize = quantizesOut();
  Value amax[2] = {b.f32(0.0f), b.f32(0.0f)};
  for (int64_t lo = 0; lo < outPerTile; lo += passCols) {
    const int64_t width = std::min(passCols, outPerTile - lo);
    // 1. Fragments -> staging (this pass's columns [lo, lo + width)); both
    // rows of a column at once, so its bias is read once and not kept.
    Value dynamic = quadColumn(b, quad);
    for (int64_t j = lo / groupWidth(); j < (lo + width) / groupWidth(); ++j) {
      for (int64_t h = 0; h < 2; ++h) {
        FragmentGroup group = fragmentGroup(j, h);
        SmallVector<Value, 2> columns;
        for (auto [p, indices] : llvm::enumerate(group.acc)) {
          Value c = b.add(colBase, b.add(b.idx(group.local + p), dynamic));
          SmallVector<Value, 2> v;
          for (int64_t i : indices)
            v.push_back(value(b, i));
          columns.push_back(outValue(b, h, c, v));
          if (quantize)
            amax[h] = arith::MaximumFOp::create(
                b, amax[h], math::AbsFOp::create(b, b.toF32(columns.back())));
        }
        // Adjacent columns of one thread go as one (vector) store.
        nvvm::storeShared(b, sharedAddress(b, h, group.local - lo, dynamic),
                          columns);
      }
    }
    if (quantize) {
      // A row's 128 columns are spread over the four threads of a quad:
      // its amax by two shuffles, its scale (quantizeRows' rule) into the
      // factor table (unused without routing weights) for the stores.
      for (int64_t h = 0; h < 2; ++h) {
        for (int64_t offset = 1; offset <= 2; offset *= 2)
          amax[h] = arith::MaximumFOp::create(
              b, amax[h],
              warpShuffle(b, amax[h], offset, gpu::ShuffleMode::XOR));
        Value scale = activationScale(b, amax[h], g.quantizedOut->ue8m0);
        Value row = b.add(b.mul(cw, b.idx(64)), b.add(row0, b.idx(8 * h)));
        when(b, b.cmpi(CmpI::eq, quad, b.idx(0)), [&](LoweringBuilder &b) {
          nvvm::storeShared(b, factorTableAddress(b, row), {scale});
        });
      }
      nvvm::namedBarrier(b, wgBarrier, 128);
      epilogueQuantizedStores(b, ct, cw, item, staging);
      // The next item overwrites the staging and the scales.
      nvvm::namedBarrier(b, wgBarrier, 128);
      return;
    }
    nvvm::namedBarrier(b, wgBarrier, 128);

    // 2. Staging -> out: 16-byte chunks, a row's chunks in consecutive
    // threads (coalesced; scattered rows are still whole segments).
    const int64_t chunksPerRow = width * outBytes / 16;
    const int64_t rowsPerIter = 128 / chunksPerRow;
    auto threadStores = [&](LoweringBuilder &b) {
      Value chunk = arith::RemUIOp::create(b, ct, b.idx(chunksPerRow));
      Value rsub = arith::DivUIOp::create(b, ct, b.idx(chunksPerRow));
      // Rows of chunksPerRow chunks that do not divide the 128 threads
      // (tile-n not a power of two): the threads past the last whole row
      // group store nothing.
      if (128 % chunksPerRow != 0)
        rsub =
            b.select(b.cmpi(CmpI::ult, ct, b.idx(rowsPerIter * chunksPerRow)),
                     rsub, b.idx(64));
      Value col = b.add(b.add(colBase, b.idx(lo)), b.mul(chunk, b.idx(vec)));
      Value whole = b.cmpi(CmpI::ule, b.add(col, b.idx(vec)), b.idx(g.outN));
      // Shared address of this thread's chunk of staging row `rowW`.
      auto stagedChunk = [&](LoweringBuilder &b, Value rowW) {
        Value physical =
            physicalChunk(b, chunk, arith::AndIOp::create(b, rowW, b.idx(7)));
        return add64(b, staging,
                     nvvm::toI64(b, b.add(b.mul(rowW, b.idx(kEpilogueRowBytes)),
                                          b.mul(physical, b.idx(16)))));
      };
      // Written by the producer (item handoff): -1 for rows past the tile
      // or dropped.
      auto destOf = [&](LoweringBuilder &b, Value rowW) {
        return nvvm::loadShared(
            b, b.getI32Type(),
            add64(b, rowTable, nvvm::toI64(b, b.mul(rowW, b.idx(4)))));
      };
      // 16-byte stores (the common case): kStoreUnroll rows per round,
      // their row-table and staging reads issued together before the
      // stores, so that the shared-memory latency is paid once per round
      // rather than twice per row (bench/NOTES.md v49). Rows past the
      // warpgroup's 64 read row 63 and store nothing. Not unrolled
      // further: the accumulators of later passes are live.
      constexpr int64_t kStoreUnroll = 4;
      scf::IfOp::create(
          b, b.andi(whole, outVectorOk),
          [&](OpBuilder &nested, Location loc) {
            LoweringBuilder b(loc, nested);
            forEach(b, rsub, b.idx(64), b.idx(rowsPerIter * kStoreUnroll),
                    [&](LoweringBuilder &b, Value rowW) {
                      SmallVector<Value, kStoreUnroll> rows, dests, values;
                      for (int64_t u = 0; u < kStoreUnroll; ++u) {
                        Value r = b.add(rowW, b.idx(u * rowsPerIter));
                        Value in = b.cmpi(CmpI::ult, r, b.idx(64));
                        Value rc = b.minIdx(r, b.idx(63));
                        rows.push_back(rc);
                        dests.push_back(b.select(in, destOf(b, rc), b.i32(-1)));
                      }
                      for (int64_t u = 0; u < kStoreUnroll; ++u)
                        values.push_back(
                            nvvm::loadShared16(b, stagedChunk(b, rows[u])));
                      for (int64_t u = 0; u < kStoreUnroll; ++u)
                        when(b, b.cmpi(CmpI::sge, dests[u], b.i32(0)),
                             [&](LoweringBuilder &b) {
                               nvvm::storeGlobal16(
                                   b, values[u],
                                   outputAddress(b, b.toIndex(dests[u]), col));
                             });
                    });
            scf::YieldOp::create(b);
          },
          [&](OpBuilder &nested, Location loc) {
            LoweringBuilder b(loc, nested);
            // Element stores: columns past outN, or an output whose rows
            // are not 16-byte aligned.
            forEach(b, rsub, b.idx(64), b.idx(rowsPerIter),
                    [&](LoweringBuilder &b, Value rowW) {
                      Value dest = destOf(b, rowW);
                      when(b, b.cmpi(CmpI::sge, dest, b.i32(0)),
                           [&](LoweringBuilder &b) {
                             Value destRow = b.toIndex(dest);
                             Value src = stagedChunk(b, rowW);
                             for (int64_t e = 0; e < vec; ++e) {
                               Value c = b.add(col, b.idx(e));
                               when(b, b.cmpi(CmpI::ult, c, b.idx(g.outN)),
                                    [&](LoweringBuilder &b) {
                                      Value v = nvvm::loadShared(
                                          b, g.outElem,
                                          add64(b, src, e * outBytes));
                                      b.store(v, g.out, {destRow, c});
                                    });
                             }
                           });
                    });
            scf::YieldOp::create(b);
          });
      // The next pass (or item) overwrites the staging.
      nvvm::namedBarrier(b, wgBarrier, 128);
    };
    threadStores(b);
  }
}

void WgmmaKernel::epilogueQuantizedStores(LoweringBuilder &b, Value ct,
                                          Value cw, const WorkItem &item,
                                          Value staging) {
  // Thread ct takes columns 16 (ct % 8) .. + 15 (staging chunks 2 (ct % 8)
  // and + 1) of rows ct / 8 + 16 u, u < 4: all four rows' loads first.
  constexpr int64_t kRows = 4, kRowStride = 16;
  Value chunk = arith::AndIOp::create(b, ct, b.idx(7));
  Value rsub = arith::ShRUIOp::create(b, ct, b.idx(3));
  Value col =
      b.add(b.mul(item.colTile, b.idx(outPerTile)), b.mul(chunk, b.idx(16)));
  // Through opaque moves: the rows' shared addresses are loop-invariant,
  // and hoisted out of the item loop they were kept live across the MMAs
  // (spilled).
  Value rowTable = nvvm::opaque(b, rowTableAddress(b, cw));
  Value scaleTable =
      nvvm::opaque(b, factorTableAddress(b, b.mul(cw, b.idx(64))));
  staging = nvvm::opaque(b, staging);
  auto elemType = VectorType::get({8}, g.outElem);
  SmallVector<Value, kRows> dests, scales;
  SmallVector<SmallVector<Value, 2>, kRows> halves;
  for (int64_t u = 0; u < kRows; ++u) {
    Value rowW = b.add(rsub, b.idx(u * kRowStride));
    dests.push_back(nvvm::loadShared(
        b, b.getI32Type(),
        add64(b, rowTable, nvvm::toI64(b, b.mul(rowW, b.idx(4))))));
    scales.push_back(nvvm::loadShared(
        b, b.getF32Type(),
        add64(b, scaleTable, nvvm::toI64(b, b.mul(rowW, b.idx(4))))));
    // Staging chunk c of row rowW lies at chunk c ^ (rowW % 8).
    Value key = arith::AndIOp::create(b, rowW, b.idx(7));
    SmallVector<Value, 2> v;
    for (int64_t c = 0; c < 2; ++c) {
      Value physical = arith::XOrIOp::create(
          b, b.add(b.mul(chunk, b.idx(2)), b.idx(c)), key);
      v.push_back(nvvm::loadShared16(
          b, add64(b, staging,
                   nvvm::toI64(b, b.add(b.mul(rowW, b.idx(kEpilogueRowBytes)),
                                        b.mul(physical, b.idx(16)))))));
    }
    halves.push_back(v);
  }
  // The codes' and scales' addresses and strides, read here rather than
  // kept from the kernel's start (that spilled the main kernel's
  // consumers).
  Value codesAddr = nvvm::bufferAddress(b, g.quantizedOut->codes);
  Value codesStride = nvvm::bufferStride(b, g.quantizedOut->codes, 0);
  Value codeScalesAddr = nvvm::bufferAddress(b, g.quantizedOut->scales);
  Value codeScalesStride = nvvm::bufferStride(b, g.quantizedOut->scales, 0);
  auto f8 = Float8E4M3FNType::get(b.getContext());
  for (int64_t u = 0; u < kRows; ++u) {
    SmallVector<Value, 16> x;
    for (Value v : halves[u]) {
      Value elems = LLVM::BitcastOp::create(b, elemType, v);
      for (int64_t e = 0; e < 8; ++e)
        x.push_back(b.toF32(LLVM::ExtractElementOp::create(
            b, elems, arith::ConstantIntOp::create(b, b.getI32Type(), e))));
    }
    // x / scale, correctly rounded as quantizeRows' division, by
    // Markstein's correction: with y = RN(1 / scale) and q = RN(x y)
    // (within an ulp), the residual x - q scale is exact in an FMA and
    // RN(q + residual y) = RN(x / scale) barring overflow and underflow,
    // which the quotients of a row (at most 448 in magnitude; any below
    // 2^-10 rounds to an e4m3 zero either way) do not reach. An infinite
    // scale (an inf in the row) makes y = 0 and the residual NaN: q
    // itself is then x / scale (0, or NaN for an inf). Four instructions
    // a value instead of a division's fifteen and its branch: the
    // epilogue's quantization is on the MMAs' critical path.
    Value y = b.div(b.f32(1.0f), scales[u]);
    Value finite = arith::CmpFOp::create(b, arith::CmpFPredicate::ONE,
                                         math::AbsFOp::create(b, scales[u]),
                                         b.f32(INFINITY));
    auto quotient = [&](Value xv) -> Value {
      Value q = b.mul(xv, y);
      Value residual =
          math::FmaOp::create(b, arith::NegFOp::create(b, q), scales[u], xv);
      return b.select(finite, math::FmaOp::create(b, residual, y, q), q);
    };
    // cvt.rn.satfinite.e4m3x2.f32 of (x[i + 1], x[i]): x[i] in the low
    // byte; two pairs a word, the first column in the lowest byte.
    SmallVector<Value, 4> words;
    for (int64_t w = 0; w < 4; ++w) {
      Value pair[2];
      for (int64_t p = 0; p < 2; ++p) {
        int64_t i = 4 * w + 2 * p;
        pair[p] = arith::ExtUIOp::create(
            b, b.getI32Type(),
            NVVM::ConvertF32x2ToF8x2Op::create(
                b, b.getI16Type(), quotient(x[i + 1]), quotient(x[i]),
                NVVM::FPRoundingMode::RN, NVVM::SaturationMode::SATFINITE,
                /*relu=*/false, f8));
      }
      words.push_back(arith::OrIOp::create(
          b, pair[0], arith::ShLIOp::create(b, pair[1], b.i32(16))));
    }
    // Written by the producer (item handoff): -1 for rows past the tile.
    when(b, b.cmpi(CmpI::sge, dests[u], b.i32(0)), [&](LoweringBuilder &b) {
      Value dest = b.toIndex(dests[u]);
      Value codeOffset = b.add(b.mul(dest, codesStride), col);
      nvvm::storeGlobal(b, add64(b, codesAddr, nvvm::toI64(b, codeOffset)),
                        words);
      when(b, b.cmpi(CmpI::eq, chunk, b.idx(0)), [&](LoweringBuilder &b) {
        Value scaleOffset = b.add(b.mul(dest, codeScalesStride), item.colTile);
        Value address = add64(b, codeScalesAddr,
                              nvvm::toI64(b, b.mul(scaleOffset, b.idx(4))));
        LLVM::StoreOp::create(b, scales[u], nvvm::globalPtr(b, address), 4);
      });
    });
  }
}

WgmmaKernel::SwapTargets
WgmmaKernel::prefetchSwapTargets(LoweringBuilder &b, Value tid,
                                 const WorkItem &item) {
  const int64_t threads = 128 * consumers;
  const int64_t chunks = swapChunks();
  SwapTargets targets;
  // Each staging pass's chunks split evenly over the threads. The 192-row
  // MXFP4 kernel loads its targets in the epilogue (held through the MMA
  // loop, they made its consumers spill 24 bytes).
  const int64_t passTokens = swapStagingTokens(tileN);
  if ((std::min(tileM, passTokens) * chunks) % threads != 0 || tileN > 128)
    return targets;
  Value u0 = b.sub(tid, b.idx(128));
  for (int64_t i = 0; i < tileM * chunks / threads; ++i) {
    Value token =
        arith::DivUIOp::create(b, b.add(u0, b.idx(i * threads)), b.idx(chunks));
    SmallVector<Value> t = rowEntry(b, item, token, /*withFactor=*/true);
    targets.dest.push_back(t[0]);
    targets.factor.push_back(g.scale ? t[1] : Value());
  }
  return targets;
}

void WgmmaKernel::epilogueSwapped(LoweringBuilder &b, Value tid, Value cw,
                                  const WorkItem &item, Value acc,
                                  const SwapTargets &targets) {
  const int64_t outBytes = g.outElem.getIntOrFloatBitWidth() / 8;
  const int64_t vec = 16 / outBytes;
  const int64_t pitch = tileN + 4; // f32 per staged token row
  const int64_t threads = 128 * consumers;
  Value ct = arith::AndIOp::create(b, tid, b.idx(127));
  Value warp = arith::ShRUIOp::create(b, ct, b.idx(5));
  Value lane = arith::AndIOp::create(b, ct, b.idx(31));
  Value quad = arith::AndIOp::create(b, lane, b.idx(3));
  Value staging = add64(b, base, headerBytes() + stages * stageBytes());
  auto stagedAt = [&](LoweringBuilder &b, Value token, Value column) {
    return add64(b, staging,
                 nvvm::toI64(b, b.mul(b.add(b.mul(token, b.idx(pitch)), column),
                                      b.idx(4))));
  };
  // 1. Fragment element i = 4j + 2h + p is rhs column (fragment row)
  // 16 * warp + lane / 4 + 8h of this warpgroup's 64, token (fragment
  // column) 8j + 2 * (lane % 4) + p. With the pitch = 4 mod 32 words, a
  // warp's 32 stores of one element hit 32 banks.
  Value column0 = b.add(b.add(b.mul(cw, b.idx(64)), b.mul(warp, b.idx(16))),
                        arith::ShRUIOp::create(b, lane, b.idx(2)));
  Value token0 = b.mul(quad, b.idx(2));
  // Tiles of more than swapStagingTokens(tileN) tokens: the staging holds one
  // pass of that many tokens at a time.
  const int64_t passTokens = std::min(tileM, swapStagingTokens(tileN));
  const int64_t passes = tileM / passTokens;
  for (int64_t pass = 0; pass < passes; ++pass) {
    for (int64_t j = 0; j < passTokens / 8; ++j)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t p = 0; p < 2; ++p) {
          Value v = LLVM::ExtractValueOp::create(
              b, acc,
              ArrayRef<int64_t>{4 * (j + pass * passTokens / 8) + 2 * h + p});
          nvvm::storeShared(b,
                            stagedAt(b, b.add(token0, b.idx(8 * j + p)),
                                     b.add(column0, b.idx(8 * h))),
                            {v});
        }
    nvvm::namedBarrier(b, b.i32(1), threads);

    // 2. Thread u of the consumers takes output chunks (token, vec columns)
    // u, u + threads, ...: the rhs columns of output column c are 2c, 2c + 1
    // (interleaved GLU), c and tileN / 2 + c (concat), c (plain).
    const int64_t chunks = swapChunks();
    Value colBase = b.mul(item.colTile, b.idx(outPerTile));
    // Output chunk `chunk` of `token` (the pass's staged token), whose row
    // goes to `target` (valid).
    auto storeChunk = [&](LoweringBuilder &b, Value token, Value chunk,
                          const RowTarget &target) {
      Value local0 = b.mul(chunk, b.idx(vec));
      Value col0 = b.add(colBase, local0);
      SmallVector<Value> values;
      for (int64_t e = 0; e < vec; ++e) {
        Value local = b.add(local0, b.idx(e));
        SmallVector<Value, 2> accs;
        if (interleaved()) {
          Value pair = b.mul(local, b.idx(2));
          accs = {nvvm::loadShared(b, b.getF32Type(), stagedAt(b, token, pair)),
                  nvvm::loadShared(b, b.getF32Type(),
                                   stagedAt(b, token, b.add(pair, b.idx(1))))};
        } else {
          accs.push_back(
              nvvm::loadShared(b, b.getF32Type(), stagedAt(b, token, local)));
          if (concat)
            accs.push_back(nvvm::loadShared(
                b, b.getF32Type(),
                stagedAt(b, token, b.add(local, b.idx(tileN / 2)))));
        }
        Value c = b.minIdx(b.add(col0, b.idx(e)), b.idx(g.outN - 1));
        values.push_back(
            outputValue(b, g, target.factor, item.expert, c, accs));
      }
      Value whole =
          b.andi(outVectorOk,
                 b.cmpi(CmpI::ule, b.add(col0, b.idx(vec)), b.idx(g.outN)));
      scf::IfOp::create(
          b, whole,
          [&](OpBuilder &nested, Location loc) {
            LoweringBuilder b(loc, nested);
            nvvm::storeGlobal(b, outputAddress(b, target.dest, col0), values);
            scf::YieldOp::create(b);
          },
          [&](OpBuilder &nested, Location loc) {
            LoweringBuilder b(loc, nested);
            for (int64_t e = 0; e < vec; ++e) {
              Value c = b.add(col0, b.idx(e));
              when(b, b.cmpi(CmpI::ult, c, b.idx(g.outN)),
                   [&](LoweringBuilder &b) {
                     b.store(values[e], g.out, {target.dest, c});
                   });
            }
            scf::YieldOp::create(b);
          });
    };
    Value u0 = b.sub(tid, b.idx(128));
    Value passStart = b.idx(pass * passTokens);
    if (!targets.dest.empty()) {
      // The targets came before the MMAs (prefetchSwapTargets); the pass's
      // are a contiguous share of them.
      int64_t perPass = static_cast<int64_t>(targets.dest.size()) / passes;
      for (int64_t i = pass * perPass; i < (pass + 1) * perPass; ++i) {
        Value dest = targets.dest[i];
        Value u = b.add(u0, b.idx((i - pass * perPass) * threads));
        Value token = arith::DivUIOp::create(b, u, b.idx(chunks));
        Value chunk = arith::RemUIOp::create(b, u, b.idx(chunks));
        when(b, b.cmpi(CmpI::sge, dest, b.i32(0)), [&](LoweringBuilder &b) {
          RowTarget target{b.toIndex(dest), Value(), targets.factor[i]};
          storeChunk(b, token, chunk, target);
        });
      }
    } else {
      forEach(b, u0, b.idx(passTokens * chunks), b.idx(threads),
              [&](LoweringBuilder &b, Value u) {
                Value token = arith::DivUIOp::create(b, u, b.idx(chunks));
                Value chunk = arith::RemUIOp::create(b, u, b.idx(chunks));
                Value row = b.add(passStart, token);
                when(b, b.cmpi(CmpI::ult, row, item.tileRows),
                     [&](LoweringBuilder &b) {
                       RowTarget target =
                           rowTarget(b, g, b.add(item.rowStart, row));
                       when(b, target.valid, [&](LoweringBuilder &b) {
                         storeChunk(b, token, chunk, target);
                       });
                     });
              });
    }
    // The next pass's (or item's) fragments overwrite the staging.
    nvvm::namedBarrier(b, b.i32(1), threads);
  }
}
