//===- WgmmaWgrad.cpp - the Hopper ragged-K weight-gradient kernel --------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// moe.grouped_matmul_wgrad on the Hopper tensor cores (sm_90a), 16-bit
// operands:
//
//   out[e] = acc[e] + sum_{lo_e <= m < hi_e} lhs[m]^T rhs[m]     (E x K x N)
//
// The contraction runs over the expert's rows (tokens), so in wgmma terms
// the output tile's rows are lhs columns and its columns rhs columns, and
// a K step is a slice of 64 tokens: A = the slice's lhs columns (64 tokens
// x 64 lhs columns per consumer warpgroup, a token's columns contiguous:
// the MN-major, "transposed" A of wgmma) and B = its rhs columns (MN-major
// as well); both are atoms of 64 MN elements x 8 token rows of 128 bytes
// with the 128-byte swizzle, one k16 step 16 token rows (2048 bytes).
//
// - Block: 384 threads. Warpgroup 0 is the producer; warpgroups 1 and 2
//   each own 64 output rows (lhs columns) x tileN output columns of the
//   128 x tileN tile, f32 accumulators in registers (m64n<tileN>k16).
// - Work items: (expert, 128-row tile, tileN-column tile), E x ceil(K /
//   128) x N / tileN of them, a static count; the persistent grid strides
//   over them in order, so the blocks of one wave share an expert and its
//   token slices stay in L2. An item runs over ceil(rows_e / 64) K steps;
//   a running step counter carries the pipeline's stage and phase across
//   items (the producer fills the next item's stages during the
//   epilogue).
// - Producer: 16-byte cp.async of both operands, the swizzle applied by
//   hand (chunk c of token row r at c ^ (r % 8)); token rows past the
//   expert's last row and lhs columns past K read zeros (src-size 0), so
//   another expert's rows (even inf / NaN ones) never enter a product.
//   full[s] completes on the 128 producer threads' cp.async arrivals,
//   empty[s] when the 256 consumer threads have released the stage.
// - Consumers: one wgmma group in flight (the previous step's stage is
//   released after the next step's MMAs are issued). The epilogue goes
//   through shared memory, 128 bytes of each of the warpgroup's 64 rows
//   at a time (its own 8 KiB chunk, 16-byte slots XOR-swizzled by the row
//   so that neither the fragments' pair writes nor the row reads conflict
//   on banks): the fragments are written, a named barrier of the
//   warpgroup (1 + its index), then each thread reads 16-byte slots and
//   stores them to global memory, so a warp writes 4 whole 128-byte lines
//   per store (stored from the fragments directly, 8 rows of 16-32 bytes
//   per store, the stores took as long as the MMAs: bench/NOTES.md v78).
//   With `acc` (main_grad; f32 results) acc's 16 bytes are added in the
//   row pass. An expert with no rows stores acc[e] or
//   zeros: every output element is written exactly once, by one thread,
//   so the kernel is deterministic with no atomics.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"
#include "NVVMBuilder.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using CmpI = arith::CmpIPredicate;
using nvvm::add64;
using nvvm::mul64;

namespace {

/// Tokens per K step (one 64-row slice of both operands).
constexpr int64_t kStepTokens = 64;
/// Output rows (lhs columns) per item: two consumer warpgroups of 64.
constexpr int64_t kTileRows = 128;
/// Registers per thread after setmaxnreg (tileN >= 128), from 168 at
/// entry: the producer copies both operands by cp.async (as the forward
/// engine's cp.async form, WgmmaKernel.h); the consumers hold m64n256
/// accumulators (128 registers) with 200. Narrower tiles leave the
/// producer 120 (its 12 rhs chunks a thread at tileN = 192, rows and
/// chunks by division by 24, spilled 16 bytes at 104).
constexpr int64_t kProducerRegs = 104, kConsumerRegs = 200;
constexpr int64_t kNarrowProducerRegs = 120, kNarrowConsumerRegs = 192;
static_assert((168 - kProducerRegs) * 128 >= (kConsumerRegs - 168) * 256,
              "setmaxnreg would deadlock");
static_assert((168 - kNarrowProducerRegs) * 128 >=
                  (kNarrowConsumerRegs - 168) * 256,
              "setmaxnreg would deadlock");
/// Shared memory a block may use (227 KiB) less the header and the
/// alignment slack.
constexpr int64_t kSharedBytes = 227 * 1024, kHeaderBytes = 1024;
/// A consumer warpgroup's epilogue chunk: 128 bytes of its 64 rows.
constexpr int64_t kChunkRowBytes = 128, kChunkBytes = 64 * kChunkRowBytes;

class WgradKernel {
public:
  WgradKernel(const WgradOperands &w, const WgradConfig &config)
      : w(w), tileN(config.tileN), stages(config.stages), numSMs(config.numSMs),
        rowTiles((w.kDim + kTileRows - 1) / kTileRows),
        colTiles(w.nDim / config.tileN), registerSplit(config.tileN >= 128) {}

