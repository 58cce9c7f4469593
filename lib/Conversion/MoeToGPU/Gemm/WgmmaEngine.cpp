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
//   (fragmentGroup describes the layout for both output paths). Direct:
//   element stores from the fragments. Staged (the cost model's choice):
//   the values go to the warpgroup's staging in shared memory, then each
//   row leaves as 16-byte stores; the rows' destinations and routing
//   weights come from the row table (the item handoff; with idle skip the
//   consumers fetch them before the MMAs).
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

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;
using namespace mlir::moe::gpu_lowering::wgmma;

Value gpu_lowering::wgmmaOperandsAligned(LoweringBuilder &b,
                                         const GemmOperands &g) {
  Value lhsOk = nvvm::rowsAligned16(b, g.lhs, {0}, 1);
  return b.andi(lhsOk, nvvm::rowsAligned16(b, g.rhs, {0, 1}, 2));
}

void WgmmaKernel::forEachItem(LoweringBuilder &b, Value tid, Value blockX,
                              Value gridX, ItemBody body, bool walk) {
  // Tail units: the cluster walk, which without clusters (every shift 0)
  // is the plain walk plus the tails.
  if (cluster > 1 || tails)
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
  // Every item has kSteps K steps: its number in the walk is step /
  // kSteps, computed where it is used (WorkItem::ordinal null).
  auto ordinalOf = [&](LoweringBuilder &, Value) -> Value { return Value(); };
  b.forLoop(
      blockX, totalItems, gridX, {start.expert, start.before, zero},
      [&](LoweringBuilder &b, Value item,
          ValueRange state) -> SmallVector<Value> {
        Value next = b.add(state[2], b.idx(kSteps));
        if (!walk) {
          body(b,
               WorkItem{
                   {}, {}, {}, {}, state[2], {}, {}, ordinalOf(b, state[2])});
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
        body(b, WorkItem{expert,
                         rowStart,
                         tileRows,
                         colTile,
                         state[2],
                         {},
                         {},
                         ordinalOf(b, state[2])});
        return {expert, before, next};
      });
}

std::pair<Value, Value> WgmmaKernel::splitRows(LoweringBuilder &b,
                                               Value rows) const {
  if (!tails)
    return {ragged.tilesOfRows(b, rows), b.idx(0)};
  Value whole = b.div(rows, b.idx(tileM));
  Value rest = b.sub(rows, b.mul(whole, b.idx(tileM)));
  Value isTail = b.cmpi(CmpI::ule, rest, b.idx(kTailRows));
  return {b.add(whole, b.select(isTail, b.idx(0), b.idx(1))),
          b.select(isTail, rest, b.idx(0))};
}

Value WgmmaKernel::clusterUnits(LoweringBuilder &b, Value rows) const {
  // Uncoupled the shift is 0: tiles "pairs" of one tile, no odd tile.
  Value shift = coupledShift ? coupledShift : b.idx(0);
  auto [tiles, tailRows] = splitRows(b, rows);
  Value pairs = arith::ShRUIOp::create(b, tiles, shift);
  Value odd = arith::AndIOp::create(b, tiles, shift);
  Value units = b.add(b.mul(pairs, b.idx(colTiles)),
                      b.mul(odd, b.idx((colTiles + 1) / 2)));
  if (!tails)
    return units;
  // ceil(colTiles / (2 << shift)) tail units.
  Value perUnit = arith::ShLIOp::create(b, b.idx(2), shift);
  Value tailUnits =
      b.div(b.add(b.idx(colTiles), b.sub(perUnit, b.idx(1))), perUnit);
  return b.add(units, b.select(b.cmpi(CmpI::ne, tailRows, b.idx(0)), tailUnits,
                               b.idx(0)));
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
  // The item's number in the walk: step / kSteps, or with tail units
  // (items of 2 * kSteps steps) a count carried by the loop.
  SmallVector<Value> init = {first.expert, first.before, zero};
  if (tails)
    init.push_back(b.i32(0));
  auto ordinalOf = [&](LoweringBuilder &, ValueRange state) -> Value {
    return tails ? state[3] : Value();
  };
  // The next item's first step: without tail units step + kSteps (built
  // first, as before tail units existed), else after the item.
  Value fixedNext;
  auto nextState = [&](LoweringBuilder &b, ValueRange state, Value expert,
                       Value before, Value steps) -> SmallVector<Value> {
    if (!tails)
      return {expert, before, fixedNext};
    return {expert, before, b.add(state[2], steps),
            arith::AddIOp::create(b, state[3], b.i32(1))};
  };
  b.forLoop(
      start, first.total, stride, init,
      [&](LoweringBuilder &b, Value unit,
          ValueRange state) -> SmallVector<Value> {
        if (!tails)
          fixedNext = b.add(state[2], b.idx(kSteps));
        if (!walk) {
          Value steps = body(
              b,
              WorkItem{{}, {}, {}, {}, state[2], {}, {}, ordinalOf(b, state)});
          if (!steps)
            steps = b.idx(kSteps);
          return nextState(b, state, state[0], state[1], steps);
        }
        // Expert e's units: its row-tile pairs (uncoupled: its row tiles)
        // for every column tile, the pair index fastest (the pairs of a
        // wave share each weight tile in L2); coupled, an odd last row
        // tile's units, each two column tiles (one per CTA); then (tail
        // units) the column pairs (coupled: each CTA's pair of a column
        // quad) of its tail. By default the odd tile's units come after
        // all the pairs; with groupedWalk the units go in groups of two
        // column tiles, the pairs of the first, those of the second, then
        // the odd tile's unit for the same two columns, so that it reads
        // those weight tiles while the pairs' copies are still in L2
        // (bench/NOTES.md v67). Uncoupled (no odd tiles) both are the same.
        auto [expert, before] = ragged.advanceUnits(b, unit, state[0], state[1],
                                                    unitsOf, advanceUnroll);
        Value lo = ragged.offsetAt(b, expert);
        Value hi = ragged.offsetAt(b, b.add(expert, b.idx(1)));
        auto [tiles, tailRows] = splitRows(b, ragged.rowsIn(b, lo, hi));
        Value local = b.sub(unit, before);
        Value pairs = arith::ShRUIOp::create(b, tiles, shift);
        Value odd = arith::AndIOp::create(b, tiles, shift);
        Value oddUnits = b.mul(odd, b.idx((colTiles + 1) / 2));
        Value coreUnits = b.add(b.mul(pairs, b.idx(colTiles)), oddUnits);
        Value safePairs = b.maxIdx(pairs, b.idx(1));
        // The unit's place among the pairs (inPairs, pairCol, pair), or
        // the first of the odd unit's two column tiles (oddCol).
        Value inPairs, pairCol, pair, oddCol;
        if (groupedWalk) {
          Value groupUnits = b.maxIdx(
              b.add(arith::ShLIOp::create(b, pairs, b.idx(1)), odd), b.idx(1));
          Value group = arith::DivUIOp::create(b, local, groupUnits);
          Value inGroup = arith::RemUIOp::create(b, local, groupUnits);
          oddCol = arith::ShLIOp::create(b, group, b.idx(1));
          // The last group of an odd column count has one column tile.
          Value groupCols = b.minIdx(b.sub(b.idx(colTiles), oddCol), b.idx(2));
          inPairs = b.andi(b.cmpi(CmpI::ult, local, coreUnits),
                           b.cmpi(CmpI::ult, inGroup, b.mul(groupCols, pairs)));
          pairCol =
              b.add(oddCol, arith::DivUIOp::create(b, inGroup, safePairs));
          pair = arith::RemUIOp::create(b, inGroup, safePairs);
        } else {
          Value pairUnits = b.mul(pairs, b.idx(colTiles));
          inPairs = b.cmpi(CmpI::ult, local, pairUnits);
          pairCol = arith::DivUIOp::create(b, local, safePairs);
          pair = arith::RemUIOp::create(b, local, safePairs);
          Value oddUnit = b.select(inPairs, zero, b.sub(local, pairUnits));
          oddCol = b.mul(oddUnit, b.idx(2));
        }
        Value rank = cluster > 1 ? clusterRank(b) : zero;
        Value colTile = b.select(inPairs, pairCol, b.add(oddCol, rank));
        Value rowTile = b.select(
            inPairs, b.add(arith::ShLIOp::create(b, pair, shift), rank),
            b.sub(b.maxIdx(tiles, b.idx(1)), b.idx(1)));
        Value rowStart = b.add(lo, b.mul(rowTile, b.idx(tileM)));
        Value tail;
        if (tails) {
          // Past the pairs and the odd tile's column pairs: the tail units,
          // column tiles 2 * rank + (2 << shift) * u and the next.
          tail = b.andi(b.cmpi(CmpI::ne, tailRows, zero),
                        b.cmpi(CmpI::uge, local, coreUnits));
          Value tailUnit = b.sub(local, coreUnits);
          Value tailCol =
              b.add(b.mul(tailUnit, arith::ShLIOp::create(b, b.idx(2), shift)),
                    b.mul(rank, b.idx(2)));
          colTile = b.select(tail, tailCol, colTile);
          rowStart =
              b.select(tail, b.add(lo, b.mul(tiles, b.idx(tileM))), rowStart);
        }
        // The second CTA of an odd column count's last pair has no tile: no
        // rows, and the last column tile in its place, so that what it
        // still reads (weights, the bias of every staged column) is in
        // bounds (memcheck caught the bias read past the end).
        Value has = b.andi(b.cmpi(CmpI::ult, rowStart, hi),
                           b.cmpi(CmpI::ult, colTile, b.idx(colTiles)));
        Value tileRows =
            b.select(has, b.minIdx(b.sub(hi, rowStart), b.idx(tileM)), zero);
        colTile = b.minIdx(colTile, b.idx(colTiles - 1));
        Value multicast;
        if (cluster > 1) {
          multicast = b.andi(coupledFlag, inPairs);
        }
        WorkItem item{expert,   rowStart,  tileRows, colTile,
                      state[2], multicast, tail,     ordinalOf(b, state)};
        // The producer's body returns the item's steps, so that the tail
        // flag is not live across it (the 40-register producer spilled).
        Value steps = body(b, item);
        if (!steps)
          steps = itemSteps(b, item);
        return nextState(b, state, expert, before, steps);
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

Value WgmmaKernel::kMajorDescriptor(LoweringBuilder &b, Value address,
                                    bool tail) {
  Value desc = nvvm::wgmmaDescriptor(b, address, 16);
  if (!tail)
    return desc;
  // Swizzle mode (bits 62-63): 1 = 128 bytes, 2 = 64 bytes; the stride
  // between 8-row groups (bits 32-45, in 16 bytes): 1024 and 512 bytes.
  int64_t swizzle128 = (int64_t(1) << 62) | (int64_t(1024 >> 4) << 32);
  int64_t swizzle64 = (int64_t(2) << 62) | (int64_t(512 >> 4) << 32);
  return arith::XOrIOp::create(b, desc, nvvm::i64(b, swizzle128 ^ swizzle64));
}

Value WgmmaKernel::consumeTile(LoweringBuilder &b, Value tid, Value cw,
                               const WorkItem &item) {
  Value zero = b.idx(0);
  Value ct = arith::AndIOp::create(b, tid, b.idx(127));
  // Small-M: the MMA is m64 (this warpgroup's 64 rhs rows) x n tileM (the
  // tokens), both operands K-major.
  const int64_t mmaN = swap ? tileM : tileN;
  Type accType = nvvm::wgmmaAccumulatorType(b, mmaN);
  bool bf16 = g.inElem.isBF16();
  const bool aMnMajor = swap && !g.transposed;
  Value aOffset = nvvm::toI64(b, b.mul(cw, b.idx(64 * 128)));
  if (swap)
    aOffset = add64(b, aOffset, aBytes());
  // Staged: the rows' destinations and routing weights are fetched now, so
  // that their loads complete under the MMAs (in the store loop they were
  // one dependent global load per row: bench/NOTES.md v15).
  // (With the item handoff the producer has fetched them: the table is
  // read after the MMAs.)
  RowFactors factors;
  if (staged && !swap && !handoff)
    factors = prefetchRowTargets(b, ct, cw, item);

  SwapTargets swapTargets;
  if (swap)
    swapTargets = prefetchSwapTargets(b, tid, item);
  // Tail units: whether this item is one, from its first stage's mark
  // (read below, once that stage is full).
  Value tail;
  // A K step's MMAs on `stage` (the tile's first without accumulating: the
  // accumulators need no zeros).
  auto tileMmas = [&](LoweringBuilder &b, Value stage, Value acc, bool first) {
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
        b, swap ? stage : add64(b, stage, aBytes()), mnMajor ? 64 * 128 : 16);
    int64_t stepB = mnMajor ? 2048 >> 4 : 2;
    nvvm::wgmmaFence(b);
    // Slice h of the stage is sliceBytes() further (>> 4 in a descriptor).
    for (int64_t h = 0; h < kSlices; ++h)
      for (int64_t k16 = 0; k16 < kTileK / 16; ++k16)
        acc = nvvm::wgmma(
            b, acc, add64(b, descA, stepA * k16 + h * (sliceBytes() >> 4)),
            add64(b, descB, stepB * k16 + h * (sliceBytes() >> 4)), mmaN, bf16,
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
  // Skewed warpgroups (see `skew`): warpgroup 1 waits here for warpgroup
  // 0's arrival after its first `skew` steps (predicated instructions, no
  // branch between the MMAs).
  if (skew)
    nvvm::predicatedBarrier(b, b.cmpi(CmpI::eq, cw, b.idx(1)), kSkewBarrier,
                            256, /*arrive=*/false);
  auto steps = [&](int64_t from, Value to, Value acc) {
    return b.forLoop(
        b.idx(from), to, {acc},
        [&](LoweringBuilder &b, Value kt, ValueRange in) -> SmallVector<Value> {
          return {kStep(b, kt, in[0], false)};
        })[0];
  };
  // With tail units, K step kt of either kind, one group of four k16 MMAs:
  // a tile's stage item.step + kt (K 0..63), or a tail unit's two stages
  // item.step + 2 kt and the next (kTailK each: A, its 64 rows, at the
  // stage start for both warpgroups, then warpgroup w's weight tile,
  // column tile c + w, 64-byte rows, the 64-byte swizzle). The kind
  // selects between finished descriptors (run-time values only in the
  // addresses, hopper/README P1), so both kinds share one loop: the same
  // MMAs per group as a tile without tails, and no second MMA loop over
  // the accumulators (two more loops cost ptxas ~90 ms a kernel, bench/
  // NOTES.md v64).
  // Releases the stages of the step that ends before pipeline step `end`:
  // a tile's one, a tail unit's two.
  auto releaseStepBefore = [&](LoweringBuilder &b, Value end) {
    auto release = [&](LoweringBuilder &b, int64_t back) {
      releaseStage(
          b, ct,
          arith::RemUIOp::create(b, b.sub(end, b.idx(back)), b.idx(stages)));
    };
    release(b, 1);
    when(b, tail, [&](LoweringBuilder &b) { release(b, 2); });
  };
  auto tailAwareStep = [&](LoweringBuilder &b, Value kt, Value acc,
                           bool first) {
    Value step0 = b.add(item.step, b.select(tail, b.add(kt, kt), kt));
    auto [s0, round0] = stageOf(b, step0);
    nvvm::mbarrierWait(b, fullBarrier(b, s0), parity(b, round0));
    auto [s1, round1] = stageOf(b, b.add(step0, b.idx(1)));
    when(b, tail, [&](LoweringBuilder &b) {
      nvvm::mbarrierWait(b, fullBarrier(b, s1), parity(b, round1));
    });
    nvvm::fenceProxyAsyncShared(b);
    Value stage0 = stageAddress(b, s0);
    Value tileA = kMajorDescriptor(b, add64(b, stage0, aOffset), false);
    Value tileB = kMajorDescriptor(b, add64(b, stage0, aBytes()), false);
    Value tailBOffset = add64(b, nvvm::i64(b, kTailABytes),
                              mul64(b, nvvm::toI64(b, cw), tileN * kTailK * 2));
    Value tailA[2], tailB[2];
    for (int64_t h = 0; h < 2; ++h) {
      Value stage = h ? stageAddress(b, s1) : stage0;
      tailA[h] = kMajorDescriptor(b, stage, true);
      tailB[h] = kMajorDescriptor(b, add64(b, stage, tailBOffset), true);
    }
    nvvm::wgmmaFence(b);
    for (int64_t k16 = 0; k16 < kTileK / 16; ++k16) {
      int64_t h = k16 / (kTailK / 16), inTail = k16 % (kTailK / 16);
      Value descA = b.select(tail, add64(b, tailA[h], 2 * inTail),
                             add64(b, tileA, 2 * k16));
      Value descB = b.select(tail, add64(b, tailB[h], 2 * inTail),
                             add64(b, tileB, 2 * k16));
      acc = nvvm::wgmma(b, acc, descA, descB, mmaN, bf16, false, false,
                        /*accumulate=*/!(first && k16 == 0));
    }
    nvvm::wgmmaCommit(b);
    nvvm::wgmmaWait(b, 1);
    if (!first)
      releaseStepBefore(b, step0);
    return acc;
  };
  Value acc = LLVM::PoisonOp::create(b, accType);
  // Tail units: the item's kind from its first stage's mark, read once the
  // stage is full (the mark selects the operands of every step). (A form
  // that chose the kind by a branch inside the wgmma group, v62, made
  // ptxas close the group early and add a dummy wgmma: each step waited
  // for its own MMAs, bench/NOTES.md v63.)
  if (tails) {
    auto [s, round] = stageOf(b, item.step);
    nvvm::mbarrierWait(b, fullBarrier(b, s), parity(b, round));
    tail = b.cmpi(CmpI::ne,
                  nvvm::loadShared(b, b.getI32Type(), stageKindAddress(b, s)),
                  b.i32(0));
    acc = tailAwareStep(b, zero, acc, true);
  } else {
    acc = kStep(b, zero, acc, true);
  }
  if (skew) {
    acc = steps(1, b.idx(skew), acc);
    nvvm::predicatedBarrier(b, b.cmpi(CmpI::eq, cw, zero), kSkewBarrier, 256,
                            /*arrive=*/true);
  }
  // Idle skip: a warpgroup none of whose 64 rows is in the tile (an
  // expert's short last tile, or a CTA of a pair without one) issues the
  // MMAs of the first step only, then, after its last wgmma has
  // completed, waits for each remaining stage and releases it (the wait
  // keeps its arrivals in the stage's current phase). The MMA loop's bound
  // is a runtime value rather than a branch around it: ptxas serialises
  // wgmma in a divergent path (C7520, bench/NOTES.md v14), not under a
  // loop bound. Such a tile then costs the other warpgroup's MMAs alone,
  // about half of a full one.
  Value mmaSteps = b.idx(kSteps);
  if (tails)
    mmaSteps = b.select(tail, b.idx(2 * kSteps), mmaSteps);
  if (idleSkip) {
    Value hasRows = b.cmpi(CmpI::ugt, item.tileRows, b.mul(cw, b.idx(64)));
    mmaSteps = b.select(hasRows, mmaSteps, b.idx(1));
  }
  if (tails) {
    acc = b.forLoop(
        b.idx(1), b.idx(kSteps), {acc},
        [&](LoweringBuilder &b, Value kt, ValueRange in) -> SmallVector<Value> {
          return {tailAwareStep(b, kt, in[0], false)};
        })[0];
  } else {
    acc = steps(skew ? skew : 1, mmaSteps, acc);
  }
  nvvm::wgmmaWait(b, 0);
  if (tails) {
    releaseStepBefore(b, b.add(item.step, mmaSteps));
  } else {
    Value last = arith::RemUIOp::create(
        b, b.sub(b.add(item.step, mmaSteps), b.idx(1)), b.idx(stages));
    releaseStage(b, ct, last);
  }
  if (idleSkip)
    forEach(b, mmaSteps, b.idx(kSteps), b.idx(1),
            [&](LoweringBuilder &b, Value kt) {
              Value step = b.add(item.step, kt);
              auto [s, round] = stageOf(b, step);
              nvvm::mbarrierWait(b, fullBarrier(b, s), parity(b, round));
              releaseStage(b, ct, s);
            });
  // Idle skip: the two consumer warpgroups meet before the epilogue, so
  // that a warpgroup that skipped its MMAs does not start the next tile's
  // K steps ahead of the other (a lasting skew, which v43 measured
  // slower: bench/NOTES.md v45).
  if (idleSkip && resync)
    nvvm::namedBarrier(b, b.i32(kResyncBarrier), 256);
  if (swap) {
    epilogueSwapped(b, tid, cw, item, acc, swapTargets);
    return Value();
  }
  if (!handoff) {
    if (staged)
      epilogueStaged(b, ct, cw, item, acc, factors);
    else
      epilogueDirect(b, ct, cw, item, acc);
    return Value();
  }
  WorkItem received = receiveItem(b, item.step, item.ordinal);
  // A tail unit: warpgroup w stores column tile c + w (the last one in
  // place of one past the end: its rows are all dropped then).
  if (tails)
    received.colTile =
        b.minIdx(b.add(received.colTile, b.select(tail, cw, b.idx(0))),
                 b.idx(colTiles - 1));
  if (staged) {
    factors = tableFactors(b, ct, cw);
    epilogueStaged(b, ct, cw, received, acc, factors);
  } else {
    epilogueDirect(b, ct, cw, received, acc);
  }
  // This thread is done with the item's record and row table.
  nvvm::mbarrierArrive(b, tableEmpty(b));
  return tails ? mmaSteps : Value();
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
  if (lhsMapValue)
    lhsMap = UnrealizedConversionCastOp::create(
                 kb, LLVM::LLVMPointerType::get(kb.getContext()), lhsMapValue)
                 .getResult(0);
  rhsAddr = nvvm::bufferAddress(kb, g.rhs);
  lhsStride = nvvm::bufferStride(kb, g.lhs, 0);
  rhsStride0 = nvvm::bufferStride(kb, g.rhs, 0);
  rhsStride1 = nvvm::bufferStride(kb, g.rhs, 1);
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
                    [&](LoweringBuilder &b, const WorkItem &item) -> Value {
                      if (!item.tail) {
                        producer(b, tid, item);
                        return Value();
                      }
                      // Each branch yields its K steps as an opaque value:
                      // a select on the tail flag after the branch would
                      // keep the flag live across both (spills at 40
                      // registers).
                      auto steps = [&](LoweringBuilder &b, int64_t n) {
                        return arith::IndexCastOp::create(
                            b, b.getIndexType(),
                            nvvm::opaque(b, nvvm::i64(b, n)));
                      };
                      return b.ifElse(
                          item.tail, {b.getIndexType()},
                          [&](LoweringBuilder &b) -> SmallVector<Value> {
                            producerTail(b, tid, item);
                            return {steps(b, 2 * kSteps)};
                          },
                          [&](LoweringBuilder &b) -> SmallVector<Value> {
                            producer(b, tid, item);
                            return {steps(b, kSteps)};
                          })[0];
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
            [&](LoweringBuilder &b, const WorkItem &item) -> Value {
              return consumeTile(b, tid, cw, item);
            },
            /*walk=*/!handoff);
        // The last tile's row copies have read the staging (and written
        // the output) before the block's shared memory is released.
        if (bulk)
          nvvm::bulkWait(b, /*read=*/false);
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
                                       Value rhsMap, UncoveredFill fill,
                                       Value lhsMap, Value rhsTailMap) {
  WgmmaKernel(g, config, rhsMap, fill, lhsMap, rhsTailMap).emit(b);
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

std::pair<Value, Value> gpu_lowering::emitLhsTensorMap(LoweringBuilder &b,
                                                       ModuleOp module,
                                                       const GemmOperands &g) {
  constexpr StringLiteral kName = "moeRuntimeEncodeTensorMap3D";
  declareRuntimeFunction(b, module, kName, 13);
  Type i64 = b.getI64Type();
  auto c = [&](int64_t v) { return nvvm::i64(b, v); };
  auto mapType = LLVM::LLVMArrayType::get(i64, 16);
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  // The map's 128 bytes on the host stack, read back as the launch operand
  // (the driver copies a by-value parameter at the launch).
  Value slot = LLVM::AllocaOp::create(b, ptrType, mapType, c(1), 64);
  Value elem = c(2);
  Value rowBytes = arith::MulIOp::create(
      b, nvvm::toI64(b, nvvm::bufferStride(b, g.lhs, 0)), elem);
  // [K, rows, 1] (at least one row: an empty lhs is still a valid map).
  Value rows = nvvm::toI64(b, b.maxIdx(g.lhsRows, b.idx(1)));
  // CU_TENSOR_MAP_SWIZZLE_128B = 3; CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3.
  SmallVector<Value> args = {LLVM::PtrToIntOp::create(b, i64, slot),
                             nvvm::bufferAddress(b, g.lhs),
                             c(g.inElem.isBF16() ? 9 : 6),
                             c(g.kDim),
                             rows,
                             c(1),
                             rowBytes,
                             arith::MulIOp::create(b, rowBytes, rows),
                             c(kTileK),
                             c(kLhsBoxRows),
                             c(1),
                             c(3),
                             c(3)};
  Value status =
      func::CallOp::create(b, kName, TypeRange{i64}, args).getResult(0);
  Value map = LLVM::LoadOp::create(b, mapType, slot);
  return {map,
          arith::CmpIOp::create(b, arith::CmpIPredicate::ne, status, c(0))};
}

Value gpu_lowering::emitRhsTensorMap(LoweringBuilder &b, ModuleOp module,
                                     const GemmOperands &g,
                                     const GemmKernelConfig &config,
                                     bool tail) {
  assert((!tail || g.transposed) && "tail units need K-major weights");
  constexpr StringLiteral kName = "moeRuntimeTensorMap3D";
  declareRuntimeFunction(b, module, kName, 12);
  Type i64 = b.getI64Type();
  auto c = [&](int64_t v) { return nvvm::i64(b, v); };
  Value elem = c(2);
  Value s1 = arith::MulIOp::create(
      b, nvvm::toI64(b, nvvm::bufferStride(b, g.rhs, 1)), elem);
  Value s0 = arith::MulIOp::create(
      b, nvvm::toI64(b, nvvm::bufferStride(b, g.rhs, 0)), elem);
  // CUtensorMapDataType: FLOAT16 = 6, BFLOAT16 = 9; CU_TENSOR_MAP_SWIZZLE_128B
  // = 3.
  Value dtype = c(g.inElem.isBF16() ? 9 : 6);
  SmallVector<Value> args = {nvvm::bufferAddress(b, g.rhs), dtype};
  if (g.transposed)
    args.append({c(g.kDim), c(g.gemmN), c(g.numExperts), s1, s0,
                 c(tail ? kTailK : kTileK), c(config.tileN / 2), c(1)});
  else
    args.append({c(g.gemmN), c(g.kDim), c(g.numExperts), s1, s0, c(64),
                 c(kTileK), c(1)});
  // CUtensorMapL2promotion: NONE = 0, L2_64B = 1, L2_128B = 2, L2_256B = 3.
  int64_t promotion = config.l2PromotionBytes == 0     ? 0
                      : config.l2PromotionBytes == 64  ? 1
                      : config.l2PromotionBytes == 128 ? 2
                                                       : 3;
  // CU_TENSOR_MAP_SWIZZLE_64B = 2, _128B = 3.
  args.append({c(tail ? 2 : 3), c(promotion)});
  return func::CallOp::create(b, kName, TypeRange{i64}, args).getResult(0);
}
