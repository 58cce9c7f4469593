//===- WgmmaEngine.cpp - the Hopper expert GEMM engine (sm_90a) -----------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// out[dest(row), c] = epilogue(sum_k lhs[src(row), k] * rhs[e, col(c), k])
// on the Hopper tensor cores, for 16-bit lhs / rhs; rhs K-major ([E, N, K],
// transpose_rhs) or MN-major ([E, K, N]).
//
// The engine's parts: this file (the design below, the persistent item
// walk, the consumers' MMA loop, the kernel and its launch, the host-side
// tensor maps), WgmmaLoaders.cpp (the producer's operand loaders and the
// item handoff), WgmmaEpilogue.cpp (the output paths), WgmmaKernel.h (the
// kernel builder they share).
//
// - Block: 128 * (1 + tileM / 64) threads. Warpgroup 0 is the producer,
//   warpgroups 1.. each consume 64 rows x tileN of the tileM x tileN tile
//   with wgmma m64n<tileN>k16 (f32 accumulators in registers).
//   setmaxnreg moves registers from the producer to the consumers (two
//   of them, tileN >= 128: WgmmaKernel::registerSplit).
// - Operand loaders: the producer's 128 threads copy the lhs rows (through
//   `gather`; rows outside [0, rows(lhs)) and K past the end read zero) and
//   the rhs tile with 16-byte cp.async, applying the 128-byte swizzle by
//   hand (chunk c of 128-byte row r lands at chunk c ^ (r % 8)), which is
//   the layout a TMA SWIZZLE_128B copy writes and the wgmma descriptors
//   describe. A K-major tile is rows of 64 K elements; an MN-major rhs tile
//   is tileN / 64 columns of 64 K rows x 64 N elements.
// - Pipeline: `stages` shared-memory stages of tileM + tileN rows of 128
//   bytes (64 K elements). full[s] completes when the 128 producer threads'
//   copies have landed (cp.async.mbarrier.arrive.noinc), empty[s] when
//   every consumer thread has released the stage; consumers keep one wgmma
//   group in flight and release the stage before it.
// - Persistent grid: min(work items, SMs) blocks walk the work items (row
//   tile of the ragged groups x column tile; within an expert the row tile
//   runs fastest, for weight reuse in L2) with stride gridDim.x; a
//   running step counter carries the stage / phase across items, so the
//   producer fills the next item's stages while the consumers run the
//   epilogue.
// - Item handoff (main kernel, bench/NOTES.md v51): only the producer
//   walks the experts. Per item it loads its row's destination and routing
//   weight when it starts the item and, at the item's handoff step (the
//   last it issues before the item's first step is consumed), once the
//   consumers are done with the previous item (tableEmpty), writes the
//   item's record and the row table into shared memory (tableFull). The
//   consumers need only the step counter for the MMAs and read the rest
//   after them, so no global load stands between two items' MMAs.
// - Epilogue on the accumulator fragments (row = 16 * warp + lane / 4
//   (+8), column = 8 * j + 2 * (lane % 4) (+1)): GLU pairs are in one
//   thread (interleaved: adjacent columns; concat: the tile holds the gate
//   half and the up half of the same output columns), then Epilogue.cpp
//   (fragmentGroup describes the layout). The values go to the
//   warpgroup's staging in shared memory, then each row leaves as 16-byte
//   stores; the rows' destinations and routing weights come from the row
//   table (the item handoff).
// - The L2 reuse of a weight tile across an expert's row tiles rests on
//   the blocks that share it running in step (bench/NOTES.md v9).
// - 2-CTA clusters (config.cluster = 2, the cost model's default with TMA
//   weights; bench/NOTES.md v12): the host launches the kernel in clusters
//   of two when the experts average at least one row tile, else without
//   clusters (the cluster size is a launch operand, one kernel either
//   way). Coupled, a work unit is an expert's pair of row tiles x a column
//   tile: each CTA multicasts half of the weight tile into both CTAs
//   (TMA, mask 0b11) and gathers its own rows; an odd last row tile goes
//   to the pair as two column tiles, each CTA loading its own weights. The
//   empty barriers count two arrivals per consumer warpgroup: here and
//   (mapa) on the peer, whose producer writes into this CTA; uncoupled
//   both land here and the units are those of the kernel without
//   clusters (every shift 0, rank 0).
//
//===----------------------------------------------------------------------===//

#include "WgmmaKernel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;
using namespace mlir::moe::gpu_lowering::wgmma;