  void emit(LoweringBuilder &b);

private:
  int64_t stageBytes() const { return kStepTokens * (kTileRows + tileN) * 2; }
  int64_t sharedBytes() const {
    return kHeaderBytes + stages * stageBytes() + 2 * kChunkBytes;
  }
  int64_t elemBytes() const { return 2; }

  Value fullBarrier(LoweringBuilder &b, Value s) {
    return add64(b, base, mul64(b, nvvm::toI64(b, s), 8));
  }
  Value emptyBarrier(LoweringBuilder &b, Value s) {
    return add64(b, add64(b, base, 8 * stages), mul64(b, nvvm::toI64(b, s), 8));
  }
  Value stageAddress(LoweringBuilder &b, Value s) {
    return add64(b, add64(b, base, kHeaderBytes),
                 mul64(b, nvvm::toI64(b, s), stageBytes()));
  }
  /// Consumer warpgroup `cw`'s epilogue chunk (after the stages).
  Value chunkAddress(LoweringBuilder &b, Value cw) {
    return add64(b, add64(b, base, kHeaderBytes + stages * stageBytes()),
                 mul64(b, nvvm::toI64(b, cw), kChunkBytes));
  }
  std::pair<Value, Value> stageOf(LoweringBuilder &b, Value step) {
    return {arith::RemUIOp::create(b, step, b.idx(stages)),
            arith::DivUIOp::create(b, step, b.idx(stages))};
  }
  Value parity(LoweringBuilder &b, Value round) {
    return b.toI32(arith::AndIOp::create(b, round, b.idx(1)));
  }

  /// One work item: its expert, first output row and column, the
  /// expert's token rows [lo, hi), its K steps and the step counter at
  /// its first step.
  struct Item {
    Value expert, row0, col0, lo, hi, steps, step;
  };
  using ItemBody = function_ref<void(LoweringBuilder &, const Item &)>;
  void forEachItem(LoweringBuilder &b, Value blockX, Value gridX,
                   ItemBody body);
  void producer(LoweringBuilder &b, Value tid, const Item &item);
  void consumer(LoweringBuilder &b, Value tid, Value cw, const Item &item);
  /// Stores the warpgroup's 64 x tileN results: `acc` the accumulators
  /// (null: the expert has no rows, the sums are zero).
  void epilogue(LoweringBuilder &b, Value ct, Value cw, const Item &item,
                Value acc);

