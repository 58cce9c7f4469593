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
// - Block: 128 * (1 + tileM / 64) threads. Warpgroup 0 is the producer,
//   warpgroups 1.. each consume 64 rows x tileN of the tileM x tileN tile
//   with wgmma m64n<tileN>k16 (f32 accumulators in registers).
//   setmaxnreg moves registers from the producer to the consumers.
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

#include "GemmKernel.h"
#include "NVVMBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using CmpI = arith::CmpIPredicate;

/// K elements per stage (one 128-byte swizzle row of 16-bit elements).
constexpr int64_t kTileK = 64;
/// Rows per lhs TMA box (config.lhsTma; a multiple of the swizzle's 8).
constexpr int64_t kLhsBoxRows = 32;
/// Registers per thread after setmaxnreg (producer, consumers) with two
/// consumer warpgroups. The block starts with 168 per thread (64K / 384,
/// rounded down to 8); the consumers' increase is granted only from what
/// the producer released, so (168 - P) * 128 >= (C - 168) * 256 must hold,
/// else the consumers wait for registers forever.
/// Epilogue staging per consumer warpgroup (kWgmmaStagingBytes): 64 rows
/// of 256 bytes (one pass of 128 16-bit or 64 f32 output columns), 16-byte
/// chunk c of row r at chunk c ^ (r % 8), so the fragment stores and the
/// row reads are free of bank conflicts.
constexpr int64_t kEpilogueRowBytes = kWgmmaStagingBytes / 64;
constexpr int64_t kEntryRegs = 168, kProducerRegs = 40, kConsumerRegs = 232;
static_assert((kEntryRegs - kProducerRegs) * 128 >=
                  (kConsumerRegs - kEntryRegs) * 256,
              "setmaxnreg would deadlock");

Value gpu_lowering::wgmmaOperandsAligned(LoweringBuilder &b,
                                         const GemmOperands &g) {
  Value lhsOk = nvvm::rowsAligned16(b, g.lhs, {0}, 1);
  return b.andi(lhsOk, nvvm::rowsAligned16(b, g.rhs, {0, 1}, 2));
}

namespace {

/// One work item of the persistent loop.
struct WorkItem {
  Value expert, rowStart, tileRows, colTile, step;
  /// 2-CTA clusters: true when the pair shares the weight tile (each CTA
  /// multicasts half of it), false when the CTAs take different column
  /// tiles of one row tile (each loads its own). Null without clusters.
  Value multicast;
};

class WgmmaKernel {
public:
  WgmmaKernel(const GemmOperands &g, const GemmKernelConfig &config,
              Value rhsMap, UncoveredFill fill, Value lhsMapValue)
      : g(g), rhsMap(rhsMap), lhsMapValue(lhsMapValue), fill(fill),
        tileM(config.tileM), tileN(config.tileN), stages(config.stages),
        numSMs(config.numSMs), staged(config.stagedEpilogue),
        bulk(config.stagedEpilogue && config.bulkStores && !config.swapAB),
        cluster(config.cluster), swap(config.swapAB),
        ctasPerSM(config.ctasPerSM), programmatic(config.programmatic),
        consumers(config.swapAB ? config.tileN / 64 : config.tileM / 64),
        kSlices(config.stageK / kTileK),
        kSteps((g.kDim + config.stageK - 1) / config.stageK),
        concat(g.glu && g.glu->layout == GluLayout::concat),
        outPerTile(g.glu ? config.tileN / 2 : config.tileN),
        colTiles((g.outN + outPerTile - 1) / outPerTile),
        ragged{g.offsets, g.m, g.numExperts, config.tileM},
        locateEach(config.swapAB),
        skew(config.swapAB || consumers != 2 || kSteps < config.stages
                 ? 0
                 : std::min(config.consumerSkew, config.stages - 1)),
        idleSkip(config.idleSkip && !config.swapAB && skew == 0 && kSteps > 1),
        resync(consumers == 2), handoff(!config.swapAB && !idleSkip) {}

  void emit(LoweringBuilder &b);
  /// The kernel body (emit launches it).
  void emitBody(LoweringBuilder &kb, const KernelIds &ids, int64_t threads);

private:
  int64_t aBytes() const { return tileM * 128; }
  /// One 64-element K slice of a stage: tileM lhs rows then tileN rhs
  /// rows (or 64 K rows of tileN rhs columns), 128 bytes each, swizzled.
  int64_t sliceBytes() const { return (tileM + tileN) * 128; }
  /// A stage holds kSlices slices, K-adjacent.
  int64_t stageBytes() const { return kSlices * sliceBytes(); }
  /// First K element of slice `h` of K step `kt`.
  Value sliceStartK(LoweringBuilder &b, Value kt, int64_t h) const {
    return b.mul(b.add(b.mul(kt, b.idx(kSlices)), b.idx(h)), b.idx(kTileK));
  }
  /// The header before the stages (1024 bytes): barriers (16 * stages <=
  /// 128 bytes), from byte 128 the item handoff's barriers and record, from
  /// byte 512 the row table's destinations (i32, 256 bytes per consumer
  /// warpgroup). Then the stages, then each consumer warpgroup's epilogue
  /// staging, then (main kernel) the row table's routing weights (f32, 512
  /// bytes: past the staging, as the tiles need their 1024-byte alignment
  /// and a 227 KiB block has no 1024 bytes to spare for a larger header).
  /// GemmConfig.cpp's overheads count all but the tiles and the staging,
  /// and the 1024 bytes of alignment slack.
  int64_t headerBytes() const { return 1024; }
  int64_t stagingBytes() const {
    return staged ? consumers * kWgmmaStagingBytes : 0;
  }
  int64_t sharedBytes() const {
    if (swap)
      return headerBytes() + stages * stageBytes() +
             wgmmaSwapStagingBytes(tileM, tileN);
    return headerBytes() + stages * stageBytes() + stagingBytes() + 512;
  }
  /// Global address of output element (row, col): 64-bit arithmetic (the
  /// i32 form overflows past 2^31 elements, docs/FieldBugs.md).
  Value outputAddress(LoweringBuilder &b, Value row, Value col) const {
    Value offset = b.add(b.mul(row, outStride), col);
    int64_t elemBytes = g.outElem.getIntOrFloatBitWidth() / 8;
    return arith::AddIOp::create(
        b, outAddr, nvvm::toI64(b, b.mul(offset, b.idx(elemBytes))));
  }
  Value epilogueAddress(LoweringBuilder &b, Value cw) {
    return add64(b, add64(b, base, headerBytes() + stages * stageBytes()),
                 mul64(b, nvvm::toI64(b, cw), kWgmmaStagingBytes));
  }