Value gpu_lowering::wgmmaOperandsAligned(LoweringBuilder &b,
                                         const GemmOperands &g) {
  Value lhsOk = nvvm::rowsAligned16(b, g.lhs, {0}, 1);
  Value ok = b.andi(lhsOk, nvvm::rowsAligned16(b, g.rhs, {0, 1}, 2));
  // mxfp4: a stage's scale bytes of a row are read as adjacent bytes.
  if (g.mxfp4())
    ok = b.andi(ok, b.cmpi(arith::CmpIPredicate::eq,
                           nvvm::bufferStride(b, g.rhsScale, 2), b.idx(1)));
  return ok;
}

void WgmmaKernel::forEachItem(LoweringBuilder &b, Value tid, Value blockX,
                              Value gridX, ItemBody body, bool walk) {
  if (cluster > 1)
    return forEachClusterItem(b, tid, blockX, gridX, body, walk);
  Value zero = b.idx(0);
  // The block's first item by the whole warp (RaggedTiles::locate): row
  // tile blockX / C. Expert e owns items [before * C, (before + tiles) *
  // C).
  Value lane = arith::AndIOp::create(b, tid, b.idx(kWarpSize - 1));
  auto tilesOf = [&](LoweringBuilder &b, Value rows) {
    return ragged.tilesOfRows(b, rows);
  };
  RaggedTiles::Start start =
      ragged.locate(b, lane, b.div(blockX, b.idx(colTiles)), tilesOf);
  Value totalItems = b.mul(start.total, b.idx(colTiles));
  b.forLoop(
      blockX, totalItems, gridX, {start.expert, start.before, zero},
      [&](LoweringBuilder &b, Value item,
          ValueRange state) -> SmallVector<Value> {
        Value next = b.add(state[2], b.idx(kSteps));
        if (!walk) {
          body(b, WorkItem{{}, {}, {}, {}, state[2], {}});
          return {state[0], state[1], next};
        }
        // Within an expert the row tile runs fastest, so the blocks
        // of one wave share each rhs tile (read from DRAM once) and
        // the expert's lhs rows stay in L2 across column tiles. The
        // item's expert: a short walk from the last one, or (small-M
        // kernel, locateEach) found again by the whole warp.
        Value expert, before;
        if (locateEach) {
          RaggedTiles::Start at =
              ragged.locate(b, lane, b.div(item, b.idx(colTiles)), tilesOf);
          expert = at.expert;
          before = at.before;
        } else {
          std::tie(expert, before) = ragged.advance(b, item, state[0], state[1],
                                                    colTiles, advanceUnroll);
        }
        Value lo = ragged.offsetAt(b, expert);
        Value hi = ragged.offsetAt(b, b.add(expert, b.idx(1)));
        Value tiles = b.maxIdx(ragged.tilesIn(b, lo, hi), b.idx(1));
        Value local = b.sub(item, b.mul(before, b.idx(colTiles)));
        // 32-bit: a 64-bit division becomes a branch between the
        // 32- and 64-bit forms (NVPTX's slow-division bypass), which
        // LLVM placed before the consumer's last wgmma wait, and
        // ptxas then serialised the wgmma (C7520).
        Value colTile = b.toIndex(
            arith::DivUIOp::create(b, b.toI32(local), b.toI32(tiles)));
        Value rowInExpert = b.sub(local, b.mul(colTile, tiles));
        Value rowStart = b.add(lo, b.mul(rowInExpert, b.idx(tileM)));
        Value tileRows = b.minIdx(b.sub(hi, rowStart), b.idx(tileM));
        body(b, WorkItem{expert, rowStart, tileRows, colTile, state[2], {}});
        return {expert, before, next};
      });
}

Value WgmmaKernel::clusterUnits(LoweringBuilder &b, Value rows) const {
  // Uncoupled the shift is 0: tiles "pairs" of one tile, no odd tile.
  Value shift = coupledShift ? coupledShift : b.idx(0);
  Value tiles = ragged.tilesOfRows(b, rows);
  Value pairs = arith::ShRUIOp::create(b, tiles, shift);
  Value odd = arith::AndIOp::create(b, tiles, shift);
  return b.add(b.mul(pairs, b.idx(colTiles)),
               b.mul(odd, b.idx((colTiles + 1) / 2)));
}