  const WgradOperands &w;
  const int64_t tileN, stages, numSMs, rowTiles, colTiles;
  const bool registerSplit;
  Value base, lhsAddr, rhsAddr, lhsStride, rhsStride, outAddr;
};

void WgradKernel::forEachItem(LoweringBuilder &b, Value blockX, Value gridX,
                              ItemBody body) {
  Value total = b.idx(w.numExperts * rowTiles * colTiles);
  b.forLoop(
      blockX, total, gridX, {b.idx(0)},
      [&](LoweringBuilder &b, Value i, ValueRange state) -> SmallVector<Value> {
        Value perExpert = b.idx(rowTiles * colTiles);
        Value expert = arith::DivUIOp::create(b, i, perExpert);
        Value within = arith::RemUIOp::create(b, i, perExpert);
        Value rowTile = arith::DivUIOp::create(b, within, b.idx(colTiles));
        Value colTile = arith::RemUIOp::create(b, within, b.idx(colTiles));
        auto offsetAt = [&](Value e) {
          return b.clamp(b.toIndex(b.load(w.offsets, {e})), b.idx(0), w.m);
        };
        Value lo = offsetAt(expert);
        Value hi = b.maxIdx(offsetAt(b.add(expert, b.idx(1))), lo);
        Value steps = b.ceilDiv(b.sub(hi, lo), kStepTokens);
        body(b, Item{expert, b.mul(rowTile, b.idx(kTileRows)),
                     b.mul(colTile, b.idx(tileN)), lo, hi, steps, state[0]});
        return {b.add(state[0], steps)};
      });
}

void WgradKernel::producer(LoweringBuilder &b, Value tid, const Item &item) {
  Value eb = b.idx(elemBytes());
  // lhs: the slice's 64 token rows x 128 columns are 16 chunks a row;
  // thread t copies chunk t % 16 of rows t / 16 + 8 j (j < 8), into atom
  // column chunk / 8 (64 columns, 8 KiB) at row r, chunk (c % 8) ^ (r % 8)
  // (r % 8 = t / 16 % 8 for every j).
  Value c = arith::AndIOp::create(b, tid, b.idx(15));
  Value r0 = arith::ShRUIOp::create(b, tid, b.idx(4));
  Value lhsCol = b.add(item.row0, b.mul(c, b.idx(8)));
  Value colOk = b.cmpi(CmpI::ult, lhsCol, b.idx(w.kDim));
  Value lhsColBytes = nvvm::toI64(b, b.mul(lhsCol, eb));
  Value lhsDst = nvvm::toI64(
      b, b.add(b.mul(arith::ShRUIOp::create(b, c, b.idx(3)), b.idx(8192)),
               b.add(b.mul(r0, b.idx(128)),
                     b.mul(arith::XOrIOp::create(
                               b, arith::AndIOp::create(b, c, b.idx(7)),
                               arith::AndIOp::create(b, r0, b.idx(7))),
                           b.idx(16)))));
  // rhs: tileN / 8 chunks a row, thread t copies chunk q % cpr of row
  // q / cpr for q = t + 128 j.
  const int64_t cpr = tileN / 8, rhsCopies = kStepTokens * cpr / 128;
  // Slice row r of step kt: the buffer row read (through the operand's
  // gather) and whether it is read (else zero-filled).
  auto rowOf = [&](LoweringBuilder &b, Value kt, Value r, Value gather,
                   Value rows) {
    Value token = b.add(b.add(item.lo, b.mul(kt, b.idx(kStepTokens))), r);
    Value ok = b.cmpi(CmpI::ult, token, item.hi);
    if (!gather)
      return std::make_pair(token, ok);
    // The item has a row (lo < hi), so `lo` is a valid index for rows
    // past its end (and for the step after its last).
    auto [src, inside] =
        WgradOperands::sourceRow(b, gather, rows, b.select(ok, token, item.lo));
    return std::make_pair(src, b.andi(ok, inside));
  };
  auto lhsRow = [&](LoweringBuilder &b, int64_t j) {
    return b.add(r0, b.idx(8 * j));
  };
  auto rhsRow = [&](LoweringBuilder &b, int64_t j) -> Value {
    return arith::DivUIOp::create(b, b.add(tid, b.idx(128 * j)), b.idx(cpr));
  };
  // The half (rows < 32 or >= 32) of copy j's rows when every thread's is
  // the same: rows (128 j + t) / cpr for t < 128.
  auto rhsHalf = [&](int64_t j) -> std::optional<int64_t> {
    int64_t first = 128 * j / cpr, last = (128 * j + 127) / cpr;
    if (first / 32 != last / 32)
      return std::nullopt;
    return first / 32;
  };
  // A gathered operand's source rows are fetched a step ahead: lane l of
  // each producer warp loads those of slice rows l and l + 32 of step
  // kt + 1 (-1: not read) at the start of step kt, and a copy takes its
  // row from the owning lane by a shuffle, so the index loads no longer
  // sit between the stage wait and the copies (their check still waits
  // for them at the end of the step: bench/NOTES.md v80). Two values a
  // gathered operand (lhs first; both may be gathered).
  SmallVector<std::pair<Value, Value>, 2> gathers; // (indices, rows)
  if (w.lhsGather)
    gathers.push_back({w.lhsGather, w.lhsRows});
  if (w.rhsGather)
    gathers.push_back({w.rhsGather, w.rhsRows});
  const bool gathered = !gathers.empty();
  Value lane = arith::AndIOp::create(b, tid, b.idx(31));
  auto prefetchRows = [&](LoweringBuilder &b, Value kt) {
    SmallVector<Value> v;
    for (auto [gather, rows] : gathers)
      for (int64_t half = 0; half < 2; ++half) {
        auto [src, ok] =
            rowOf(b, kt, b.add(lane, b.idx(32 * half)), gather, rows);
        v.push_back(b.select(ok, b.toI32(src), b.i32(-1)));
      }
    return v;
  };
  // The source row (i32, -1: not read) of slice row r from the lanes'
  // prefetched rows; `half` when r's half is known statically.
  auto shuffledRow = [&](LoweringBuilder &b, ValueRange rows, Value r,
                         std::optional<int64_t> half) -> Value {
    Value from = b.toI32(arith::AndIOp::create(b, r, b.idx(31)));
    if (half)
      return warpShuffle(b, rows[*half], from, gpu::ShuffleMode::IDX);
    Value lo = warpShuffle(b, rows[0], from, gpu::ShuffleMode::IDX);
    Value hi = warpShuffle(b, rows[1], from, gpu::ShuffleMode::IDX);
    return b.select(b.cmpi(CmpI::ult, r, b.idx(32)), lo, hi);
  };
  auto stepBody = [&](LoweringBuilder &b, Value kt,
                      ValueRange carried) -> SmallVector<Value> {
    SmallVector<Value> next;
    if (gathered)
      next = prefetchRows(b, b.add(kt, b.idx(1)));
    Value step = b.add(item.step, kt);
    auto [s, round] = stageOf(b, step);
    when(b, b.cmpi(CmpI::uge, step, b.idx(stages)), [&](LoweringBuilder &b) {
      nvvm::mbarrierWait(b, emptyBarrier(b, s),
                         parity(b, b.sub(round, b.idx(1))));
    });
    Value stage = stageAddress(b, s);
    // The copy's (row, ok): from the prefetched rows for a gathered operand
    // (its two carried values at `first`).
    auto rowOk = [&](Value r, Value opGather, unsigned first,
                     std::optional<int64_t> half) -> std::pair<Value, Value> {
      if (!opGather)
        return rowOf(b, kt, r, Value(), Value());
      Value src = shuffledRow(b, carried.slice(first, 2), r, half);
      return {b.toIndex(arith::MaxSIOp::create(b, src, b.i32(0))),
              b.cmpi(CmpI::sge, src, b.i32(0))};
    };
    // The copy's source and size (0: zero-filled).
    auto copyOf = [&](std::pair<Value, Value> rowOk, Value extraOk, Value addr,
                      Value stride, Value colBytes) {
      auto [row, ok] = rowOk;
      if (extraOk)
        ok = b.andi(ok, extraOk);
      Value src = add64(
          b, addr,
          add64(b, nvvm::toI64(b, b.mul(b.mul(row, stride), eb)), colBytes));
      return std::make_pair(b.select(ok, src, addr),
                            b.select(ok, b.i32(16), b.i32(0)));
    };
    for (int64_t j = 0; j < 8; ++j) {
      auto [src, size] = copyOf(rowOk(lhsRow(b, j), w.lhsGather, 0, j / 4),
                                colOk, lhsAddr, lhsStride, lhsColBytes);
      nvvm::cpAsync16(b, add64(b, add64(b, stage, lhsDst), 1024 * j), src,
                      size);
    }
    Value rhsTile = add64(b, stage, kStepTokens * kTileRows * 2);
    for (int64_t j = 0; j < rhsCopies; ++j) {
      Value q = b.add(tid, b.idx(128 * j));
      Value r = rhsRow(b, j);
      Value chunk = arith::RemUIOp::create(b, q, b.idx(cpr));
      Value colBytes =
          nvvm::toI64(b, b.mul(b.add(item.col0, b.mul(chunk, b.idx(8))), eb));
      auto [src, size] =
          copyOf(rowOk(r, w.rhsGather, w.lhsGather ? 2 : 0, rhsHalf(j)),
                 Value(), rhsAddr, rhsStride, colBytes);
      Value dst =
          b.add(b.mul(arith::ShRUIOp::create(b, chunk, b.idx(3)), b.idx(8192)),
                b.add(b.mul(r, b.idx(128)),
                      b.mul(arith::XOrIOp::create(
                                b, arith::AndIOp::create(b, chunk, b.idx(7)),
                                arith::AndIOp::create(b, r, b.idx(7))),
                            b.idx(16))));
      nvvm::cpAsync16(b, add64(b, rhsTile, nvvm::toI64(b, dst)), src, size);
    }
    nvvm::cpAsyncArriveNoinc(b, fullBarrier(b, s));
    return next;
  };
  when(b, b.cmpi(CmpI::ugt, item.steps, b.idx(0)), [&](LoweringBuilder &b) {
    b.forLoop(b.idx(0), item.steps,
              gathered ? prefetchRows(b, b.idx(0)) : SmallVector<Value>(),
              stepBody);
  });
}

void WgradKernel::consumer(LoweringBuilder &b, Value tid, Value cw,
                           const Item &item) {
  Value ct = arith::AndIOp::create(b, tid, b.idx(127));
  Type accType = nvvm::wgmmaAccumulatorType(b, tileN);
  NVVM::WGMMATypes input =
      w.inElem.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  Value aOffset = nvvm::toI64(b, b.mul(cw, b.idx(8192)));
  auto kStep = [&](LoweringBuilder &b, Value kt, Value acc, bool first) {
    Value step = b.add(item.step, kt);
    auto [s, round] = stageOf(b, step);
    nvvm::mbarrierWait(b, fullBarrier(b, s), parity(b, round));
    nvvm::fenceProxyAsyncShared(b);
    Value stage = stageAddress(b, s);
    // Both operands MN-major: atoms along MN 8 KiB apart (LBO), a k16
    // step is 16 token rows (2048 bytes, +128 in the descriptor).
    Value descA = nvvm::wgmmaDescriptor(b, add64(b, stage, aOffset), 8192);
    Value descB = nvvm::wgmmaDescriptor(
        b, add64(b, stage, kStepTokens * kTileRows * 2), 8192);
    nvvm::wgmmaFence(b);
    for (int64_t k16 = 0; k16 < kStepTokens / 16; ++k16)
      acc = nvvm::wgmma(b, acc, add64(b, descA, 128 * k16),
                        add64(b, descB, 128 * k16), tileN, input,
                        /*aMnMajor=*/true, /*bMnMajor=*/true,
                        /*accumulate=*/!(first && k16 == 0));
    nvvm::wgmmaCommit(b);
    nvvm::wgmmaWait(b, 1);
    if (!first)
      nvvm::mbarrierArrive(
          b, emptyBarrier(b, arith::RemUIOp::create(b, b.sub(step, b.idx(1)),
                                                    b.idx(stages))));
    return acc;
  };
  scf::IfOp::create(
      b, b.cmpi(CmpI::ugt, item.steps, b.idx(0)),
      [&](OpBuilder &nested, Location loc) {
        LoweringBuilder b(loc, nested);
        Value acc = kStep(b, b.idx(0), LLVM::PoisonOp::create(b, accType),
                          /*first=*/true);
        acc = b.forLoop(b.idx(1), item.steps, {acc},
                        [&](LoweringBuilder &b, Value kt,
                            ValueRange in) -> SmallVector<Value> {
                          return {kStep(b, kt, in[0], false)};
                        })[0];
        nvvm::wgmmaWait(b, 0);
        Value last = arith::RemUIOp::create(
            b, b.sub(b.add(item.step, item.steps), b.idx(1)), b.idx(stages));
        nvvm::mbarrierArrive(b, emptyBarrier(b, last));
        epilogue(b, ct, cw, item, acc);
        scf::YieldOp::create(b);
      },
      [&](OpBuilder &nested, Location loc) {
        LoweringBuilder b(loc, nested);
        epilogue(b, ct, cw, item, Value());
        scf::YieldOp::create(b);
      });
}

void WgradKernel::epilogue(LoweringBuilder &b, Value ct, Value cw,
                           const Item &item, Value acc) {
  Value firstRow = b.add(item.row0, b.mul(cw, b.idx(64)));
  // A warpgroup past K (K % 128 == 64: the last row tile's upper half)
  // has nothing to store.
  when(b, b.cmpi(CmpI::ult, firstRow, b.idx(w.kDim)), [&](LoweringBuilder &b) {
    Value warp = arith::ShRUIOp::create(b, ct, b.idx(5));
    Value lane = arith::AndIOp::create(b, ct, b.idx(31));
    Value quad = b.mul(arith::AndIOp::create(b, lane, b.idx(3)), b.idx(2));
    // The thread's fragment rows (h = 0, 1: + 8) within the warpgroup's 64.
    Value fragRow = b.add(b.mul(warp, b.idx(16)),
                          arith::ShRUIOp::create(b, lane, b.idx(2)));
    // The chunk holds the results (with acc, f32 sums: the verifier gives
    // acc f32 results only).
    assert((!w.acc || w.outElem.isF32()) && "acc with a 16-bit result");
    int64_t outBytes = w.outElem.getIntOrFloatBitWidth() / 8;
    int64_t chunkCols = kChunkRowBytes / outBytes, slotCols = 16 / outBytes;
    Value chunk = chunkAddress(b, cw);
    Value barrier = b.toI32(b.add(cw, b.idx(1)));
    // Byte `byte` of chunk row `row`: 16-byte slot byte / 16 at
    // (byte / 16) ^ (row % 8).
    auto chunkByte = [&](Value row, Value byte) {
      Value slot = arith::ShRUIOp::create(b, byte, b.idx(4));
      Value swz = arith::XOrIOp::create(
          b, slot, arith::AndIOp::create(b, row, b.idx(7)));
      return add64(
          b, chunk,
          nvvm::toI64(b, b.add(b.add(b.mul(row, b.idx(kChunkRowBytes)),
                                     b.mul(swz, b.idx(16))),
                               arith::AndIOp::create(b, byte, b.idx(15)))));
    };
    // Row pass: thread ct's slot (ct % 8) of rows ct / 8 + 16 i.
    Value slot = arith::AndIOp::create(b, ct, b.idx(7));
    Value slotRow = arith::ShRUIOp::create(b, ct, b.idx(3));
    for (int64_t c = 0; c < tileN / chunkCols; ++c) {
      // The previous chunk's (or item's) row pass has read the chunk.
      nvvm::namedBarrier(b, barrier, 128);
      for (int64_t h = 0; h < 2; ++h) {
        Value row = b.add(fragRow, b.idx(8 * h));
        for (int64_t j = c * chunkCols / 8; j < (c + 1) * chunkCols / 8; ++j) {
          SmallVector<Value, 2> pair;
          for (int64_t p = 0; p < 2; ++p) {
            Value v =
                acc ? LLVM::ExtractValueOp::create(b, acc, 4 * j + 2 * h + p)
                          .getResult()
                    : b.f32(0.0);
            pair.push_back(b.fromF32(v, w.outElem));
          }
          Value col = b.add(b.idx(8 * j - c * chunkCols), quad);
          nvvm::storeShared(b, chunkByte(row, b.mul(col, b.idx(outBytes))),
                            pair);
        }
      }
      nvvm::namedBarrier(b, barrier, 128);
      Value col = b.add(b.add(item.col0, b.idx(c * chunkCols)),
                        b.mul(slot, b.idx(slotCols)));
      for (int64_t i = 0; i < 64 / 16; ++i) {
        Value row = b.add(slotRow, b.idx(16 * i));
        Value v = nvvm::loadShared16(b, chunkByte(row, b.mul(slot, b.idx(16))));
        Value outRow = b.add(firstRow, row);
        Value address = add64(
            b, outAddr,
            nvvm::toI64(
                b, b.mul(b.add(b.mul(b.add(b.mul(item.expert, b.idx(w.kDim)),
                                           outRow),
                                     b.idx(w.nDim)),
                               col),
                         b.idx(outBytes))));
        if (!w.acc) {
          nvvm::storeGlobal16(b, v, address);
          continue;
        }
        Value sums =
            LLVM::BitcastOp::create(b, VectorType::get({4}, b.getF32Type()), v);
        SmallVector<Value, 4> out;
        for (int64_t e = 0; e < 4; ++e)
          out.push_back(b.add(
              LLVM::ExtractElementOp::create(
                  b, sums, arith::ConstantIntOp::create(b, b.getI32Type(), e)),
              b.load(w.acc, {item.expert, outRow, b.add(col, b.idx(e))})));
        nvvm::storeGlobal(b, address, out);
      }
    }
  });
}

void WgradKernel::emit(LoweringBuilder &b) {
  int64_t items = w.numExperts * rowTiles * colTiles;
  Value grid = b.idx(std::max<int64_t>(1, std::min(items, numSMs)));
  launchInClusters(
      b, grid, Value(), 384, b.i32(sharedBytes() + 1024), /*workgroup=*/{},
      [&](LoweringBuilder &kb, const KernelIds &ids, ArrayRef<Value>) {
        Value tid = ids.threadX;
        base = nvvm::dynamicSharedBase(kb, 1024);
        when(kb, kb.cmpi(CmpI::eq, tid, kb.idx(0)), [&](LoweringBuilder &b) {
          for (int64_t s = 0; s < stages; ++s) {
            nvvm::mbarrierInit(b, fullBarrier(b, b.idx(s)), 128);
            nvvm::mbarrierInit(b, emptyBarrier(b, b.idx(s)), 256);
          }
          nvvm::fenceMbarrierInit(b);
        });
        gpu::BarrierOp::create(kb);
        lhsAddr = nvvm::bufferAddress(kb, w.lhs);
        rhsAddr = nvvm::bufferAddress(kb, w.rhs);
        lhsStride = nvvm::bufferStride(kb, w.lhs, 0);
        rhsStride = nvvm::bufferStride(kb, w.rhs, 0);
        outAddr = nvvm::bufferAddress(kb, w.out);
        Value wg = arith::ShRUIOp::create(kb, tid, kb.idx(7));
        scf::IfOp::create(
            kb, kb.cmpi(CmpI::eq, wg, kb.idx(0)),
            [&](OpBuilder &nested, Location loc) {
              LoweringBuilder b(loc, nested);
              if (registerSplit)
                nvvm::setMaxRegisters(
                    b, tileN == 256 ? kProducerRegs : kNarrowProducerRegs,
                    /*increase=*/false);
              forEachItem(b, ids.blockX, ids.gridX,
                          [&](LoweringBuilder &b, const Item &item) {
                            producer(b, tid, item);
                          });
              scf::YieldOp::create(b);
            },
            [&](OpBuilder &nested, Location loc) {
              LoweringBuilder b(loc, nested);
              if (registerSplit)
                nvvm::setMaxRegisters(
                    b, tileN == 256 ? kConsumerRegs : kNarrowConsumerRegs,
                    /*increase=*/true);
              Value cw = b.sub(wg, b.idx(1));
              forEachItem(b, ids.blockX, ids.gridX,
                          [&](LoweringBuilder &b, const Item &item) {
                            consumer(b, tid, cw, item);
                          });
              scf::YieldOp::create(b);
            });
      });
}

} // namespace