  Value add64(LoweringBuilder &b, Value a, Value c) {
    return arith::AddIOp::create(b, a, c);
  }
  Value add64(LoweringBuilder &b, Value a, int64_t c) {
    return c ? add64(b, a, nvvm::i64(b, c)) : a;
  }
  Value mul64(LoweringBuilder &b, Value a, int64_t c) {
    return arith::MulIOp::create(b, a, nvvm::i64(b, c));
  }
  Value fullBarrier(LoweringBuilder &b, Value s) {
    return add64(b, base, mul64(b, nvvm::toI64(b, s), 8));
  }
  Value emptyBarrier(LoweringBuilder &b, Value s) {
    return add64(b, add64(b, base, 8 * stages), mul64(b, nvvm::toI64(b, s), 8));
  }
  Value stageAddress(LoweringBuilder &b, Value s) {
    return add64(b, add64(b, base, headerBytes()),
                 mul64(b, nvvm::toI64(b, s), stageBytes()));
  }
  /// (stage, round parity) of pipeline step `step`.
  std::pair<Value, Value> stageOf(LoweringBuilder &b, Value step) {
    Value s = arith::RemUIOp::create(b, step, b.idx(stages));
    Value round = arith::DivUIOp::create(b, step, b.idx(stages));
    return {s, round};
  }
  Value parity(LoweringBuilder &b, Value round) {
    return b.toI32(arith::AndIOp::create(b, round, b.idx(1)));
  }

  /// Runs `body` on each of the block's work items. Without `walk` only
  /// the items' pipeline steps are known (WorkItem::step): the consumers
  /// of the item handoff, which get the rest from the producer.
  void forEachItem(LoweringBuilder &b, Value tid, Value blockX, Value gridX,
                   function_ref<void(LoweringBuilder &, const WorkItem &)> body,
                   bool walk = true);
  /// Work units of an expert with `tiles` row tiles: coupled, tiles / 2
  /// row-tile pairs x colTiles plus ceil(colTiles / 2) column pairs of an
  /// odd last row tile; uncoupled, tiles x colTiles.
  Value clusterUnits(LoweringBuilder &b, Value tiles) const;
  void forEachClusterItem(
      LoweringBuilder &b, Value tid, Value blockX, Value gridX,
      function_ref<void(LoweringBuilder &, const WorkItem &)> body, bool walk);
  /// Consumers free stage `s`: every thread arrives on the CTA's empty
  /// barrier; in cluster kernels one thread per warpgroup arrives on it
  /// and on the peer's (whose producer multicasts into this CTA).
  void releaseStage(LoweringBuilder &b, Value ct, Value s);
  void producer(LoweringBuilder &b, Value tid, const WorkItem &item);
  /// Item handoff, producer side, at K step handoffStep() of the item: once
  /// the consumers have finished the previous item's epilogue, its record
  /// and (staged) its row table, `entry` = this producer thread's row's
  /// (destination, routing weight), then an arrival on tableFull.
  void publishItem(LoweringBuilder &b, Value tid, const WorkItem &item,
                   ArrayRef<Value> entry);
  /// K step of an item at which the producer publishes it: the last one
  /// it issues before it would wait for the item's first step to be
  /// consumed, which follows the previous item's epilogue anyway.
  int64_t handoffStep() const { return std::min(stages, kSteps) - 1; }
  /// Item handoff, consumer side, after the MMAs: waits for the item's
  /// record and returns it (step as given; staged, the first row and the
  /// rows are null: the row table has them).
  WorkItem receiveItem(LoweringBuilder &b, Value step);
  void loadRhsByTma(LoweringBuilder &b, Value stage, Value barrier, Value kt,
                    const WorkItem &item);
  /// The lhs tile of K step `kt` by TMA (config.lhsTma): one box of tileM
  /// rows from the item's first row per K slice, in the layout the
  /// cp.async loader writes (128-byte swizzle); its bytes are in
  /// loadRhsByTma's expect_tx. The rows past the item (the next expert's)
  /// are loaded too, and their results dropped by the epilogue; rows and
  /// K past the lhs's end read zeros.
  void loadLhsByTma(LoweringBuilder &b, Value stage, Value barrier, Value kt,
                    const WorkItem &item);
  /// The lhs boxes (kLhsBoxRows rows each) that cover the item's rows: a
  /// short tile (an expert's last) loads only those, not a whole tileM of
  /// the next expert's rows (measured: DeepSeek-V3 T=4096, about one tile
  /// per expert, +2% with whole-tile boxes, bench/NOTES.md v56).
  Value lhsBoxes(LoweringBuilder &b, const WorkItem &item) const {
    return b.minIdx(
        b.div(b.add(item.tileRows, b.idx(kLhsBoxRows - 1)), b.idx(kLhsBoxRows)),
        b.idx(tileM / kLhsBoxRows));
  }
  /// The MMA loop and epilogue of one consumer warpgroup on an item.
  /// (Skipping the MMAs of a warpgroup with no rows in a short tile was
  /// measured slower on every compute-bound cell: bench/NOTES.md v9.)
  void consumeTile(LoweringBuilder &b, Value tid, Value cw,
                   const WorkItem &item);
  /// The fragment layout of the output columns (m64nNk16 f32
  /// accumulators): the thread holds rows 16 * warp + lane / 4 (h = 0) and
  /// + 8 (h = 1); output columns come in groups of groupWidth(); in group
  /// j the thread has the columns local + quadStride() * (lane % 4) + p,
  /// p < acc.size(), acc[p] the accumulator indices of column p (gate /
  /// plain, and up with GLU). Interleaved GLU: groups of 4, one column per
  /// thread (gate 2c, up 2c + 1 adjacent in the fragment); plain: groups
  /// of 8, two columns; concat: the tile holds the gate half and the up
  /// half of the same columns, groups of 8.
  struct FragmentGroup {
    int64_t local;
    SmallVector<SmallVector<int64_t, 2>, 2> acc;
  };
  bool interleaved() const { return g.glu && !concat; }
  int64_t groupWidth() const { return interleaved() ? 4 : 8; }
  int64_t quadStride() const { return interleaved() ? 1 : 2; }
  FragmentGroup fragmentGroup(int64_t j, int64_t h) const {
    if (interleaved())
      return {4 * j, {{4 * j + 2 * h, 4 * j + 2 * h + 1}}};
    int64_t frags = concat ? tileN / 16 : tileN / 8;
    FragmentGroup group{8 * j, {}};
    for (int64_t p = 0; p < 2; ++p) {
      int64_t i = 4 * j + 2 * h + p;
      group.acc.push_back(concat ? SmallVector<int64_t, 2>{i, i + 4 * frags}
                                 : SmallVector<int64_t, 2>{i});
    }
    return group;
  }
  /// The thread's part of a group's columns: quadStride() * (lane % 4).
  Value quadColumn(LoweringBuilder &b, Value quad) const {
    return quadStride() == 1 ? quad : b.mul(quad, b.idx(quadStride()));
  }