void WgmmaKernel::forEachClusterItem(LoweringBuilder &b, Value tid,
                                     Value blockX, Value gridX, ItemBody body,
                                     bool walk) {
  // Coupled: clusters are consecutive block pairs and both CTAs walk the
  // same units; uncoupled (no clusters; every shift below is 0, the rank
  // 0): every block walks the items on its own, as forEachItem.
  Value zero = b.idx(0);
  Value shift = coupledShift ? coupledShift : zero;
  Value start = arith::ShRUIOp::create(b, blockX, shift);
  Value stride = arith::ShRUIOp::create(b, gridX, shift);
  auto unitsOf = [&](LoweringBuilder &b, Value rows) {
    return clusterUnits(b, rows);
  };
  Value lane = arith::AndIOp::create(b, tid, b.idx(kWarpSize - 1));
  RaggedTiles::Start first = ragged.locate(b, lane, start, unitsOf);
  b.forLoop(start, first.total, stride, {first.expert, first.before, zero},
            [&](LoweringBuilder &b, Value unit,
                ValueRange state) -> SmallVector<Value> {
              Value next = b.add(state[2], b.idx(kSteps));
              if (!walk) {
                body(b, WorkItem{{}, {}, {}, {}, state[2], {}});
                return {state[0], state[1], next};
              }
              // Expert e's units: its row-tile pairs (uncoupled: its row tiles)
              // for every column tile, the pair index fastest (the pairs of a
              // wave share each weight tile in L2); coupled, then an odd last
              // row tile's units, each two column tiles (one per CTA). (Taking
              // the odd tile's unit next to the pairs of its two columns cut
              // DRAM reads but not time at the power cap: bench/NOTES.md v67.)
              auto [expert, before] = ragged.advanceUnits(
                  b, unit, state[0], state[1], unitsOf, advanceUnroll);
              Value lo = ragged.offsetAt(b, expert);
              Value hi = ragged.offsetAt(b, b.add(expert, b.idx(1)));
              Value tiles = ragged.tilesOfRows(b, ragged.rowsIn(b, lo, hi));
              Value local = b.sub(unit, before);
              Value pairs = arith::ShRUIOp::create(b, tiles, shift);
              Value safePairs = b.maxIdx(pairs, b.idx(1));
              // The unit's place among the pairs (inPairs, pairCol, pair), or
              // the first of the odd unit's two column tiles (oddCol).
              Value pairUnits = b.mul(pairs, b.idx(colTiles));
              Value inPairs = b.cmpi(CmpI::ult, local, pairUnits);
              Value pairCol = arith::DivUIOp::create(b, local, safePairs);
              Value pair = arith::RemUIOp::create(b, local, safePairs);
              Value oddUnit = b.select(inPairs, zero, b.sub(local, pairUnits));
              Value oddCol = b.mul(oddUnit, b.idx(2));
              Value rank = cluster > 1 ? clusterRank(b) : zero;
              Value colTile = b.select(inPairs, pairCol, b.add(oddCol, rank));
              Value rowTile = b.select(
                  inPairs, b.add(arith::ShLIOp::create(b, pair, shift), rank),
                  b.sub(b.maxIdx(tiles, b.idx(1)), b.idx(1)));
              Value rowStart = b.add(lo, b.mul(rowTile, b.idx(tileM)));
              // The second CTA of an odd column count's last pair has no tile:
              // no rows, and the last column tile in its place, so that what it
              // still reads (weights, the bias of every staged column) is in
              // bounds (memcheck caught the bias read past the end).
              Value has = b.andi(b.cmpi(CmpI::ult, rowStart, hi),
                                 b.cmpi(CmpI::ult, colTile, b.idx(colTiles)));
              Value tileRows = b.select(
                  has, b.minIdx(b.sub(hi, rowStart), b.idx(tileM)), zero);
              colTile = b.minIdx(colTile, b.idx(colTiles - 1));
              Value multicast;
              if (cluster > 1) {
                multicast = b.andi(coupledFlag, inPairs);
              }
              body(b, WorkItem{expert, rowStart, tileRows, colTile, state[2],
                               multicast});
              return {expert, before, next};
            });
}

void WgmmaKernel::releaseStage(LoweringBuilder &b, Value ct, Value s) {
  if (cluster == 1) {
    nvvm::mbarrierArrive(b, emptyBarrier(b, s));
    return;
  }
  // One thread per warpgroup (its wgmma.wait_group covers the whole
  // warpgroup's MMA) arrives on this CTA's barrier and on the peer's
  // (rank ^ 1); uncoupled the "peer" is this CTA (rank 0, shift 0), so
  // both arrivals land here and the count is the same. (With per-thread
  // arrivals a released peer could run a round ahead and arrive in a
  // phase this CTA's late threads have not finished.)
  when(b, b.cmpi(CmpI::eq, ct, b.idx(0)), [&](LoweringBuilder &b) {
    nvvm::mbarrierArrive(b, emptyBarrier(b, s));
    Value peer = arith::XOrIOp::create(b, clusterRank(b), coupledShift);
    nvvm::mbarrierArriveRemote(b, emptyBarrier(b, s), b.toI32(peer));
  });
}