std::optional<WgradConfig>
gpu_lowering::chooseWgradConfig(GroupedMatmulWgradOp op,
                                const ConvertMoeToGPUPassOptions &options) {
  if (options.chip != "sm_90a" || options.gemm == "simt")
    return std::nullopt;
  auto lhsType = op.getLhs().getType();
  Type f = lhsType.getElementType();
  if (!f.isBF16() && !f.isF16())
    return std::nullopt;
  auto resultType = op.getResult().getType();
  Type o = resultType.getElementType();
  if (!o.isF32() && o != f)
    return std::nullopt;
  int64_t k = resultType.getDimSize(1), n = resultType.getDimSize(2);
  if (k <= 0 || n <= 0 || k % 64 != 0 || n % 64 != 0)
    return std::nullopt;
  WgradConfig config;
  // The widest tile that divides N: 128 x 256 tiles read half the operand
  // bytes per FLOP of 128 x 128 (as the forward GEMMs, GemmConfig.cpp).
  for (int64_t t : {256, 192, 128, 64})
    if (n % t == 0) {
      config.tileN = t;
      break;
    }
  int64_t stageBytes = kStepTokens * (kTileRows + config.tileN) * 2;
  config.stages = std::min<int64_t>(
      8, (kSharedBytes - kHeaderBytes - 1024 - 2 * kChunkBytes) / stageBytes);
  return config;
}

std::pair<Value, Value>
gpu_lowering::WgradOperands::sourceRow(LoweringBuilder &b, Value gather,
                                       Value rows, Value r) {
  if (!gather)
    return {r, b.cmpi(arith::CmpIPredicate::ult, r, rows)};
  Value idx = b.load(gather, {r});
  Value ok = b.inRange(idx, b.i32(0), b.toI32(rows));
  // Clamped so that an address formed from a rejected index stays inside.
  return {b.toIndex(b.select(ok, idx, b.i32(0))), ok};
}

Value gpu_lowering::wgradOperandsAligned(LoweringBuilder &b,
                                         const WgradOperands &w) {
  return b.andi(b.andi(nvvm::rowsAligned16(b, w.lhs, {0}, 1),
                       nvvm::rowsAligned16(b, w.rhs, {0}, 1)),
                nvvm::rowsAligned16(b, w.out, {0, 1}, 2));
}

void gpu_lowering::emitWgmmaWgrad(LoweringBuilder &b, const WgradOperands &w,
                                  const WgradConfig &config) {
  WgradKernel(w, config).emit(b);
}