  /// Stores the tile: element stores from the fragments (direct) or
  /// through the warpgroup's shared staging, whole rows by 16-byte stores
  /// (staged).
  void epilogueDirect(LoweringBuilder &b, Value ct, Value cw,
                      const WorkItem &item, Value acc);
  /// Routing weights of a thread's two fragment rows (null without scale).
  struct RowFactors {
    Value h[2];
    /// Bulk stores: the destination (i32, -1 when out of the tile or
    /// dropped) of the row whose copy this thread issues, row ct / 2.
    Value bulkDest;
  };
  /// Staged epilogue, before the MMAs: the destination of each of the
  /// warpgroup's 64 rows (-1 when out of the tile or dropped) into its
  /// row table in shared memory (thread ct < 64 writes row ct), and this
  /// thread's fragment-row routing weights.
  RowFactors prefetchRowTargets(LoweringBuilder &b, Value ct, Value cw,
                                const WorkItem &item);
  /// Item handoff: the same from the row table the producer wrote.
  RowFactors tableFactors(LoweringBuilder &b, Value ct, Value cw);
  /// Row `r` (within the tile) of `item`: its destination (i32; -1 past
  /// the tile or dropped) and, with `withFactor` and a scale operand, its
  /// routing weight (f32; 0 past the tile).
  SmallVector<Value> rowEntry(LoweringBuilder &b, const WorkItem &item, Value r,
                              bool withFactor);
  void epilogueStaged(LoweringBuilder &b, Value ct, Value cw,
                      const WorkItem &item, Value acc,
                      const RowFactors &factors);
  /// Small-M epilogue: the fragments (rows = this warpgroup's 64 rhs
  /// columns, columns = tokens) go to the block's f32 staging, transposed
  /// ([token][rhs column], row pitch tileN + 4), then every consumer
  /// thread turns whole 16-byte output chunks of a token row into bias,
  /// GLU, scale, and one store. `tid` counts from the block's first thread.
  /// Where the token rows this thread stores go (destination, -1 when
  /// out of the tile or dropped, and routing weight or null).
  struct SwapTargets {
    SmallVector<Value> dest, factor;
  };
  /// Small-M, before the MMAs: the targets of the token rows of this
  /// thread's output chunks (chunk u = tid - 128 + i * threads: one token
  /// per i), so that their dependent loads (scatter index, then routing
  /// weight) complete under the MMAs instead of in the store loop. Empty
  /// when the chunks do not split evenly over the threads (the epilogue
  /// then loads them itself).
  SwapTargets prefetchSwapTargets(LoweringBuilder &b, Value tid,
                                  const WorkItem &item);
  void epilogueSwapped(LoweringBuilder &b, Value tid, Value cw,
                       const WorkItem &item, Value acc,
                       const SwapTargets &targets);
  /// Output chunks (16 bytes) of one small-M tile, and the consumer
  /// threads that store them.
  int64_t swapChunks() const {
    return outPerTile / (16 / (g.outElem.getIntOrFloatBitWidth() / 8));
  }
  /// The row table of consumer warpgroup `cw` (64 i32 in the barrier
  /// area's upper half).
  Value rowTableAddress(LoweringBuilder &b, Value cw) {
    return add64(b, add64(b, base, 512), mul64(b, nvvm::toI64(b, cw), 256));
  }
  /// Item handoff (main kernel): the producer publishes each item's record
  /// (i32: expert, column tile, and without the staged epilogue the first
  /// row and the rows) and row table (the
  /// destinations at rowTableAddress, the routing weights at
  /// factorTableAddress, one row per producer thread), so that the
  /// consumers neither walk the experts nor load row targets before an
  /// item's MMAs (bench/NOTES.md v51). tableFull completes once per item
  /// (the producer's 128 arrivals), tableEmpty once the consumers are done
  /// with it (every consumer thread, after the epilogue).
  Value tableFull(LoweringBuilder &b) { return add64(b, base, 128); }
  Value tableEmpty(LoweringBuilder &b) { return add64(b, base, 136); }
  Value recordAddress(LoweringBuilder &b, int64_t field) {
    return add64(b, base, 160 + 4 * field);
  }
  Value factorTableAddress(LoweringBuilder &b, Value row) {
    return add64(
        b,
        add64(b, base, headerBytes() + stages * stageBytes() + stagingBytes()),
        nvvm::toI64(b, b.mul(row, b.idx(4))));
  }