void WgmmaKernel::consumeTile(LoweringBuilder &b, Value tid, Value cw,
                              const WorkItem &item) {
  if (mxfp4)
    return g.format == WeightFormat::mxfp4_hopper
               ? consumeMxfp4Hopper(b, tid, cw, item)
               : consumeMxfp4(b, tid, cw, item);
  Value zero = b.idx(0);
  Value ct = arith::AndIOp::create(b, tid, b.idx(127));
  // Small-M: the MMA is m64 (this warpgroup's 64 rhs rows) x n tileM (the
  // tokens), both operands K-major.
  const int64_t mmaN = swap ? tileM : tileN;
  Type accType = nvvm::wgmmaAccumulatorType(b, mmaN);
  NVVM::WGMMATypes input = fp8                 ? NVVM::WGMMATypes::e4m3
                           : g.inElem.isBF16() ? NVVM::WGMMATypes::bf16
                                               : NVVM::WGMMATypes::f16;
  const bool aMnMajor = swap && !g.transposed;
  Value aOffset = nvvm::toI64(b, b.mul(cw, b.idx(64 * 128)));
  if (swap)
    aOffset = add64(b, aOffset, aBytes());
  // Small-M: the token rows' targets are fetched now, so that their loads
  // complete under the MMAs. (The main kernel's come from the item
  // handoff's row table, read after the MMAs.)
  SwapTargets swapTargets;
  if (swap)
    swapTargets = prefetchSwapTargets(b, tid, item);
  // A K step's MMAs on `stage` (the tile's first without accumulating: the
  // accumulators need no zeros); fp8Wide: those of column half `half`
  // (m64n128, its weight rows 128 further per half).
  auto tileMmas = [&](LoweringBuilder &b, Value stage, Value acc, bool first,
                      int64_t half = 0) {
    const int64_t n = fp8Wide() ? 128 : mmaN;
    // Small-M with MN-major weights ([E, K, N]): A is the weight box as
    // TMA lands it, 64 K rows of 64 weight columns (128 B, swizzled), the
    // transposed A of wgmma; one k16 step is 16 rows (2048 B).
    Value descA = nvvm::wgmmaDescriptor(b, add64(b, stage, aOffset),
                                        aMnMajor ? 64 * 128 : 16);
    int64_t stepA = aMnMajor ? 2048 >> 4 : 2;
    // K-major rhs: one k16 step is +32 B; MN-major: two 1024-B atoms.
    // Small-M: B is the lhs tile at the stage's start (K-major).
    bool mnMajor = !swap && !g.transposed;
    Value descB = nvvm::wgmmaDescriptor(
        b, swap ? stage : add64(b, stage, aBytes() + half * 128 * 128),
        mnMajor ? 64 * 128 : 16);
    int64_t stepB = mnMajor ? 2048 >> 4 : 2;
    nvvm::wgmmaFence(b);
    // Slice h of the stage is sliceBytes() further (>> 4 in a descriptor).
    // (Four MMAs per 128-byte slice: k16 of 16-bit or k32 of e4m3 inputs,
    // 32 bytes of K each.)
    for (int64_t h = 0; h < kSlices; ++h)
      for (int64_t k16 = 0; k16 < 4; ++k16)
        acc = nvvm::wgmma(
            b, acc, add64(b, descA, stepA * k16 + h * (sliceBytes() >> 4)),
            add64(b, descB, stepB * k16 + h * (sliceBytes() >> 4)), n, input,
            aMnMajor, mnMajor,
            /*accumulate=*/!(first && h == 0 && k16 == 0));
    return acc;
  };
  // One K step: wait for the stage, its MMAs, and the release of the step
  // before it, whose group has now finished reading its stage.
  auto kStep = [&](LoweringBuilder &b, Value kt, Value acc, bool first) {
    Value step = b.add(item.step, kt);
    auto [s, round] = stageOf(b, step);
    nvvm::mbarrierWait(b, fullBarrier(b, s), parity(b, round));
    nvvm::fenceProxyAsyncShared(b);
    acc = tileMmas(b, stageAddress(b, s), acc, first);
    nvvm::wgmmaCommit(b);
    nvvm::wgmmaWait(b, 1);
    if (!first) {
      Value prev =
          arith::RemUIOp::create(b, b.sub(step, b.idx(1)), b.idx(stages));
      releaseStage(b, ct, prev);
    }
    return acc;
  };
  // fp8_block: each K step (one 128-K block) is MMAs into a block
  // accumulator, waited for, then promoted into the tile's accumulator
  // with the block's scales (the tensor cores' e4m3 accumulation never
  // spans more than 128 K); the stage is released once its scales are
  // read. (The two consumer warpgroups' MMAs overlap each other's
  // promotions.) fp8Wide: the two column halves in turn, each into the
  // one m64n128 block accumulator.
  Type blockType = fp8Wide() ? nvvm::wgmmaAccumulatorType(b, 128) : accType;
  auto fp8Step = [&](LoweringBuilder &b, Value kt, Value acc, bool first) {
    Value step = b.add(item.step, kt);
    auto [s, round] = stageOf(b, step);
    nvvm::mbarrierWait(b, fullBarrier(b, s), parity(b, round));
    nvvm::fenceProxyAsyncShared(b);
    // Main kernel: the scales are read before the MMAs, so that the
    // promotion after the wait is multiplies only.
    SmallVector<SmallVector<Value>> factors(fp8Halves());
    if (!swap)
      for (int64_t half = 0; half < fp8Halves(); ++half)
        factors[half] = promotionFactors(b, ct, cw, s, half);
    for (int64_t half = 0; half < fp8Halves(); ++half) {
      Value block = tileMmas(b, stageAddress(b, s),
                             LLVM::PoisonOp::create(b, blockType), true, half);
      nvvm::wgmmaCommit(b);
      nvvm::wgmmaWait(b, 0);
      acc = promote(b, ct, cw, s, acc, block, first, half, factors[half]);
    }
    return acc;
  };
  Value acc = LLVM::PoisonOp::create(b, accType);
  Value mmaSteps = b.idx(kSteps);
  if (fp8) {
    acc = fp8Step(b, zero, acc, true);
    acc = b.forLoop(
        b.idx(1), mmaSteps, {acc},
        [&](LoweringBuilder &b, Value kt, ValueRange in) -> SmallVector<Value> {
          return {fp8Step(b, kt, in[0], false)};
        })[0];
    if (swap) {
      epilogueSwapped(b, tid, cw, item, acc, swapTargets);
      return;
    }
    WorkItem received = receiveItem(b, item.step);
    RowFactors factors = tableFactors(b, ct, cw);
    epilogueStaged(b, ct, cw, received, acc, factors);
    nvvm::mbarrierArrive(b, tableEmpty(b));
    return;
  }
  acc = kStep(b, zero, acc, true);
  acc = b.forLoop(
      b.idx(1), mmaSteps, {acc},
      [&](LoweringBuilder &b, Value kt, ValueRange in) -> SmallVector<Value> {
        return {kStep(b, kt, in[0], false)};
      })[0];
  nvvm::wgmmaWait(b, 0);
  Value last = arith::RemUIOp::create(
      b, b.sub(b.add(item.step, mmaSteps), b.idx(1)), b.idx(stages));
  releaseStage(b, ct, last);
  if (swap) {
    epilogueSwapped(b, tid, cw, item, acc, swapTargets);
    return;
  }
  WorkItem received = receiveItem(b, item.step);
  RowFactors factors = tableFactors(b, ct, cw);
  epilogueStaged(b, ct, cw, received, acc, factors);
  // This thread is done with the item's record and row table.
  nvvm::mbarrierArrive(b, tableEmpty(b));
}

