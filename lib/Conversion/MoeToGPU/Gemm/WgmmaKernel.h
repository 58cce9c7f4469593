//===- WgmmaKernel.h - the Hopper engine's kernel builder -------*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The Hopper (wgmma) engine's kernel builder, shared by its parts:
// WgmmaEngine.cpp (the design, the persistent item walk, the consumers' MMA
// loop, the kernel and its launch), WgmmaLoaders.cpp (the producer: lhs
// rows by cp.async or TMA, rhs tiles by TMA or cp.async, the item
// handoff) and WgmmaEpilogue.cpp (the output paths on the accumulator
// fragments). Internal to lib/Conversion/MoeToGPU/Gemm.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_CONVERSION_MOETOGPU_GEMM_WGMMAKERNEL_H
#define MOE_LIB_CONVERSION_MOETOGPU_GEMM_WGMMAKERNEL_H

#include "GemmKernel.h"
#include "NVVMBuilder.h"

namespace mlir {
namespace moe {
namespace gpu_lowering {
namespace wgmma {

using CmpI = arith::CmpIPredicate;

/// K elements per 128-byte swizzle row of 16-bit elements (the e4m3 tiles
/// of fp8_block hold 128: WgmmaKernel::sliceK).
inline constexpr int64_t kTileK = 64;
/// Epilogue staging per consumer warpgroup (kWgmmaStagingBytes): 64 rows
/// of 256 bytes (one pass of 128 16-bit or 64 f32 output columns), 16-byte
/// chunk c of row r at chunk c ^ (r % 8), so the fragment stores and the
/// row reads are free of bank conflicts.
inline constexpr int64_t kEpilogueRowBytes = kWgmmaStagingBytes / 64;
/// Registers per thread after setmaxnreg (producer, consumers) with two
/// consumer warpgroups. The block starts with 168 per thread (64K / 384,
/// rounded down to 8); the consumers' increase is granted only from what
/// the producer released, so (168 - P) * 128 >= (C - 168) * 256 must hold,
/// else the consumers wait for registers forever. The producer keeps 56:
/// at 40 (the consumers at 232) it spilled 4-40 bytes in GEMMs outside the
/// bench layers (gather + scatter, scatter + scale + bias, E = 2048); 56 /
/// 224 ran the bench layers within +-1% of 40 / 232 on the H200 (bench/
/// NOTES.md v66) with no spill in any GPU case.
inline constexpr int64_t kEntryRegs = 168, kProducerRegs = 56,
                         kConsumerRegs = 224;
static_assert((kEntryRegs - kProducerRegs) * 128 >=
                  (kConsumerRegs - kEntryRegs) * 256,
              "setmaxnreg would deadlock");
/// The same with the weight tiles by cp.async (wgmma-tma=false), whose
/// producer copies both operands: at 40 it spilled 104-124 bytes, at 64
/// 16-24 (Qwen3-30B-A3B, Mixtral-8x7B), at 88 8-24 (Mixtral-8x7B
/// unfused); 104 leaves the consumers 200, no spills in any case of
/// test/GPU/cases, fused or not (found by test/Fuzz/options_fuzz.py).
inline constexpr int64_t kCpAsyncProducerRegs = 104, kCpAsyncConsumerRegs = 200;
static_assert((kEntryRegs - kCpAsyncProducerRegs) * 128 >=
                  (kCpAsyncConsumerRegs - kEntryRegs) * 256,
              "setmaxnreg would deadlock");

/// The same for scaled weights with TMA: fp8_block, whose producer also
/// holds its rows' scale addresses (at 56 it spilled 28-96 bytes,
/// Qwen3-30B-A3B) and whose consumers need two m64n128 accumulator sets
/// (128 registers); the mxfp4 main kernel (128 tokens), whose producer
/// gathers 128 token rows and copies the scale words (at 56 it spilled 52
/// bytes, gpt-oss-120b).
inline constexpr int64_t kScaledProducerRegs = 88, kScaledConsumerRegs = 208;
static_assert((kEntryRegs - kScaledProducerRegs) * 128 >=
                  (kScaledConsumerRegs - kEntryRegs) * 256,
              "setmaxnreg would deadlock");

/// The same for fp8_block tiles of 256 columns: the consumers hold the
/// m64n256 tile accumulator and the m64n128 block accumulator (192
/// registers). The producer keeps its rows as 32-bit indices and builds
/// their addresses per stage; at 56 / 224 it spilled 32-60 bytes, at 72 /
/// 208 the consumers did; 64 / 216 spills 8-24 bytes in the bench layers,
/// outside the K loops (test/Pipelines/ptxas-lowprec.test).
inline constexpr int64_t kWideScaledProducerRegs = 64,
                         kWideScaledConsumerRegs = 216;
static_assert((kEntryRegs - kWideScaledProducerRegs) * 128 >=
                  (kWideScaledConsumerRegs - kEntryRegs) * 256,
              "setmaxnreg would deadlock");

/// The same with three consumer warpgroups (the mxfp4_hopper main kernel,
/// 192 weight rows, 512 threads): 128 a thread at entry; the producer
/// (128 token rows to gather, the scale words) spilled at 56 and 88, the
/// consumers at 136 keep no row targets through the MMA loop (with them
/// they spilled 24 bytes).
inline constexpr int64_t kThreeEntryRegs = 128, kThreeProducerRegs = 96,
                         kThreeConsumerRegs = 136;
static_assert((kThreeEntryRegs - kThreeProducerRegs) * 128 >=
                  (kThreeConsumerRegs - kThreeEntryRegs) * 384,
              "setmaxnreg would deadlock");

/// The same for the small-M kernel with one consumer warpgroup at three
/// blocks of 256 threads per SM: 80 registers a thread at entry (the
/// blocks per SM that moe-gpu-register-budget gives ptxas), the producer
/// keeps 48 (at 40 it spilled 4 bytes), the consumer takes 112.
inline constexpr int64_t kSmallEntryRegs = 80, kSmallProducerRegs = 48,
                         kSmallConsumerRegs = 112;
static_assert((kSmallEntryRegs - kSmallProducerRegs) * 128 >=
                  (kSmallConsumerRegs - kSmallEntryRegs) * 128,
              "setmaxnreg would deadlock");

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
              Value rhsMap, UncoveredFill fill)
      : g(g), rhsMap(rhsMap), fill(fill), tileM(config.tileM),
        tileN(config.tileN), stages(config.stages), numSMs(config.numSMs),
        cluster(config.cluster), swap(config.swapAB),
        ctasPerSM(config.ctasPerSM), programmatic(config.programmatic),
        consumers(config.swapAB ? config.tileN / 64 : config.tileM / 64),
        registerSplit((consumers > 1 &&
                       (config.swapAB ? config.tileM : config.tileN) >= 128) ||
                      (consumers == 1 && config.ctasPerSM == 3)),
        producerRegisters(config.producerRegisters),
        kSlices(config.stageK / (g.fp8() ? 128 : kTileK)),
        kSteps((g.kDim + config.stageK - 1) / config.stageK),
        concat(g.glu && g.glu->layout == GluLayout::concat),
        outPerTile(g.glu ? config.tileN / 2 : config.tileN),
        colTiles((g.outN + outPerTile - 1) / outPerTile),
        ragged{g.offsets, g.m, g.numExperts, config.tileM},
        locateEach(config.swapAB), handoff(!config.swapAB), fp8(g.fp8()),
        mxfp4(config.mxfp4), stageK(config.stageK) {
    assert((!quantizesOut() || (fp8Wide() && concat && outPerTile == 128 &&
                                g.outElem.getIntOrFloatBitWidth() == 16 &&
                                !g.scatter && !g.scale)) &&
           "quantized output: 256-column concat fp8_block tiles of 16-bit "
           "rows in GEMM order");
    assert((!fp8 || (kSlices == 1 && (tileN <= 128 || tileN == 256))) &&
           "fp8_block: one 128-K block per stage, n <= 128 or 256");
    assert((!mxfp4 || (swap && (stageK == kMxfp4StageK ||
                                (stageK == 128 &&
                                 g.format == WeightFormat::mxfp4_hopper)))) &&
           "mxfp4: the small-M form, 256 K per stage (mxfp4_hopper: or 128)");
  }