  const GemmOperands &g;
  Value rhsMap; // rhs tensor map (i64) when its tiles come by TMA
  /// lhs tensor map by value (!llvm.array<16 x i64>, host side) when the
  /// lhs tiles come by TMA (config.lhsTma); lhsMap is its address in the
  /// kernel (a by-value grid-constant parameter once outlined:
  /// moe-gpu-tensor-map-params).
  Value lhsMapValue, lhsMap;
  UncoveredFill fill; // zeroed by the consumers first (Unread: none)
  const int64_t tileM, tileN, stages, numSMs;
  const bool staged;
  /// Staged rows leave by cp.async.bulk (config.bulkStores; see
  /// epilogueStaged).
  const bool bulk;
  const int64_t cluster;
  /// Small-M form (config.swapAB): rhs rows on the wgmma M side.
  const bool swap;
  const int64_t ctasPerSM;
  /// Launched programmatically (config.programmatic).
  const bool programmatic;
  const int64_t consumers;
  /// 64-element K slices per stage (config.stageK / 64) and K steps.
  const int64_t kSlices, kSteps;
  const bool concat;
  const int64_t outPerTile, colTiles;
  RaggedTiles ragged;
  /// Experts per round of the walk from one item to the block's next: one
  /// (the first item is found by RaggedTiles::locate; rounds of 8 here
  /// were 0-2% slower on every cell, bench/NOTES.md v28).
  static constexpr int64_t advanceUnroll = 1;
  /// Small-M kernel: every item's expert is found by the whole warp
  /// (RaggedTiles::locate) instead of the walk from the previous item. At
  /// few rows most experts are empty and the walk crossed ~E / hit of them
  /// per item, a dependent load each, while the weight stream stalled
  /// (DeepSeek-V3 T=1 243 -> 194 us, bench/NOTES.md v34).
  const bool locateEach;
  /// K steps by which consumer warpgroup 1 starts each tile after
  /// warpgroup 0 (config.consumerSkew where it applies, else 0): warpgroup
  /// 0 arrives on named barrier kSkewBarrier once it has issued that many
  /// steps of a tile, and warpgroup 1 waits for it before its first. Each
  /// warpgroup's epilogue then runs while the other one's MMAs do (both
  /// in step, the tensor cores idle during the common epilogue). No
  /// deadlock: what warpgroup 0 waits for at step skew < stages was
  /// released in the previous tile; no arrival overtakes a wait: with
  /// kSteps >= stages, warpgroup 0 cannot reach step skew of the next
  /// tile before warpgroup 1 released a step of this one.
  const int64_t skew;
  /// A consumer warpgroup without rows in the tile stops its MMAs after
  /// the first K step (consumeTile).
  const bool idleSkip;
  const bool resync;
  /// The item handoff (see tableFull): the main kernel without idle skip
  /// (whose consumers need each item's rows before its MMAs).
  const bool handoff;
  static constexpr int64_t kSkewBarrier = 3;
  /// Idle skip: the consumer warpgroups' barrier after each tile's MMAs.
  static constexpr int64_t kResyncBarrier = 4;
  // Kernel-wide values.
  Value base, lhsAddr, rhsAddr, lhsStride, rhsStride0, rhsStride1;
  Value outAddr, outStride, outVectorOk;
  /// This CTA's rank in its cluster (index), from the special register.
  Value clusterRank(LoweringBuilder &b) const {
    return arith::IndexCastUIOp::create(
        b, b.getIndexType(), NVVM::ClusterId::create(b, b.getI32Type()));
  }
  /// Cluster kernels: whether this launch runs in 2-CTA clusters (i1, the
  /// host's choice, see emit), and the same as a shift (index 1 / 0): the
  /// unit mapping and the peer rank use it, so that uncoupled they reduce
  /// to those of the kernel without clusters.
  Value coupledFlag, coupledShift;
};

void WgmmaKernel::forEachItem(
    LoweringBuilder &b, Value tid, Value blockX, Value gridX,
    function_ref<void(LoweringBuilder &, const WorkItem &)> body, bool walk) {
  if (cluster > 1)
    return forEachClusterItem(b, tid, blockX, gridX, body, walk);
  Value zero = b.idx(0);
  // The block's first item by the whole warp (RaggedTiles::locate): row
  // tile blockX / C. Expert e owns items [before * C, (before + tiles) *
  // C).
  Value lane = arith::AndIOp::create(b, tid, b.idx(kWarpSize - 1));
  auto identity = [](LoweringBuilder &, Value tiles) { return tiles; };
  RaggedTiles::Start start =
      ragged.locate(b, lane, b.div(blockX, b.idx(colTiles)), identity);
  Value totalItems = b.mul(start.total, b.idx(colTiles));
  b.forLoop(blockX, totalItems, gridX, {start.expert, start.before, zero},
            [&](LoweringBuilder &b, Value item,
                ValueRange state) -> SmallVector<Value> {
              Value next = b.add(state[2], b.idx(kSteps));
              if (!walk) {
                body(b, WorkItem{{}, {}, {}, {}, state[2]});
                return {state[0], state[1], next};
              }
              // Within an expert the row tile runs fastest, so the blocks
              // of one wave share each rhs tile (read from DRAM once) and
              // the expert's lhs rows stay in L2 across column tiles. The
              // item's expert: a short walk from the last one, or (small-M
              // kernel, locateEach) found again by the whole warp.
              Value expert, before;
              if (locateEach) {
                RaggedTiles::Start at = ragged.locate(
                    b, lane, b.div(item, b.idx(colTiles)), identity);
                expert = at.expert;
                before = at.before;
              } else {
                std::tie(expert, before) = ragged.advance(
                    b, item, state[0], state[1], colTiles, advanceUnroll);
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
              body(b, WorkItem{expert, rowStart, tileRows, colTile, state[2]});
              return {expert, before, next};
            });
}

Value WgmmaKernel::clusterUnits(LoweringBuilder &b, Value tiles) const {
  // Uncoupled the shift is 0: tiles "pairs" of one tile, no odd tile.
  Value shift = coupledShift;
  Value pairs = arith::ShRUIOp::create(b, tiles, shift);
  Value odd = arith::AndIOp::create(b, tiles, shift);
  return b.add(b.mul(pairs, b.idx(colTiles)),
               b.mul(odd, b.idx((colTiles + 1) / 2)));
}

void WgmmaKernel::forEachClusterItem(
    LoweringBuilder &b, Value tid, Value blockX, Value gridX,
    function_ref<void(LoweringBuilder &, const WorkItem &)> body, bool walk) {
  // Coupled: clusters are consecutive block pairs and both CTAs walk the
  // same units; uncoupled (no clusters; every shift below is 0, the rank
  // 0): every block walks the items on its own, as forEachItem.
  Value zero = b.idx(0);
  Value start = arith::ShRUIOp::create(b, blockX, coupledShift);
  Value stride = arith::ShRUIOp::create(b, gridX, coupledShift);
  auto unitsOf = [&](LoweringBuilder &b, Value tiles) {
    return clusterUnits(b, tiles);
  };
  Value lane = arith::AndIOp::create(b, tid, b.idx(kWarpSize - 1));
  RaggedTiles::Start first = ragged.locate(b, lane, start, unitsOf);
  b.forLoop(start, first.total, stride, {first.expert, first.before, zero},
            [&](LoweringBuilder &b, Value unit,
                ValueRange state) -> SmallVector<Value> {
              Value next = b.add(state[2], b.idx(kSteps));
              if (!walk) {
                body(b, WorkItem{{}, {}, {}, {}, state[2]});
                return {state[0], state[1], next};
              }
              // Expert e's units: first its row-tile pairs (uncoupled: its row
              // tiles), the pair index fastest (the pairs of a wave share each
              // weight tile in L2), then the column pairs of an odd last row
              // tile (coupled only).
              auto [expert, before] = ragged.advanceUnits(
                  b, unit, state[0], state[1], unitsOf, advanceUnroll);
              Value shift = coupledShift;
              Value tiles = ragged.tilesOf(b, expert);
              Value local = b.sub(unit, before);
              Value pairs = arith::ShRUIOp::create(b, tiles, shift);
              Value pairUnits = b.mul(pairs, b.idx(colTiles));
              Value inPairs = b.cmpi(CmpI::ult, local, pairUnits);
              Value safePairs = b.maxIdx(pairs, b.idx(1));
              Value pairCol = arith::DivUIOp::create(b, local, safePairs);
              Value pair = arith::RemUIOp::create(b, local, safePairs);
              Value rank = clusterRank(b);
              Value oddUnit = b.select(inPairs, zero, b.sub(local, pairUnits));
              Value colTile = b.select(inPairs, pairCol,
                                       b.add(b.mul(oddUnit, b.idx(2)), rank));
              Value rowTile = b.select(
                  inPairs, b.add(arith::ShLIOp::create(b, pair, shift), rank),
                  b.sub(b.maxIdx(tiles, b.idx(1)), b.idx(1)));
              Value lo = ragged.offsetAt(b, expert);
              Value hi = ragged.offsetAt(b, b.add(expert, b.idx(1)));
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
              body(b, WorkItem{expert, rowStart, tileRows, colTile, state[2],
                               b.andi(coupledFlag, inPairs)});
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

void WgmmaKernel::producer(LoweringBuilder &b, Value tid,
                           const WorkItem &item) {
  // Item handoff: row tid's destination and routing weight, loaded now and
  // stored at the handoff step (the loads complete under the copies).
  SmallVector<Value> entry;
  if (handoff && staged)
    entry = rowEntry(b, item, tid, /*withFactor=*/true);
  // Thread t copies chunk c = t % 8 (16 bytes) of rows t / 8 + 16 j.
  Value c = arith::AndIOp::create(b, tid, b.idx(7));
  Value rg = arith::AndIOp::create(b, arith::ShRUIOp::create(b, tid, b.idx(3)),
                                   b.idx(15));
  Value swizzled =
      arith::XOrIOp::create(b, c, arith::AndIOp::create(b, rg, b.idx(7)));
  Value dstOffset =
      nvvm::toI64(b, b.add(b.mul(rg, b.idx(128)), b.mul(swizzled, b.idx(16))));
  Value elemBytes = b.idx(2);

  // Row start addresses and validity, fixed for the item.
  SmallVector<Value> aRow, aOk, bRow, bOk;
  for (int64_t j = 0; !lhsMap && j < tileM / 16; ++j) {
    Value r = b.add(rg, b.idx(16 * j));
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
    aRow.push_back(
        add64(b, lhsAddr,
              nvvm::toI64(b, b.mul(b.mul(srcRow, lhsStride), elemBytes))));
    aOk.push_back(ok);
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
    bool kTail = g.kDim % (kTileK * kSlices) != 0;
    // First K element of slice h of this step.
    for (int64_t h = 0; h < kSlices; ++h) {
      Value stage = add64(b, add64(b, stageBase, h * sliceBytes()), dstOffset);
      Value k = b.add(sliceStartK(b, kt, h), b.mul(c, b.idx(8)));
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
      for (int64_t j = 0; !rhsMap && g.transposed && j < tileN / 16; ++j)
        copy(add64(b, stage, aBytes() + 2048 * j), bRow[j], bOk[j], rhsAddr);
    }
    if (rhsMap)
      when(b, b.cmpi(CmpI::eq, tid, b.idx(0)), [&](LoweringBuilder &b) {
        loadRhsByTma(b, stageBase, fullBarrier(b, s), kt, item);
        if (lhsMap)
          loadLhsByTma(b, stageBase, fullBarrier(b, s), kt, item);
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
  Value index = arith::DivUIOp::create(b, item.step, b.idx(kSteps));
  when(b, b.cmpi(CmpI::ne, index, b.idx(0)), [&](LoweringBuilder &b) {
    nvvm::mbarrierWait(b, tableEmpty(b), parity(b, b.sub(index, b.idx(1))));
  });
  // The record: the staged epilogue needs the expert and the column tile
  // only (its rows are in the table), which the copies keep live anyway
  // (the producer has 40 registers).
  when(b, b.cmpi(CmpI::eq, tid, b.idx(0)), [&](LoweringBuilder &b) {
    Value fields[] = {item.expert, item.colTile, item.rowStart, item.tileRows};
    for (int64_t i = 0; i < (staged ? 2 : 4); ++i)
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
  Value index = arith::DivUIOp::create(b, step, b.idx(kSteps));
  nvvm::mbarrierWait(b, tableFull(b), parity(b, index));
  Value fields[4];
  for (int64_t i = 0; i < (staged ? 2 : 4); ++i)
    fields[i] =
        b.toIndex(nvvm::loadShared(b, b.getI32Type(), recordAddress(b, i)));
  return WorkItem{fields[0], fields[2], fields[3], fields[1], step};
}

void WgmmaKernel::loadLhsByTma(LoweringBuilder &b, Value stage, Value barrier,
                               Value kt, const WorkItem &item) {
  Value boxes = lhsBoxes(b, item);
  for (int64_t p = 0; p < tileM / kLhsBoxRows; ++p)
    when(b, b.cmpi(CmpI::ult, b.idx(p), boxes), [&](LoweringBuilder &b) {
      Value row = b.toI32(b.add(item.rowStart, b.idx(p * kLhsBoxRows)));
      for (int64_t h = 0; h < kSlices; ++h)
        nvvm::tmaLoad3D(
            b, add64(b, stage, h * sliceBytes() + p * kLhsBoxRows * 128),
            lhsMap, barrier, {b.toI32(sliceStartK(b, kt, h)), row, b.i32(0)});
    });
}

/// The rhs tile of K step `kt` by TMA, in the layouts the cp.async loaders
/// write: K-major as two boxes of tileN / 2 rows (the gate and the up half
/// with concat GLU), MN-major as tileN / 64 boxes of 64 columns x 64 K rows.
/// The 3-D map ([E, rows, K] or [E, K, N]) zero-fills past each expert's
/// end, so K and N tails need no masking.
void WgmmaKernel::loadRhsByTma(LoweringBuilder &b, Value stage, Value barrier,
                               Value kt, const WorkItem &item) {
  // In a cluster both halves of a shared tile land here (one multicast by
  // each CTA): the expected bytes are the whole tile either way (and the
  // lhs tile's, loadLhsByTma).
  Value bytes = b.i32(kSlices * tileN * 128);
  if (lhsMap)
    bytes = arith::AddIOp::create(
        b, bytes,
        b.toI32(b.mul(lhsBoxes(b, item), b.idx(kSlices * kLhsBoxRows * 128))));
  nvvm::mbarrierArriveExpectTx(b, barrier, bytes);
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

void WgmmaKernel::consumeTile(LoweringBuilder &b, Value tid, Value cw,
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
  // One K step: wait for the stage, its MMAs (the tile's first without
  // accumulating: the accumulators need no zeros), and the release of the
  // step before it, whose group has now finished reading its stage.
  auto kStep = [&](LoweringBuilder &b, Value kt, Value acc, bool first) {
    Value step = b.add(item.step, kt);
    auto [s, round] = stageOf(b, step);
    nvvm::mbarrierWait(b, fullBarrier(b, s), parity(b, round));
    nvvm::fenceProxyAsyncShared(b);
    Value stage = stageAddress(b, s);
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
  Value acc = kStep(b, zero, LLVM::PoisonOp::create(b, accType), true);
  auto steps = [&](int64_t from, Value to, Value acc) {
    return b.forLoop(
        b.idx(from), to, {acc},
        [&](LoweringBuilder &b, Value kt, ValueRange in) -> SmallVector<Value> {
          return {kStep(b, kt, in[0], false)};
        })[0];
  };
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
  if (idleSkip) {
    Value hasRows = b.cmpi(CmpI::ugt, item.tileRows, b.mul(cw, b.idx(64)));
    mmaSteps = b.select(hasRows, mmaSteps, b.idx(1));
  }
  acc = steps(skew ? skew : 1, mmaSteps, acc);
  nvvm::wgmmaWait(b, 0);
  Value last = arith::RemUIOp::create(
      b, b.sub(b.add(item.step, mmaSteps), b.idx(1)), b.idx(stages));
  releaseStage(b, ct, last);
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
    return;
  }
  if (!handoff) {
    if (staged)
      epilogueStaged(b, ct, cw, item, acc, factors);
    else
      epilogueDirect(b, ct, cw, item, acc);
    return;
  }
  WorkItem received = receiveItem(b, item.step);
  if (staged) {
    factors = tableFactors(b, ct, cw);
    epilogueStaged(b, ct, cw, received, acc, factors);
  } else {
    epilogueDirect(b, ct, cw, received, acc);
  }
  // This thread is done with the item's record and row table.
  nvvm::mbarrierArrive(b, tableEmpty(b));
}

WgmmaKernel::RowFactors WgmmaKernel::tableFactors(LoweringBuilder &b, Value ct,
                                                  Value cw) {
  Value wgRow0 = b.mul(cw, b.idx(64));
  RowFactors factors;
  if (bulk)
    factors.bulkDest = nvvm::loadShared(
        b, b.getI32Type(),
        add64(b, rowTableAddress(b, cw),
              nvvm::toI64(b, b.mul(arith::ShRUIOp::create(b, ct, b.idx(1)),
                                   b.idx(4)))));
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

void WgmmaKernel::epilogueDirect(LoweringBuilder &b, Value ct, Value cw,
                                 const WorkItem &item, Value acc) {
  Value warp = arith::ShRUIOp::create(b, ct, b.idx(5));
  Value lane = arith::AndIOp::create(b, ct, b.idx(31));
  Value quad = arith::AndIOp::create(b, lane, b.idx(3));
  Value row0 = b.add(b.add(b.mul(cw, b.idx(64)), b.mul(warp, b.idx(16))),
                     arith::ShRUIOp::create(b, lane, b.idx(2)));
  Value colBase = b.mul(item.colTile, b.idx(outPerTile));
  auto value = [&](LoweringBuilder &b, int64_t i) -> Value {
    return LLVM::ExtractValueOp::create(b, acc, ArrayRef<int64_t>{i});
  };
  for (int64_t h = 0; h < 2; ++h) {
    Value r = b.add(row0, b.idx(8 * h));
    when(b, b.cmpi(CmpI::ult, r, item.tileRows), [&](LoweringBuilder &b) {
      RowTarget target = rowTarget(b, g, b.add(item.rowStart, r));
      when(b, target.valid, [&](LoweringBuilder &b) {
        auto store = [&](Value c, ArrayRef<Value> v) {
          when(b, b.cmpi(CmpI::ult, c, b.idx(g.outN)), [&](LoweringBuilder &b) {
            storeOutput(b, g, target, item.expert, c, v);
          });
        };
        for (int64_t j = 0; j < outPerTile / groupWidth(); ++j) {
          FragmentGroup group = fragmentGroup(j, h);
          for (auto [p, indices] : llvm::enumerate(group.acc)) {
            Value c = b.add(colBase,
                            b.add(b.idx(group.local + p), quadColumn(b, quad)));
            SmallVector<Value, 2> v;
            for (int64_t i : indices)
              v.push_back(value(b, i));
            store(c, v);
          }
        }
      });
    });
  }
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

WgmmaKernel::RowFactors WgmmaKernel::prefetchRowTargets(LoweringBuilder &b,
                                                        Value ct, Value cw,
                                                        const WorkItem &item) {
  Value wgRow0 = b.mul(cw, b.idx(64));
  // Destination (i32) of the warpgroup's row r: -1 when past the tile or
  // dropped.
  auto destOf = [&](LoweringBuilder &b, Value r) {
    return rowEntry(b, item, r, /*withFactor=*/false)[0];
  };
  when(b, b.cmpi(CmpI::ult, ct, b.idx(64)), [&](LoweringBuilder &b) {
    nvvm::storeShared(
        b,
        add64(b, rowTableAddress(b, cw), nvvm::toI64(b, b.mul(ct, b.idx(4)))),
        {destOf(b, b.add(wgRow0, ct))});
  });
  RowFactors factors;
  if (bulk)
    factors.bulkDest =
        destOf(b, b.add(wgRow0, arith::ShRUIOp::create(b, ct, b.idx(1))));
  // Routing weights of the thread's two fragment rows (rows past the
  // tile: 0).
  Value warp = arith::ShRUIOp::create(b, ct, b.idx(5));
  Value lane = arith::AndIOp::create(b, ct, b.idx(31));
  Value row0 =
      b.add(b.mul(warp, b.idx(16)), arith::ShRUIOp::create(b, lane, b.idx(2)));
  for (int64_t h = 0; g.scale && h < 2; ++h) {
    Value r = b.add(wgRow0, b.add(row0, b.idx(8 * h)));
    Value inTile = b.cmpi(CmpI::ult, r, item.tileRows);
    factors.h[h] = b.ifElse(
        inTile, {b.getF32Type()},
        [&](LoweringBuilder &b) -> SmallVector<Value> {
          return {rowTarget(b, g, b.add(item.rowStart, r)).factor};
        },
        [&](LoweringBuilder &b) -> SmallVector<Value> {
          return {b.f32(0.0f)};
        })[0];
  }
  return factors;
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
  // chunk ^ (row % 8) (staged), or, with bulk stores, rotated to chunk
  // (chunk + row % 8) % 16, so that a row's bytes stay in order (one
  // contiguous piece, or two when the rotation wraps) for the copy engine.
  // Both put the 8 rows of a fragment store in 8 different bank groups.
  auto physicalChunk = [&](LoweringBuilder &b, Value chunk, Value key) {
    if (bulk)
      return arith::AndIOp::create(b, b.add(chunk, key), b.idx(15)).getResult();
    return arith::XOrIOp::create(b, chunk, key).getResult();
  };
  auto sharedAddress = [&](LoweringBuilder &b, int64_t h, int64_t cl,
                           Value dynamic) -> Value {
    int64_t bytes = cl * outBytes;
    if (outBytes == 2) {
      // dynamic * 2 + bytes % 16 < 16: no carry out of the chunk.
      Value key = b.add(b.mul(swizzle, b.idx(16)), b.mul(dynamic, b.idx(2)));
      if (bulk) {
        // Rows are 256-byte aligned: the rotation is an add within them.
        Value within = arith::AndIOp::create(b, b.add(key, b.idx(bytes)),
                                             b.idx(kEpilogueRowBytes - 1));
        return arith::OrIOp::create(b, rowBase[h], nvvm::toI64(b, within));
      }
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
  for (int64_t lo = 0; lo < outPerTile; lo += passCols) {
    const int64_t width = std::min(passCols, outPerTile - lo);
    // Bulk stores: the copies issued from the staging (the previous pass's,
    // or the previous tile's) have read it before anyone overwrites it.
    if (bulk) {
      nvvm::bulkWait(b, /*read=*/true);
      nvvm::namedBarrier(b, wgBarrier, 128);
    }
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
        }
        // Adjacent columns of one thread go as one (vector) store.
        nvvm::storeShared(b, sharedAddress(b, h, group.local - lo, dynamic),
                          columns);
      }
    }
    // The copy engine (async proxy) reads what these generic stores wrote.
    if (bulk)
      nvvm::fenceProxyAsyncShared(b);
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
      // Written by the producer (item handoff; with idle skip before the
      // MMAs, prefetchRowTargets): -1 for rows past the tile or dropped.
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
      // The next pass (or item) overwrites the staging, and (idle skip)
      // the next item's prefetchRowTargets the row table.
      nvvm::namedBarrier(b, wgBarrier, 128);
    };
    if (!bulk) {
      threadStores(b);
      continue;
    }
    // Bulk stores of whole rows (aligned output, no column past outN in
    // this pass; else the thread stores): thread ct copies row ct / 2's
    // piece ct % 2. Row r's chunks start at chunk r % 8 of its 256 bytes
    // and wrap: piece 0 is the first min(C, 16 - r % 8) chunks, piece 1
    // the rest (from the row's start), C = chunksPerRow.
    Value bulkOk =
        b.andi(outVectorOk, b.cmpi(CmpI::ule, b.add(colBase, b.idx(lo + width)),
                                   b.idx(g.outN)));
    scf::IfOp::create(
        b, bulkOk,
        [&](OpBuilder &nested, Location loc) {
          LoweringBuilder b(loc, nested);
          Value rowW = arith::ShRUIOp::create(b, ct, b.idx(1));
          Value second = b.cmpi(
              CmpI::eq, arith::AndIOp::create(b, ct, b.idx(1)), b.idx(1));
          Value rot = arith::AndIOp::create(b, rowW, b.idx(7));
          Value first = b.minIdx(b.idx(chunksPerRow),
                                 b.sub(b.idx(kEpilogueRowBytes / 16), rot));
          Value chunks =
              b.select(second, b.sub(b.idx(chunksPerRow), first), first);
          Value srcChunk = b.select(second, b.idx(0), rot);
          Value colOff = b.select(second, b.mul(first, b.idx(vec)), b.idx(0));
          Value dest = factors.bulkDest;
          when(b,
               b.andi(b.cmpi(CmpI::sge, dest, b.i32(0)),
                      b.cmpi(CmpI::ugt, chunks, b.idx(0))),
               [&](LoweringBuilder &b) {
                 Value col = b.add(b.add(colBase, b.idx(lo)), colOff);
                 Value src = add64(
                     b, staging,
                     nvvm::toI64(b, b.add(b.mul(rowW, b.idx(kEpilogueRowBytes)),
                                          b.mul(srcChunk, b.idx(16)))));
                 nvvm::bulkCopySharedToGlobal(
                     b, src, outputAddress(b, b.toIndex(dest), col),
                     b.toI32(b.mul(chunks, b.idx(16))));
               });
          nvvm::bulkCommit(b);
          scf::YieldOp::create(b);
        },
        [&](OpBuilder &nested, Location loc) {
          LoweringBuilder b(loc, nested);
          threadStores(b);
          scf::YieldOp::create(b);
        });
  }
}

WgmmaKernel::SwapTargets
WgmmaKernel::prefetchSwapTargets(LoweringBuilder &b, Value tid,
                                 const WorkItem &item) {
  const int64_t threads = 128 * consumers;
  const int64_t chunks = swapChunks();
  SwapTargets targets;
  if ((tileM * chunks) % threads != 0)
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
  for (int64_t j = 0; j < tileM / 8; ++j)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t p = 0; p < 2; ++p) {
        Value v = LLVM::ExtractValueOp::create(
            b, acc, ArrayRef<int64_t>{4 * j + 2 * h + p});
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
  // Output chunk `chunk` of `token`, whose row goes to `target` (valid).
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
      values.push_back(outputValue(b, g, target.factor, item.expert, c, accs));
    }
    Value whole = b.andi(
        outVectorOk, b.cmpi(CmpI::ule, b.add(col0, b.idx(vec)), b.idx(g.outN)));
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
  if (!targets.dest.empty()) {
    // The targets came before the MMAs (prefetchSwapTargets).
    for (auto [i, dest] : llvm::enumerate(targets.dest)) {
      Value u = b.add(u0, b.idx(static_cast<int64_t>(i) * threads));
      Value token = arith::DivUIOp::create(b, u, b.idx(chunks));
      Value chunk = arith::RemUIOp::create(b, u, b.idx(chunks));
      when(b, b.cmpi(CmpI::sge, dest, b.i32(0)), [&](LoweringBuilder &b) {
        RowTarget target{b.toIndex(dest), Value(), targets.factor[i]};
        storeChunk(b, token, chunk, target);
      });
    }
  } else {
    forEach(b, u0, b.idx(tileM * chunks), b.idx(threads),
            [&](LoweringBuilder &b, Value u) {
              Value token = arith::DivUIOp::create(b, u, b.idx(chunks));
              Value chunk = arith::RemUIOp::create(b, u, b.idx(chunks));
              when(b, b.cmpi(CmpI::ult, token, item.tileRows),
                   [&](LoweringBuilder &b) {
                     RowTarget target =
                         rowTarget(b, g, b.add(item.rowStart, token));
                     when(b, target.valid, [&](LoweringBuilder &b) {
                       storeChunk(b, token, chunk, target);
                     });
                   });
            });
  }
  // The next item's fragments overwrite the staging.
  nvvm::namedBarrier(b, b.i32(1), threads);
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
        if (consumers > 1)
          nvvm::setMaxRegisters(b, kProducerRegs, /*increase=*/false);
        forEachItem(b, tid, blockX, gridX,
                    [&](LoweringBuilder &b, const WorkItem &item) {
                      producer(b, tid, item);
                    });
        scf::YieldOp::create(b);
      },
      [&](OpBuilder &nested, Location loc) {
        LoweringBuilder b(loc, nested);
        if (consumers > 1)
          nvvm::setMaxRegisters(b, kConsumerRegs, /*increase=*/true);
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

} // namespace

void gpu_lowering::emitWgmmaExpertGemm(LoweringBuilder &b,
                                       const GemmOperands &g,
                                       const GemmKernelConfig &config,
                                       Value rhsMap, UncoveredFill fill,
                                       Value lhsMap) {
  WgmmaKernel(g, config, rhsMap, fill, lhsMap).emit(b);
}

std::pair<Value, Value>
gpu_lowering::emitLhsTensorMap(LoweringBuilder &b, ModuleOp module,
                               const GemmOperands &g,
                               const GemmKernelConfig &config) {
  constexpr StringLiteral kName = "moeRuntimeEncodeTensorMap3D";
  Type i64 = b.getI64Type();
  if (!module.lookupSymbol(kName)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto fn = func::FuncOp::create(
        b, kName, b.getFunctionType(SmallVector<Type>(13, i64), {i64}));
    fn.setPrivate();
  }
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
                                     const GemmKernelConfig &config) {
  constexpr StringLiteral kName = "moeRuntimeTensorMap3D";
  Type i64 = b.getI64Type();
  if (!module.lookupSymbol(kName)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto fn = func::FuncOp::create(
        b, kName, b.getFunctionType(SmallVector<Type>(12, i64), {i64}));
    fn.setPrivate();
  }
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
    args.append({c(g.kDim), c(g.gemmN), c(g.numExperts), s1, s0, c(kTileK),
                 c(config.tileN / 2), c(1)});
  else
    args.append({c(g.gemmN), c(g.kDim), c(g.numExperts), s1, s0, c(64),
                 c(kTileK), c(1)});
  // CUtensorMapL2promotion: NONE = 0, L2_64B = 1, L2_128B = 2, L2_256B = 3.
  int64_t promotion = config.l2PromotionBytes == 0     ? 0
                      : config.l2PromotionBytes == 64  ? 1
                      : config.l2PromotionBytes == 128 ? 2
                                                       : 3;
  args.append({c(3), c(promotion)});
  return func::CallOp::create(b, kName, TypeRange{i64}, args).getResult(0);
}