SmallVector<Value> WgmmaKernel::promotionFactors(LoweringBuilder &b, Value ct,
                                                 Value cw, Value s,
                                                 int64_t half) {
  Value area = scaleArea(b, s);
  Value warp = arith::ShRUIOp::create(b, ct, b.idx(5));
  Value lane = arith::AndIOp::create(b, ct, b.idx(31));
  auto loadScale = [&](Value index) {
    return nvvm::loadShared(
        b, b.getF32Type(),
        add64(b, area, nvvm::toI64(b, b.mul(index, b.idx(4)))));
  };
  // The thread's fragment rows 16 * warp + lane / 4 (+ 8) of this
  // warpgroup's 64 (main kernel: lhs rows; small-M: weight rows), and its
  // fragment columns 8 j + 2 (lane % 4) (+ 1) (main: weight columns;
  // small-M: tokens).
  Value row0 = b.add(b.add(b.mul(cw, b.idx(64)), b.mul(warp, b.idx(16))),
                     arith::ShRUIOp::create(b, lane, b.idx(2)));
  Value quad = b.mul(arith::AndIOp::create(b, lane, b.idx(3)), b.idx(2));
  // The weight scales of the tile's (fp8Wide: the half's) columns.
  int64_t parts = promotionParts();
  Value weightScale[2];
  for (int64_t u = 0; u < parts; ++u)
    weightScale[u] = loadScale(b.idx(tileM + u + half));
  // Main kernel: factor h * parts + u is fragment row h's activation scale
  // times the weight scale of part u. Small-M: the weight scale of
  // fragment row h, then those of the thread's token columns.
  SmallVector<Value> factors;
  for (int64_t h = 0; h < 2; ++h) {
    Value row = b.add(row0, b.idx(8 * h));
    if (!swap) {
      Value rowScale = loadScale(row);
      for (int64_t u = 0; u < parts; ++u)
        factors.push_back(b.mul(rowScale, weightScale[u]));
    } else if (concat) {
      // The tile's first tileN / 2 weight rows are the gate half.
      factors.push_back(b.select(b.cmpi(CmpI::uge, row, b.idx(tileN / 2)),
                                 weightScale[1], weightScale[0]));
    } else {
      factors.push_back(weightScale[0]);
    }
  }
  if (swap)
    for (int64_t c = 0; c < tileM / 4; ++c)
      factors.push_back(loadScale(b.add(b.idx(8 * (c / 2) + c % 2), quad)));
  return factors;
}