  void emit(LoweringBuilder &b);
  /// The kernel body (emit launches it).
  void emitBody(LoweringBuilder &kb, const KernelIds &ids, int64_t threads);

private:
  /// Registers per thread after setmaxnreg (registerSplit): producer,
  /// consumers.
  std::pair<int64_t, int64_t> registerBudget() const {
    // Explicit (wgmma-producer-registers): the consumers take what the
    // producer gives up, (kEntryRegs - P) * 128 = (C - kEntryRegs) * 256.
    // One consumer warpgroup, three blocks per SM (80 a thread at entry:
    // moe-gpu-register-budget).
    if (consumers == 1)
      return {kSmallProducerRegs, kSmallConsumerRegs};
    if (consumers == 3)
      return {kThreeProducerRegs, kThreeConsumerRegs};
    if (producerRegisters)
      return {producerRegisters,
              std::min<int64_t>(
                  256,
                  (kEntryRegs + (kEntryRegs - producerRegisters) / 2) / 8 * 8)};
    if (!rhsMap)
      return {kCpAsyncProducerRegs, kCpAsyncConsumerRegs};
    if (fp8Wide())
      return {kWideScaledProducerRegs, kWideScaledConsumerRegs};
    if (fp8 || mxfp4)
      return {kScaledProducerRegs, kScaledConsumerRegs};
    return {kProducerRegs, kConsumerRegs};
  }
  /// Bytes per operand element (e4m3 codes: 1) and K elements per
  /// 128-byte swizzled row.
  int64_t elemBytes() const { return fp8 ? 1 : 2; }
  /// fp8_block main kernel with 256-column tiles: two 128-column halves,
  /// one scale block each, multiplied and promoted in turn.
  bool fp8Wide() const { return fp8 && !swap && tileN == 256; }
  int64_t fp8Halves() const { return fp8Wide() ? 2 : 1; }
  /// The main kernel quantizes its output rows for the next GEMM
  /// (g.quantizedOut): a 256-column concat tile holds one whole 128-column
  /// group of output columns, so a row's amax is tile-local
  /// (epilogueStaged). The small-M kernels store `out` and the host
  /// quantizes it after them.
  bool quantizesOut() const { return g.quantizedOut.has_value() && !swap; }
  int64_t sliceK() const { return 128 / elemBytes(); }
  int64_t aBytes() const { return tileM * 128; }
  /// One 64-element K slice of a stage: tileM lhs rows then tileN rhs
  /// rows (or 64 K rows of tileN rhs columns), 128 bytes each, swizzled.
  /// (mxfp4: the tileM token rows only; the weights follow the slices.)
  int64_t sliceBytes() const {
    return mxfp4 ? tileM * 128 : (tileM + tileN) * 128;
  }
  /// A stage holds kSlices slices, K-adjacent (mxfp4: then the weight
  /// tile and its scales, wgmmaMxfp4StageBytes).
  int64_t stageBytes() const {
    return mxfp4 ? wgmmaMxfp4StageBytes(tileM, tileN, stageK)
                 : kSlices * sliceBytes();
  }
  /// mxfp4: bytes of a weight row's packed e2m1 pairs in a stage (128:
  /// 128-byte swizzle, 16-byte chunk c of row r at c ^ (r % 8); 64: 64-byte
  /// swizzle, c ^ (r / 2 % 4), as TMA writes them), its scale blocks (one
  /// E8M0 byte each) and the aligned 4-byte words that hold them.
  int64_t mxRowBytes() const { return stageK / 2; }
  int64_t mxStageBlocks() const { return stageK / 32; }
  int64_t mxScaleWordsPerRow() const { return stageK / 128 + 1; }
  /// mxfp4: the stage's weight tile (tileN rows of mxRowBytes) and its
  /// scales (16 bytes per weight row: the mxScaleWordsPerRow aligned words
  /// that hold the row's E8M0 bytes of the stage, at the row's byte offset
  /// mxScaleShift).
  Value mxWeightTile(LoweringBuilder &b, Value stage) {
    return add64(b, stage, kSlices * sliceBytes());
  }
  Value mxScaleSlots(LoweringBuilder &b, Value stage) {
    return add64(b, stage, kSlices * sliceBytes() + tileN * mxRowBytes());
  }
  /// First K element of slice `h` of K step `kt`.
  Value sliceStartK(LoweringBuilder &b, Value kt, int64_t h) const {
    return b.mul(b.add(b.mul(kt, b.idx(kSlices)), b.idx(h)), b.idx(sliceK()));
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
    return swap ? 0 : consumers * kWgmmaStagingBytes;
  }
  int64_t sharedBytes() const {
    if (swap)
      return headerBytes() + stages * stageBytes() +
             wgmmaSwapStagingBytes(tileM, tileN) + stages * scaleBytes();
    return headerBytes() + stages * stageBytes() + stagingBytes() + 512 +
           stages * scaleBytes();
  }
  /// fp8_block: each stage's scales (its K step is one 128-K block), past
  /// the routing weights (small-M: past the staging): the tileM lhs rows'
  /// activation scales (f32), then the weight scale of the tile's columns
  /// (the gate half's and the up half's with a concat GLU), written by the
  /// producer's cp.async with the stage's tiles.
  int64_t scaleBytes() const { return fp8 ? wgmmaFp8ScaleBytes(tileM) : 0; }
  Value scaleArea(LoweringBuilder &b, Value s) {
    int64_t start =
        swap ? headerBytes() + stages * stageBytes() +
                   wgmmaSwapStagingBytes(tileM, tileN)
             : headerBytes() + stages * stageBytes() + stagingBytes() + 512;
    return add64(b, add64(b, base, start),
                 mul64(b, nvvm::toI64(b, s), scaleBytes()));
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
    return nvvm::add64(b, a, c);
  }
  Value add64(LoweringBuilder &b, Value a, int64_t c) {
    return nvvm::add64(b, a, c);
  }
  Value mul64(LoweringBuilder &b, Value a, int64_t c) {
    return nvvm::mul64(b, a, c);
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
  using ItemBody = function_ref<void(LoweringBuilder &, const WorkItem &)>;
  void forEachItem(LoweringBuilder &b, Value tid, Value blockX, Value gridX,
                   ItemBody body, bool walk = true);
  /// Work units of an expert with `rows` rows: coupled, its row-tile pairs
  /// x colTiles plus ceil(colTiles / 2) column pairs of an odd last row
  /// tile; uncoupled, its row tiles x colTiles.
  Value clusterUnits(LoweringBuilder &b, Value rows) const;
  void forEachClusterItem(LoweringBuilder &b, Value tid, Value blockX,
                          Value gridX, ItemBody body, bool walk);
  /// Consumers free stage `s`: every thread arrives on the CTA's empty
  /// barrier; in cluster kernels one thread per warpgroup arrives on it
  /// and on the peer's (whose producer multicasts into this CTA).
  void releaseStage(LoweringBuilder &b, Value ct, Value s);
  void producer(LoweringBuilder &b, Value tid, const WorkItem &item);
  /// Row `r` (within the tile) of `item`'s lhs rows: its 64-bit address,
  /// whether it is in the tile and in bounds (else row 0's address, whose
  /// copies read zeros), and its lhs row (index, 0 when not in bounds),
  /// through the gather when there is one.
  struct LhsRow {
    Value address, ok, row;
  };
  /// fp8_block producer: the address of row `index` (an i32, -1 when the
  /// row is not read: then row 0's) of a buffer at `baseAddr` with row
  /// stride `stride` elements of `elemBytes`, and whether it is read.
  std::pair<Value, Value> fp8Row(LoweringBuilder &b, Value index,
                                 Value baseAddr, Value stride,
                                 int64_t elemBytes);
  LhsRow lhsRow(LoweringBuilder &b, const WorkItem &item, Value r);
  /// Item handoff, producer side, at K step handoffStep() of the item: once
  /// the consumers have finished the previous item's epilogue, its record
  /// and its row table, `entry` = this producer thread's row's
  /// (destination, routing weight), then an arrival on tableFull.
  void publishItem(LoweringBuilder &b, Value tid, const WorkItem &item,
                   ArrayRef<Value> entry);
  /// The item's number in the walk: step / kSteps (the item handoff's
  /// barrier phases).
  Value itemOrdinal(LoweringBuilder &b, Value step) const {
    return arith::DivUIOp::create(b, step, b.idx(kSteps));
  }
  /// K step of an item at which the producer publishes it: the last one
  /// it issues before it would wait for the item's first step to be
  /// consumed, which follows the previous item's epilogue anyway.
  int64_t handoffStep() const { return std::min(stages, kSteps) - 1; }
  /// Item handoff, consumer side, after the MMAs: waits for the item's
  /// record and returns it (step as given; the first row and the rows are
  /// null: the row table has them).
  WorkItem receiveItem(LoweringBuilder &b, Value step);
  void loadRhsByTma(LoweringBuilder &b, Value stage, Value barrier, Value kt,
                    const WorkItem &item);
  /// mxfp4: the global column (weight row) of the tile's weight row `r`
  /// and whether it exists (the TMA boxes' rows: gate half then up half
  /// with a concat GLU).
  std::pair<Value, Value> mxWeightRow(LoweringBuilder &b, const WorkItem &item,
                                      Value r);
  /// mxfp4: the byte address of weight row `col`'s first E8M0 scale of
  /// the expert (the scales are [E, N, K / 32], K innermost and unit).
  Value mxScaleRow(LoweringBuilder &b, Value expert, Value col);
  /// mxfp4, producer: the stage's scale words of every weight row.
  void loadMxScales(LoweringBuilder &b, Value tid, Value stage, Value kt,
                    const WorkItem &item);
  /// mxfp4, consumer: a thread's two fragment rows of the tile (16 warp +
  /// lane / 4, + 8), their 16-byte chunks' swizzle (row % 8 or row / 2 %
  /// 4, mxRowBytes; the same for both) and where their stage scale bytes start
  /// in their slots (the scales' byte address mod 4, in bits; a stage's 8 bytes
  /// keep it).
  struct MxThread {
    Value ct, lane, rows[2], swizzle, scaleShift[2];
  };
  MxThread mxThread(LoweringBuilder &b, Value tid, Value cw,
                    const WorkItem &item);
  /// mxfp4, consumer: row h's eight scale bytes of the stage as two words
  /// (blocks 0-3, 4-7), from the three aligned words its slot holds.
  void mxStageScaleWords(LoweringBuilder &b, Value stage, const MxThread &t,
                         Value words[2][2]);
  /// mxfp4, consumer: the MMA loop (weights dequantized into register
  /// fragments) and the small-M epilogue of one consumer warpgroup.
  void consumeMxfp4(LoweringBuilder &b, Value tid, Value cw,
                    const WorkItem &item);
  /// mxfp4_hopper, consumer: the same with the weights in register
  /// fragment order (a word a thread per block row, decoded by rotates).
  void consumeMxfp4Hopper(LoweringBuilder &b, Value tid, Value cw,
                          const WorkItem &item);
  /// The MMA loop and epilogue of one consumer warpgroup on an item.
  /// (Skipping the MMAs of a warpgroup with no rows in a short tile was
  /// measured slower on every compute-bound cell: bench/NOTES.md v9, v45;
  /// so were a skew between the two warpgroups, v43, and tail units of
  /// 64-row tiles, v66.)
  void consumeTile(LoweringBuilder &b, Value tid, Value cw,
                   const WorkItem &item);
  /// fp8_block, after a 128-K block's MMAs into `block` (and their wait):
  /// acc += block * (activation scale of the row x weight scale of the
  /// column), from stage `s`'s scale area (`first`: acc = ...).
  /// With 256-column tiles (fp8Wide) `block` is column half `half` of the
  /// tile, promoted into acc's entries of that half; the stage is released
  /// after the last half's scale reads.
  /// `loaded`: the half's promotionFactors, read before its MMAs (read
  /// here when empty).
  Value promote(LoweringBuilder &b, Value ct, Value cw, Value s, Value acc,
                Value block, bool first, int64_t half = 0,
                ArrayRef<Value> loaded = {});
  /// The scale factors of stage `s`'s promotion for this thread (of column
  /// half `half` with fp8Wide): main kernel, per fragment row h and part u
  /// (promotionParts) the row's activation scale x the part's weight
  /// scale, at h * parts + u; small-M, the weight scales of the two
  /// fragment rows, then the thread's tokens' scales.
  SmallVector<Value> promotionFactors(LoweringBuilder &b, Value ct, Value cw,
                                      Value s, int64_t half);
  /// Weight-scale parts of a main-kernel promotion: the gate and the up
  /// half of a 128-column concat tile, else one.
  int64_t promotionParts() const { return concat && !fp8Wide() ? 2 : 1; }
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

  /// Routing weights of a thread's two fragment rows (null without scale).
  struct RowFactors {
    Value h[2];
  };
  /// Item handoff: this thread's fragment-row routing weights from the
  /// row table the producer wrote.
  RowFactors tableFactors(LoweringBuilder &b, Value ct, Value cw);
  /// Row `r` (within the tile) of `item`: its destination (i32; -1 past
  /// the tile or dropped) and, with `withFactor` and a scale operand, its
  /// routing weight (f32; 0 past the tile).
  SmallVector<Value> rowEntry(LoweringBuilder &b, const WorkItem &item, Value r,
                              bool withFactor);
  /// Stores the tile through the warpgroup's shared staging, whole rows
  /// by 16-byte stores (quantizesOut: the rows' e4m3 codes and scales,
  /// epilogueQuantizedStores).
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
  /// quantizesOut, after the staging holds the tile's 64 x 128 outputs
  /// (16-bit) of this warpgroup and the factor table its rows' scales:
  /// eight threads a row, each 16 columns: codes = e4m3(x / scale) by
  /// cvt.rn.satfinite (as quantizeRows), one 16-byte store, and the row's
  /// scale.
  void epilogueQuantizedStores(LoweringBuilder &b, Value ct, Value cw,
                               const WorkItem &item, Value staging);
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
  /// (i32: expert, column tile) and row table (the
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
  Value rhsMap;       // rhs tensor map (i64) when its tiles come by TMA
  UncoveredFill fill; // zeroed by the consumers first (Unread: none)
  const int64_t tileM, tileN, stages, numSMs;
  const int64_t cluster;
  /// Small-M form (config.swapAB): rhs rows on the wgmma M side.
  const bool swap;
  const int64_t ctasPerSM;
  /// Launched programmatically (config.programmatic).
  const bool programmatic;
  const int64_t consumers;
  /// setmaxnreg moves registers from the producer to the consumers: with
  /// two consumer warpgroups whose accumulators are at least m64n128 (64
  /// registers a thread). Narrower ones (the small-M kernel's token tiles,
  /// wgmma-tile-n 64 / 96) fit in the 168 registers at entry; ptxas then
  /// allocates fewer than 168 and ignores setmaxnreg ("unable to determine
  /// register count at entry", C7508, found by test/Fuzz/options_fuzz.py).
  const bool registerSplit;
  /// config.producerRegisters (0: registerBudget's defaults).
  const int64_t producerRegisters;
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
  /// The item handoff (see tableFull): the main kernel.
  const bool handoff;
  /// fp8_block (e4m3 codes, k32 MMAs, the scales applied once per 128-K
  /// block: WgmmaEngine.cpp's promotion).
  const bool fp8;
  /// mxfp4 (config.mxfp4: the small-M form with register-A MMAs,
  /// WgmmaMxfp4.cpp).
  const bool mxfp4;
  /// K elements per stage (config.stageK).
  const int64_t stageK;
  // Kernel-wide values.
  Value base, lhsAddr, rhsAddr, lhsStride, rhsStride0, rhsStride1;
  Value outAddr, outStride, outVectorOk;
  /// fp8_block: the activation scales (f32 [rows, K / 128], unit inner
  /// stride) and the weight scales (f32 [E, N / 128, K / 128]).
  Value lhsScaleAddr, lhsScaleStride, rhsScaleAddr, rhsScaleStride0,
      rhsScaleStride1, rhsScaleStride2;
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

} // namespace wgmma
} // namespace gpu_lowering
} // namespace moe
} // namespace mlir

#endif // MOE_LIB_CONVERSION_MOETOGPU_GEMM_WGMMAKERNEL_H