Value WgmmaKernel::promote(LoweringBuilder &b, Value ct, Value cw, Value s,
                           Value acc, Value block, bool first, int64_t half,
                           ArrayRef<Value> loaded) {
  SmallVector<Value> factors(loaded);
  if (factors.empty())
    factors = promotionFactors(b, ct, cw, s, half);
  // The stage's tiles and scales are read: the producer may refill it.
  // (In cluster kernels one thread per warpgroup releases it, for all: its
  // wgmma wait covers the warpgroup's MMAs but not the other warps' scale
  // loads, so the warpgroup meets first.)
  // (fp8Wide: once both halves' MMAs and scale reads are done.)
  if (half + 1 == fp8Halves()) {
    if (cluster > 1)
      nvvm::namedBarrier(b, b.toI32(b.add(cw, b.idx(1))), 128);
    releaseStage(b, ct, s);
  }
  // Accumulator i: row h = (i / 2) % 2, column 8 (i / 4) + 2 (lane % 4)
  // + i % 2. Main kernel: a concat tile's first tileN / 2 columns are the
  // gate half. fp8Wide: block entry i is the tile's entry i + 64 * half
  // (m64n128 and m64n256 fragments order their columns alike, 8 columns a
  // 4 entries).
  const int64_t parts = promotionParts();
  int64_t count = fp8Wide() ? 64 : (swap ? tileM : tileN) / 2;
  for (int64_t i = 0; i < count; ++i) {
    int64_t h = (i / 2) % 2;
    Value factor;
    if (swap) {
      factor = b.mul(factors[h], factors[2 + 2 * (i / 4) + i % 2]);
    } else {
      int64_t u = parts == 2 && 8 * (i / 4) >= tileN / 2 ? 1 : 0;
      factor = factors[h * parts + u];
    }
    Value v = LLVM::ExtractValueOp::create(b, block, i);
    int64_t at = i + count * half;
    Value scaled;
    if (first) {
      scaled = b.mul(v, factor);
    } else {
      Value cur = LLVM::ExtractValueOp::create(b, acc, at);
      scaled = math::FmaOp::create(b, v, factor, cur);
    }
    acc = LLVM::InsertValueOp::create(b, acc, scaled, at);
  }
  return acc;
}

void WgmmaKernel::emit(LoweringBuilder &b) {
  Value one = b.idx(1);
  Value items = b.mul(ragged.upperBound(b), b.idx(colTiles));
  Value grid = b.maxIdx(b.minIdx(items, b.idx(numSMs * ctasPerSM)), one);
  Value clusterX;
  if (cluster > 1) {
    // 2-CTA clusters when the experts average at least one row tile: with
    // fewer rows almost every expert has one tile, nothing is shared, and
    // a cluster launch was measured slower (H200, Qwen3-30B-A3B T=1: 118
    // -> 142 us; bench/NOTES.md v12), so the same kernel then runs without
    // clusters. Chosen here, on the host, from the rows: no
    // synchronisation, one kernel for every T. The cluster grid is a
    // multiple of 2 (an SM holds one block: 66 clusters are resident on
    // the H200's 132 SMs).
    Value pairRows = b.cmpi(CmpI::uge, g.m, b.idx(g.numExperts * tileM));
    Value pairGrid =
        b.mul(b.maxIdx(b.minIdx(items, b.idx(numSMs / cluster)), one),
              b.idx(cluster));
    grid = b.select(pairRows, pairGrid, grid);
    clusterX = b.select(pairRows, b.idx(cluster), one);
    coupledFlag = pairRows;
    coupledShift = b.select(pairRows, one, b.idx(0));
  }
  int64_t threads = 128 * (1 + consumers);
  launchInClusters(b, grid, clusterX, threads, b.i32(sharedBytes() + 1024),
                   /*workgroup=*/{},
                   [&](LoweringBuilder &kb, const KernelIds &ids,
                       ArrayRef<Value>) { emitBody(kb, ids, threads); });
}

void WgmmaKernel::emitBody(LoweringBuilder &kb, const KernelIds &ids,
                           int64_t threads) {
  Value tid = ids.threadX;
  Value blockX = ids.blockX;
  Value gridX = ids.gridX;

  base = nvvm::dynamicSharedBase(kb, 1024);
  when(kb, kb.cmpi(CmpI::eq, tid, kb.idx(0)), [&](LoweringBuilder &b) {
    for (int64_t s = 0; s < stages; ++s) {
      // 128 producer threads' cp.async arrivals (+ the TMA expect_tx).
      nvvm::mbarrierInit(b, fullBarrier(b, b.idx(s)), rhsMap ? 129 : 128);
      // Every consumer thread; in cluster kernels two arrivals per
      // consumer warpgroup (releaseStage).
      nvvm::mbarrierInit(b, emptyBarrier(b, b.idx(s)),
                         cluster > 1 ? 2 * consumers : 128 * consumers);
    }
    if (handoff) {
      nvvm::mbarrierInit(b, tableFull(b), 128);
      nvvm::mbarrierInit(b, tableEmpty(b), 128 * consumers);
    }
    nvvm::fenceMbarrierInit(b);
  });
  if (cluster > 1) {
    // Both CTAs' barriers exist before either multicasts or arrives
    // remotely (without clusters: a block barrier). (The item count and
    // the first item are found in each role, forEachItem: fewer values
    // live across the role split.)
    nvvm::clusterSync(kb);
  } else {
    gpu::BarrierOp::create(kb);
  }
  if (programmatic) {
    // Launched programmatically: the barriers are set up while the
    // previous kernel finishes; nothing global is touched before this.
    nvvm::waitForPredecessor(kb);
    nvvm::allowDependents(kb);
  }
  lhsAddr = nvvm::bufferAddress(kb, g.lhs);
  rhsAddr = nvvm::bufferAddress(kb, g.rhs);
  lhsStride = nvvm::bufferStride(kb, g.lhs, 0);
  rhsStride0 = nvvm::bufferStride(kb, g.rhs, 0);
  rhsStride1 = nvvm::bufferStride(kb, g.rhs, 1);
  if (fp8) {
    lhsScaleAddr = nvvm::bufferAddress(kb, g.lhsScale);
    lhsScaleStride = nvvm::bufferStride(kb, g.lhsScale, 0);
  }
  if (fp8 || mxfp4) {
    rhsScaleAddr = nvvm::bufferAddress(kb, g.rhsScale);
    rhsScaleStride0 = nvvm::bufferStride(kb, g.rhsScale, 0);
    rhsScaleStride1 = nvvm::bufferStride(kb, g.rhsScale, 1);
    rhsScaleStride2 = nvvm::bufferStride(kb, g.rhsScale, 2);
  }
  outAddr = nvvm::bufferAddress(kb, g.out);
  outStride = nvvm::bufferStride(kb, g.out, 0);
  // 16-byte stores of output rows need unit columns, 16-byte rows.
  outVectorOk = nvvm::rowsAligned16(kb, g.out, {0}, 1);

  Value wg = arith::ShRUIOp::create(kb, tid, kb.idx(7));
  Value isProducer = kb.cmpi(CmpI::eq, wg, kb.idx(0));
  scf::IfOp::create(
      kb, isProducer,
      [&](OpBuilder &nested, Location loc) {
        LoweringBuilder b(loc, nested);
        if (registerSplit)
          nvvm::setMaxRegisters(b, registerBudget().first,
                                /*increase=*/false);
        forEachItem(b, tid, blockX, gridX,
                    [&](LoweringBuilder &b, const WorkItem &item) {
                      producer(b, tid, item);
                    });
        scf::YieldOp::create(b);
      },
      [&](OpBuilder &nested, Location loc) {
        LoweringBuilder b(loc, nested);
        if (registerSplit)
          nvvm::setMaxRegisters(b, registerBudget().second,
                                /*increase=*/true);
        Value cw = b.sub(wg, b.idx(1));
        // The uncovered rows (elide-fills), while the first stages load:
        // rows no tile writes, so no ordering with the tiles' stores.
        if (fill != UncoveredFill::Unread)
          zeroUncoveredStrided(b, g, fill, blockX, gridX,
                               b.sub(tid, b.idx(128)), 128 * consumers);
        forEachItem(
            b, tid, blockX, gridX,
            [&](LoweringBuilder &b, const WorkItem &item) {
              consumeTile(b, tid, cw, item);
            },
            /*walk=*/!handoff);
        scf::YieldOp::create(b);
      });
  // No CTA leaves while its peer may still arrive on its barriers or
  // receive its multicasts.
  if (cluster > 1)
    nvvm::clusterSync(kb);
}

void gpu_lowering::emitWgmmaExpertGemm(LoweringBuilder &b,
                                       const GemmOperands &g,
                                       const GemmKernelConfig &config,
                                       Value rhsMap, UncoveredFill fill) {
  WgmmaKernel(g, config, rhsMap, fill).emit(b);
}

/// Declares the runtime entry point `name` ((i64 x args) -> i64) in
/// `module` on first use.
static void declareRuntimeFunction(LoweringBuilder &b, ModuleOp module,
                                   StringRef name, int64_t args) {
  if (module.lookupSymbol(name))
    return;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());
  Type i64 = b.getI64Type();
  func::FuncOp::create(b, name,
                       b.getFunctionType(SmallVector<Type>(args, i64), {i64}))
      .setPrivate();
}

Value gpu_lowering::emitRhsTensorMap(LoweringBuilder &b, ModuleOp module,
                                     const GemmOperands &g,
                                     const GemmKernelConfig &config) {
  constexpr StringLiteral kName = "moeRuntimeTensorMap3D";
  declareRuntimeFunction(b, module, kName, 12);
  Type i64 = b.getI64Type();
  auto c = [&](int64_t v) { return nvvm::i64(b, v); };
  // mxfp4: bytes of packed e2m1 pairs, K / 2 of them a row.
  bool bytes = g.fp8() || g.mxfp4();
  Value elem = c(bytes ? 1 : 2);
  Value s1 = arith::MulIOp::create(
      b, nvvm::toI64(b, nvvm::bufferStride(b, g.rhs, 1)), elem);
  Value s0 = arith::MulIOp::create(
      b, nvvm::toI64(b, nvvm::bufferStride(b, g.rhs, 0)), elem);
  // CUtensorMapDataType: UINT8 = 0 (e4m3 codes), FLOAT16 = 6, BFLOAT16 = 9.
  Value dtype = c(bytes ? 0 : g.inElem.isBF16() ? 9 : 6);
  SmallVector<Value> args = {nvvm::bufferAddress(b, g.rhs), dtype};
  // A box row is one 128-byte swizzle row of K (mxfp4: one stage's
  // stageK / 2 bytes, 64-byte swizzled at stageK = 128).
  int64_t boxK = g.mxfp4() ? config.stageK / 2 : bytes ? 128 : kTileK;
  if (g.transposed)
    args.append({c(g.mxfp4() ? g.kDim / 2 : g.kDim), c(g.gemmN),
                 c(g.numExperts), s1, s0, c(boxK), c(config.tileN / 2), c(1)});
  else
    args.append({c(g.gemmN), c(g.kDim), c(g.numExperts), s1, s0, c(64),
                 c(kTileK), c(1)});
  // CUtensorMapL2promotion: NONE = 0, L2_64B = 1, L2_128B = 2, L2_256B = 3.
  int64_t promotion = config.l2PromotionBytes == 0     ? 0
                      : config.l2PromotionBytes == 64  ? 1
                      : config.l2PromotionBytes == 128 ? 2
                                                       : 3;
  // CU_TENSOR_MAP_SWIZZLE_64B = 2, CU_TENSOR_MAP_SWIZZLE_128B = 3.
  args.append({c(g.mxfp4() && config.stageK == 128 ? 2 : 3), c(promotion)});
  return func::CallOp::create(b, kName, TypeRange{i64}, args).getResult(0);
}
