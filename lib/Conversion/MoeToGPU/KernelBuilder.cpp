//===- KernelBuilder.cpp - gpu.launch helpers for the moe GPU lowering ----===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using CmpI = arith::CmpIPredicate;

MemRefType gpu_lowering::anyLayoutType(RankedTensorType type) {
  SmallVector<int64_t> strides(type.getRank(), ShapedType::kDynamic);
  auto layout =
      StridedLayoutAttr::get(type.getContext(), ShapedType::kDynamic, strides);
  return MemRefType::get(type.getShape(), type.getElementType(), layout);
}

Value gpu_lowering::toBuffer(LoweringBuilder &b, Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  return bufferization::ToBufferOp::create(b, anyLayoutType(type), tensor,
                                           /*read_only=*/true);
}

Value gpu_lowering::allocBuffer(LoweringBuilder &b, RankedTensorType type,
                                ValueRange dynSizes) {
  auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
  return memref::AllocOp::create(b, memrefType, dynSizes);
}

Value gpu_lowering::allocScratch(LoweringBuilder &b, ArrayRef<int64_t> shape,
                                 Type element, ValueRange dynSizes) {
  return memref::AllocOp::create(b, MemRefType::get(shape, element), dynSizes);
}

Value gpu_lowering::toTensor(LoweringBuilder &b, Value buffer) {
  auto memrefType = cast<MemRefType>(buffer.getType());
  auto tensorType =
      RankedTensorType::get(memrefType.getShape(), memrefType.getElementType());
  return bufferization::ToTensorOp::create(b, tensorType, buffer,
                                           /*restrict=*/true,
                                           /*writable=*/true);
}

MemRefType gpu_lowering::workgroupType(ArrayRef<int64_t> shape, Type element) {
  auto space = gpu::AddressSpaceAttr::get(element.getContext(),
                                          gpu::AddressSpace::Workgroup);
  return MemRefType::get(shape, element, MemRefLayoutAttrInterface(), space);
}

/// The body of `launchOp` (its block already has every argument): `body`
/// with the kernel ids and workgroup buffers, then the terminator.
static void buildLaunchBody(LoweringBuilder &b, gpu::LaunchOp launchOp,
                            gpu_lowering::KernelBody body) {
  Block &block = launchOp.getBody().front();
  OpBuilder nested = OpBuilder::atBlockEnd(&block);
  LoweringBuilder kb(b.getLoc(), nested);
  gpu_lowering::KernelIds ids{
      launchOp.getBlockIds().x, launchOp.getBlockIds().y,
      launchOp.getThreadIds().x, launchOp.getGridSize().x};
  SmallVector<Value> wgValues(launchOp.getWorkgroupAttributions());
  body(kb, ids, wgValues);
  gpu::TerminatorOp::create(kb);
}

void gpu_lowering::launch(LoweringBuilder &b, Value gridX, Value gridY,
                          int64_t threads, ArrayRef<MemRefType> workgroup,
                          KernelBody body) {
  Value one = b.idx(1);
  // A grid of 0 blocks is not launchable: run one block, whose threads the
  // bodies' guards turn away.
  Value gx = b.maxIdx(gridX, one);
  SmallVector<Type> wg(workgroup.begin(), workgroup.end());
  auto launchOp = gpu::LaunchOp::create(
      b, gx, gridY, one, b.idx(threads), one, one,
      /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
      /*asyncDependencies=*/ValueRange{}, wg);
  buildLaunchBody(b, launchOp, body);
}

void gpu_lowering::launchInClusters(LoweringBuilder &b, Value gridX,
                                    Value clusterX, int64_t threads,
                                    Value dynamicSharedBytes,
                                    ArrayRef<MemRefType> workgroup,
                                    KernelBody body) {
  Value one = b.idx(1);
  SmallVector<Type> wg(workgroup.begin(), workgroup.end());
  auto launchOp = gpu::LaunchOp::create(
      b, gridX, one, one, b.idx(threads), one, one, dynamicSharedBytes,
      /*asyncTokenType=*/nullptr, /*asyncDependencies=*/ValueRange{}, wg,
      /*privateAttributions=*/TypeRange{}, clusterX, clusterX ? one : Value(),
      clusterX ? one : Value());
  Block &block = launchOp.getBody().front();
  // The builder leaves out the body's cluster id and size arguments (12 ..
  // 17, before any attributions; the parser adds them).
  if (clusterX)
    for (int i = 0; i < 6; ++i)
      block.insertArgument(
          unsigned(gpu::LaunchOp::kNumConfigRegionAttributes + i),
          b.getIndexType(), b.getLoc());
  buildLaunchBody(b, launchOp, body);
}

void gpu_lowering::forEach(LoweringBuilder &b, Value lb, Value ub, Value step,
                           function_ref<void(LoweringBuilder &, Value)> body) {
  scf::ForOp::create(
      b, lb, ub, step, ValueRange{},
      [&](OpBuilder &nested, Location loc, Value iv, ValueRange) {
        LoweringBuilder nb(loc, nested);
        body(nb, iv);
        scf::YieldOp::create(nb);
      });
}

void gpu_lowering::when(LoweringBuilder &b, Value cond,
                        function_ref<void(LoweringBuilder &)> body) {
  scf::IfOp::create(b, cond, [&](OpBuilder &nested, Location loc) {
    LoweringBuilder nb(loc, nested);
    body(nb);
    scf::YieldOp::create(nb);
  });
}

void gpu_lowering::forEachSlotOfRow(
    LoweringBuilder &b, Value ids, Value row,
    function_ref<void(LoweringBuilder &, Value, Value)> body) {
  int64_t k = cast<MemRefType>(ids.getType()).getDimSize(1);
  forEach(b, b.idx(0), b.idx(k), b.idx(1), [&](LoweringBuilder &b, Value j) {
    body(b, j, b.load(ids, {row, j}));
  });
}

void gpu_lowering::forEachExpertSlotOfRow(
    LoweringBuilder &b, Value ids, Value row, int64_t e,
    function_ref<void(LoweringBuilder &, Value, Value)> body) {
  forEachSlotOfRow(b, ids, row, [&](LoweringBuilder &b, Value j, Value expert) {
    when(b, b.inRange(expert, b.i32(0), b.i32(e)),
         [&](LoweringBuilder &b) { body(b, j, expert); });
  });
}

std::pair<Value, Value> gpu_lowering::rowAndSlot(LoweringBuilder &b, Value slot,
                                                 int64_t k) {
  return {arith::DivUIOp::create(b, slot, b.idx(k)),
          arith::RemUIOp::create(b, slot, b.idx(k))};
}

void gpu_lowering::launchForEach(
    LoweringBuilder &b, Value n,
    function_ref<void(LoweringBuilder &, Value)> body) {
  Value grid = b.ceilDiv(n, kBlockThreads);
  launch(b, grid, b.idx(1), kBlockThreads, {},
         [&](LoweringBuilder &kb, const KernelIds &ids, ArrayRef<Value>) {
           Value i =
               kb.add(kb.mul(ids.blockX, kb.idx(kBlockThreads)), ids.threadX);
           when(kb, kb.cmpi(CmpI::ult, i, n),
                [&](LoweringBuilder &kb) { body(kb, i); });
         });
}

void gpu_lowering::launchRowsCols(
    LoweringBuilder &b, Value rows, Value cols,
    function_ref<void(LoweringBuilder &, Value, Value)> body) {
  Value colBlocks = b.maxIdx(b.ceilDiv(cols, kBlockThreads), b.idx(1));
  launch(b, rows, colBlocks, kBlockThreads, {},
         [&](LoweringBuilder &kb, const KernelIds &ids, ArrayRef<Value>) {
           Value col =
               kb.add(kb.mul(ids.blockY, kb.idx(kBlockThreads)), ids.threadX);
           Value inside = kb.andi(kb.cmpi(CmpI::ult, ids.blockX, rows),
                                  kb.cmpi(CmpI::ult, col, cols));
           when(kb, inside,
                [&](LoweringBuilder &kb) { body(kb, ids.blockX, col); });
         });
}

void gpu_lowering::fillBuffer(LoweringBuilder &b, Value buffer, Value value) {
  auto type = cast<MemRefType>(buffer.getType());
  if (type.getRank() == 1) {
    launchForEach(b, b.memDim(buffer, 0), [&](LoweringBuilder &kb, Value i) {
      kb.store(value, buffer, {i});
    });
    return;
  }
  assert(type.getRank() == 2 && "fillBuffer: rank 1 or 2");
  launchRowsCols(b, b.memDim(buffer, 0), b.memDim(buffer, 1),
                 [&](LoweringBuilder &kb, Value r, Value c) {
                   kb.store(value, buffer, {r, c});
                 });
}

void gpu_lowering::orderedBuckets(
    LoweringBuilder &b, Value n, int64_t numBuckets,
    function_ref<Value(LoweringBuilder &, Value)> bucketOf,
    function_ref<void(LoweringBuilder &, Value)> onTotals,
    function_ref<void(LoweringBuilder &, Value, Value, Value)> place) {
  Type i32 = b.getI32Type();
  Value counts = allocScratch(b, {kScanThreads, numBuckets}, i32, {});
  Value totals = allocScratch(b, {numBuckets}, i32, {});
  Value chunk = b.ceilDiv(n, kScanThreads);
  launch(b, b.idx(1), b.idx(1), kScanThreads, {},
         [&](LoweringBuilder &kb, const KernelIds &ids, ArrayRef<Value>) {
           Value t = ids.threadX;
           Value zero = kb.idx(0), one = kb.idx(1);
           Value nb = kb.idx(numBuckets);
           Value first = kb.minIdx(kb.mul(t, chunk), n);
           Value last = kb.minIdx(kb.add(first, chunk), n);
           // 1. Per-thread histogram of its chunk.
           forEach(kb, zero, nb, one, [&](LoweringBuilder &kb, Value bk) {
             kb.store(kb.i32(0), counts, {t, bk});
           });
           forEach(kb, first, last, one, [&](LoweringBuilder &kb, Value item) {
             Value bucket = bucketOf(kb, item);
             when(kb, kb.cmpi(CmpI::sge, bucket, kb.i32(0)),
                  [&](LoweringBuilder &kb) {
                    Value bk = kb.toIndex(bucket);
                    Value c = kb.load(counts, {t, bk});
                    kb.store(kb.add(c, kb.i32(1)), counts, {t, bk});
                  });
           });
           gpu::BarrierOp::create(kb);
           // 2. Exclusive scan over threads, one bucket per thread (strided).
           forEach(kb, t, nb, kb.idx(kScanThreads),
                   [&](LoweringBuilder &kb, Value bk) {
                     Value total =
                         exclusiveColumnScan(kb, counts, kScanThreads, bk);
                     kb.store(total, totals, {bk});
                   });
           gpu::BarrierOp::create(kb);
           when(kb, kb.cmpi(CmpI::eq, t, zero),
                [&](LoweringBuilder &kb) { onTotals(kb, totals); });
           gpu::BarrierOp::create(kb);
           // 3. Ordered placement.
           forEach(kb, first, last, one, [&](LoweringBuilder &kb, Value item) {
             Value bucket = bucketOf(kb, item);
             when(kb, kb.cmpi(CmpI::sge, bucket, kb.i32(0)),
                  [&](LoweringBuilder &kb) {
                    Value bk = kb.toIndex(bucket);
                    Value rank = kb.load(counts, {t, bk});
                    kb.store(kb.add(rank, kb.i32(1)), counts, {t, bk});
                    place(kb, item, bucket, rank);
                  });
           });
         });
}

/// Sum (i32) of buffer[first, last), one thread's serial run.
static Value sumRange(LoweringBuilder &b, Value buffer, Value first,
                      Value last) {
  return b.forLoop(
      first, last, {b.i32(0)},
      [&](LoweringBuilder &b, Value i, ValueRange acc) -> SmallVector<Value> {
        return {b.add(acc[0], b.load(buffer, {i}))};
      })[0];
}

Value gpu_lowering::exclusiveColumnScan(LoweringBuilder &b, Value counts,
                                        int64_t rows, Value col) {
  return b.forLoop(
      b.idx(0), b.idx(rows), {b.i32(0)},
      [&](LoweringBuilder &b, Value row, ValueRange acc) -> SmallVector<Value> {
        Value c = b.load(counts, {row, col});
        b.store(acc[0], counts, {row, col});
        return {b.add(acc[0], c)};
      })[0];
}

void gpu_lowering::inclusiveScan(LoweringBuilder &b, Value buffer, Value n) {
  Type i32 = b.getI32Type();
  Value chunk = b.ceilDiv(n, kScanThreads);
  launch(
      b, b.idx(1), b.idx(1), kScanThreads, {workgroupType({kScanThreads}, i32)},
      [&](LoweringBuilder &kb, const KernelIds &ids, ArrayRef<Value> shared) {
        Value partial = shared[0];
        Value t = ids.threadX;
        Value zero = kb.idx(0);
        Value first = kb.minIdx(kb.mul(t, chunk), n);
        Value last = kb.minIdx(kb.add(first, chunk), n);
        Value sum = sumRange(kb, buffer, first, last);
        kb.store(sum, partial, {t});
        gpu::BarrierOp::create(kb);
        when(kb, kb.cmpi(CmpI::eq, t, zero), [&](LoweringBuilder &kb) {
          kb.forLoop(zero, kb.idx(kScanThreads), {kb.i32(0)},
                     [&](LoweringBuilder &kb, Value u,
                         ValueRange acc) -> SmallVector<Value> {
                       Value c = kb.load(partial, {u});
                       kb.store(acc[0], partial, {u});
                       return {kb.add(acc[0], c)};
                     });
        });
        gpu::BarrierOp::create(kb);
        kb.forLoop(first, last, {kb.load(partial, {t})},
                   [&](LoweringBuilder &kb, Value i,
                       ValueRange acc) -> SmallVector<Value> {
                     Value running = kb.add(acc[0], kb.load(buffer, {i}));
                     kb.store(running, buffer, {i});
                     return {running};
                   });
      });
}

//===----------------------------------------------------------------------===//
// Warp-level building blocks
//===----------------------------------------------------------------------===//

Value gpu_lowering::warpShuffle(LoweringBuilder &b, Value v, Value offset,
                                gpu::ShuffleMode mode) {
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  if (v.getType() == i64) {
    // Two 32-bit shuffles of the halves.
    Value lo = arith::TruncIOp::create(b, i32, v);
    Value hi = arith::TruncIOp::create(
        b, i32,
        arith::ShRUIOp::create(b, v, arith::ConstantIntOp::create(b, i64, 32)));
    lo = warpShuffle(b, lo, offset, mode);
    hi = warpShuffle(b, hi, offset, mode);
    Value hi64 =
        arith::ShLIOp::create(b, arith::ExtUIOp::create(b, i64, hi),
                              arith::ConstantIntOp::create(b, i64, 32));
    return arith::OrIOp::create(b, hi64, arith::ExtUIOp::create(b, i64, lo));
  }
  return gpu::ShuffleOp::create(b, v, offset, b.i32(kWarpSize), mode)
      .getShuffleResult();
}

Value gpu_lowering::warpShuffle(LoweringBuilder &b, Value v, int64_t offset,
                                gpu::ShuffleMode mode) {
  return warpShuffle(b, v, b.i32(offset), mode);
}

SmallVector<Value> gpu_lowering::warpAllReduce(LoweringBuilder &b,
                                               ValueRange values,
                                               CombineFn combine) {
  SmallVector<Value> acc(values);
  for (int64_t offset = kWarpSize / 2; offset >= 1; offset /= 2) {
    SmallVector<Value> other;
    for (Value v : acc)
      other.push_back(warpShuffle(b, v, offset, gpu::ShuffleMode::XOR));
    acc = combine(b, acc, other);
  }
  return acc;
}

std::pair<Value, Value> gpu_lowering::warpRankOf(LoweringBuilder &b, Value key,
                                                 Value laneI32,
                                                 bool matchSync) {
  Type i32 = b.getI32Type();
  if (matchSync) {
    Value same = NVVM::MatchSyncOp::create(b, i32, b.i32(-1), key,
                                           NVVM::MatchSyncKind::any);
    Value below = NVVM::LaneMaskLtOp::create(b, i32);
    Value before =
        LLVM::CtPopOp::create(b, arith::AndIOp::create(b, same, below));
    return {before, LLVM::CtPopOp::create(b, same)};
  }
  Value before = b.i32(0), total = b.i32(0);
  for (int64_t l = 0; l < kWarpSize; ++l) {
    Value other = warpShuffle(b, key, l, gpu::ShuffleMode::IDX);
    Value same = arith::ExtUIOp::create(b, i32, b.cmpi(CmpI::eq, other, key));
    total = b.add(total, same);
    Value below =
        arith::ExtUIOp::create(b, i32, b.cmpi(CmpI::sgt, laneI32, b.i32(l)));
    before = b.add(before, arith::AndIOp::create(b, same, below));
  }
  return {before, total};
}

bool gpu_lowering::chipAtLeast(StringRef chip, unsigned version) {
  unsigned sm = 0;
  return chip.consume_front("sm_") &&
         !chip.take_while(llvm::isDigit).getAsInteger(10, sm) && sm >= version;
}

Value gpu_lowering::warpInclusiveSum(LoweringBuilder &b, Value v, Value lane) {
  Value x = v;
  for (int64_t d = 1; d < kWarpSize; d *= 2) {
    Value y = warpShuffle(b, x, d, gpu::ShuffleMode::UP);
    Value has = b.cmpi(CmpI::uge, lane, b.idx(d));
    x = b.add(x, b.select(has, y, b.i32(0)));
  }
  return x;
}

void gpu_lowering::launchWarpPerRow(
    LoweringBuilder &b, Value rows,
    function_ref<void(LoweringBuilder &, Value, Value)> body) {
  Value grid = b.ceilDiv(rows, kRowsPerBlock);
  launch(b, grid, b.idx(1), kRowsPerBlock * kWarpSize, {},
         [&](LoweringBuilder &kb, const KernelIds &ids, ArrayRef<Value>) {
           Value warp =
               arith::DivUIOp::create(kb, ids.threadX, kb.idx(kWarpSize));
           Value lane =
               arith::RemUIOp::create(kb, ids.threadX, kb.idx(kWarpSize));
           Value row = kb.add(kb.mul(ids.blockX, kb.idx(kRowsPerBlock)), warp);
           when(kb, kb.cmpi(CmpI::ult, row, rows),
                [&](LoweringBuilder &kb) { body(kb, row, lane); });
         });
}

//===----------------------------------------------------------------------===//
// Stable bucketing over many blocks
//===----------------------------------------------------------------------===//

/// Warps per block of stableBuckets' chunk kernel: 8, fewer when the
/// per-warp bucket counters would pass 32 KiB of shared memory.
static int64_t sortWarpsPerBlock(int64_t numBuckets) {
  return std::clamp<int64_t>(kMaxSortBuckets / numBuckets, 1, 8);
}

/// Block-wide scan of one i32 per thread (`threads` threads, `warpSums` a
/// workgroup buffer of threads / 32 i32): (the sum over the threads below
/// this one, the block's total). Every thread must reach it; it ends with
/// a barrier, so `warpSums` may be reused right after.
static std::pair<Value, Value> blockExclusiveScan(LoweringBuilder &kb, Value v,
                                                  Value t, Value warpSums,
                                                  int64_t threads) {
  Value warp = arith::DivUIOp::create(kb, t, kb.idx(kWarpSize));
  Value lane = arith::RemUIOp::create(kb, t, kb.idx(kWarpSize));
  Value incl = warpInclusiveSum(kb, v, lane);
  when(kb, kb.cmpi(CmpI::eq, lane, kb.idx(kWarpSize - 1)),
       [&](LoweringBuilder &kb) { kb.store(incl, warpSums, {warp}); });
  gpu::BarrierOp::create(kb);
  SmallVector<Value> sums = kb.forLoop(
      kb.idx(0), kb.idx(threads / kWarpSize), {kb.sub(incl, v), kb.i32(0)},
      [&](LoweringBuilder &kb, Value u, ValueRange acc) -> SmallVector<Value> {
        Value s = kb.load(warpSums, {u});
        Value below = kb.cmpi(CmpI::ult, u, warp);
        return {kb.add(acc[0], kb.select(below, s, kb.i32(0))),
                kb.add(acc[1], s)};
      });
  gpu::BarrierOp::create(kb);
  return {sums[0], sums[1]};
}

void gpu_lowering::stableBuckets(
    LoweringBuilder &b, Value n, int64_t numBuckets,
    function_ref<Value(LoweringBuilder &, Value)> bucketOf, Value bucketOffsets,
    function_ref<void(LoweringBuilder &, Value, Value, Value)> place,
    bool matchSync) {
  assert(numBuckets >= 1 && numBuckets <= kMaxSortBuckets &&
         "stableBuckets: bucket count out of range");
  Type i32 = b.getI32Type();
  Value oneIdx = b.idx(1);
  Value nb = b.idx(numBuckets);
  Value warpSize = b.idx(kWarpSize);
  // A chunk is `steps` x 32 consecutive items, one warp's: about one item
  // per bucket (so the counts are about as many as the items), more when
  // there would be more than maxChunks chunks; at least one chunk, so that
  // the offsets are written even when n = 0.
  int64_t minSteps =
      std::clamp<int64_t>((numBuckets + kWarpSize - 1) / kWarpSize, 1, 8);
  int64_t maxChunks = std::max<int64_t>(256, kMaxSortCounts / numBuckets);
  Value steps = b.maxIdx(b.ceilDiv(n, kWarpSize * maxChunks), b.idx(minSteps));
  Value chunk = b.mul(steps, warpSize);
  Value numChunks = b.maxIdx(arith::CeilDivUIOp::create(b, n, chunk), oneIdx);
  // counts[bucket * numChunks + chunk]; totals[bucket]; ranks[item].
  Value counts =
      allocScratch(b, {ShapedType::kDynamic}, i32, {b.mul(nb, numChunks)});
  Value totals = allocScratch(b, {numBuckets}, i32, {});
  Value ranks = allocScratch(b, {ShapedType::kDynamic}, i32, {n});
  auto countAt = [&](LoweringBuilder &b, Value bucket, Value c) {
    return b.add(b.mul(bucket, numChunks), c);
  };
  auto warpAndLane = [&](LoweringBuilder &b, Value thread) {
    return std::make_pair(
        Value(arith::DivUIOp::create(b, thread, b.idx(kWarpSize))),
        Value(arith::RemUIOp::create(b, thread, b.idx(kWarpSize))));
  };

  // 1. One warp per chunk, `steps` rounds of 32 items (lane l has item
  //    chunk * c + 32 * step + l). warpRankOf gives each lane `before`
  //    (lanes below it with its bucket) and `total` (lanes with its
  //    bucket); its rank is the chunk's running count of the bucket
  //    (shared memory, one row per warp, which only that warp touches, so
  //    warp barriers order it) plus `before`; after a warp barrier, the
  //    bucket's last lane adds `total` to the running count, and a second
  //    one orders that before the next round. The next round's bucket is
  //    loaded before this round's ranks are taken. Warps past the last
  //    chunk see only items >= n.
  int64_t wpb = sortWarpsPerBlock(numBuckets);
  Value blocks1 = arith::CeilDivUIOp::create(b, numChunks, b.idx(wpb));
  launch(
      b, blocks1, oneIdx, wpb * kWarpSize,
      {workgroupType({wpb, numBuckets}, i32)},
      [&](LoweringBuilder &kb, const KernelIds &ids, ArrayRef<Value> shared) {
        Value running = shared[0];
        auto [w, lane] = warpAndLane(kb, ids.threadX);
        Value c = kb.add(kb.mul(ids.blockX, kb.idx(wpb)), w);
        Value zero = kb.idx(0), one = kb.idx(1);
        Value laneI32 = kb.toI32(lane);
        auto warpBarrier = [](LoweringBuilder &kb) {
          NVVM::SyncWarpOp::create(kb, kb.i32(-1));
        };
        forEach(kb, lane, nb, warpSize, [&](LoweringBuilder &kb, Value bk) {
          kb.store(kb.i32(0), running, {w, bk});
        });
        warpBarrier(kb);
        Value chunkFirst = kb.mul(c, chunk);
        auto itemAt = [&](LoweringBuilder &kb, Value s) -> Value {
          return kb.add(kb.add(chunkFirst, kb.mul(s, kb.idx(kWarpSize))), lane);
        };
        auto bucketAt = [&](LoweringBuilder &kb, Value item) -> Value {
          return kb.ifElse(
              kb.cmpi(CmpI::ult, item, n), {i32},
              [&](LoweringBuilder &kb) -> SmallVector<Value> {
                return {bucketOf(kb, item)};
              },
              [&](LoweringBuilder &kb) -> SmallVector<Value> {
                return {kb.i32(-1)};
              })[0];
        };
        kb.forLoop(zero, steps, {bucketAt(kb, itemAt(kb, zero))},
                   [&](LoweringBuilder &kb, Value s,
                       ValueRange carried) -> SmallVector<Value> {
                     Value item = itemAt(kb, s);
                     Value bucket = carried[0];
                     // The next round's bucket (-1 past the chunk): its load
                     // overlaps this round.
                     Value nextS = kb.add(s, one);
                     Value nextItem =
                         kb.select(kb.cmpi(CmpI::ult, nextS, steps),
                                   itemAt(kb, nextS), n);
                     Value next = bucketAt(kb, nextItem);
                     Value before, total;
                     std::tie(before, total) =
                         warpRankOf(kb, bucket, laneI32, matchSync);
                     Value valid = kb.cmpi(CmpI::sge, bucket, kb.i32(0));
                     when(kb, valid, [&](LoweringBuilder &kb) {
                       Value base = kb.load(running, {w, kb.toIndex(bucket)});
                       kb.store(kb.add(base, before), ranks, {item});
                     });
                     // Every read of `running` in this round is done.
                     warpBarrier(kb);
                     Value last =
                         kb.cmpi(CmpI::eq, total, kb.add(before, kb.i32(1)));
                     when(kb, kb.andi(valid, last), [&](LoweringBuilder &kb) {
                       Value bk = kb.toIndex(bucket);
                       kb.store(kb.add(kb.load(running, {w, bk}), total),
                                running, {w, bk});
                     });
                     // The updates are visible to the next round (and the
                     // copy-out).
                     warpBarrier(kb);
                     return {next};
                   });
        when(kb, kb.cmpi(CmpI::ult, c, numChunks), [&](LoweringBuilder &kb) {
          forEach(kb, lane, nb, warpSize, [&](LoweringBuilder &kb, Value bk) {
            kb.store(kb.load(running, {w, bk}), counts, {countAt(kb, bk, c)});
          });
        });
      });

  // 2. One block per bucket: the exclusive prefix of its chunk counts (in
  //    place, kScanThreads chunks per block-wide scan) and its total.
  launch(
      b, nb, oneIdx, kScanThreads,
      {workgroupType({kScanThreads / kWarpSize}, i32)},
      [&](LoweringBuilder &kb, const KernelIds &ids, ArrayRef<Value> shared) {
        Value bk = ids.blockX, t = ids.threadX;
        Value zero = kb.idx(0);
        Value total = kb.forLoop(
            zero, numChunks, kb.idx(kScanThreads), {kb.i32(0)},
            [&](LoweringBuilder &kb, Value first,
                ValueRange acc) -> SmallVector<Value> {
              Value c = kb.add(first, t);
              Value inside = kb.cmpi(CmpI::ult, c, numChunks);
              // Clamped read: every thread reaches the block scan.
              Value at = countAt(kb, bk, kb.select(inside, c, zero));
              Value v = kb.select(inside, kb.load(counts, {at}), kb.i32(0));
              auto [excl, sum] =
                  blockExclusiveScan(kb, v, t, shared[0], kScanThreads);
              when(kb, inside, [&](LoweringBuilder &kb) {
                kb.store(kb.add(acc[0], excl), counts, {at});
              });
              return {kb.add(acc[0], sum)};
            })[0];
        when(kb, kb.cmpi(CmpI::eq, t, zero),
             [&](LoweringBuilder &kb) { kb.store(total, totals, {bk}); });
      });

  // 3. One thread per item. Each block first scans the bucket totals into
  //    the exclusive bucket offsets (shared memory; block 0 also writes
  //    them to `bucketOffsets`): thread t sums a contiguous run of
  //    buckets, the runs' sums are scanned over the block, then each
  //    thread writes its run. The item's bucket and rank are loaded
  //    before the scan, so their latency overlaps it.
  int64_t perThread = (numBuckets + kBlockThreads - 1) / kBlockThreads;
  Value grid3 = b.ceilDiv(n, kBlockThreads);
  launch(
      b, grid3, oneIdx, kBlockThreads,
      {workgroupType({numBuckets}, i32),
       workgroupType({kBlockThreads / kWarpSize}, i32)},
      [&](LoweringBuilder &kb, const KernelIds &ids, ArrayRef<Value> shared) {
        Value offs = shared[0], warpSums = shared[1];
        Value t = ids.threadX;
        Value zero = kb.idx(0);
        Value item = kb.add(kb.mul(ids.blockX, kb.idx(kBlockThreads)), t);
        SmallVector<Value> mine = kb.ifElse(
            kb.cmpi(CmpI::ult, item, n), {i32, i32},
            [&](LoweringBuilder &kb) -> SmallVector<Value> {
              return {bucketOf(kb, item), kb.load(ranks, {item})};
            },
            [&](LoweringBuilder &kb) -> SmallVector<Value> {
              return {kb.i32(-1), kb.i32(0)};
            });
        Value first = kb.minIdx(kb.mul(t, kb.idx(perThread)), nb);
        Value last = kb.minIdx(kb.add(first, kb.idx(perThread)), nb);
        Value runSum = sumRange(kb, totals, first, last);
        Value base =
            blockExclusiveScan(kb, runSum, t, warpSums, kBlockThreads).first;
        kb.forLoop(first, last, {base},
                   [&](LoweringBuilder &kb, Value i,
                       ValueRange acc) -> SmallVector<Value> {
                     kb.store(acc[0], offs, {i});
                     return {kb.add(acc[0], kb.load(totals, {i}))};
                   });
        gpu::BarrierOp::create(kb);
        when(kb, kb.cmpi(CmpI::eq, ids.blockX, zero), [&](LoweringBuilder &kb) {
          forEach(kb, t, nb, kb.idx(kBlockThreads),
                  [&](LoweringBuilder &kb, Value i) {
                    kb.store(kb.load(offs, {i}), bucketOffsets, {i});
                  });
        });
        Value bucket = mine[0];
        when(kb, kb.cmpi(CmpI::sge, bucket, kb.i32(0)),
             [&](LoweringBuilder &kb) {
               Value bk = kb.toIndex(bucket);
               Value c = arith::DivUIOp::create(kb, item, chunk);
               Value pos = kb.add(kb.load(offs, {bk}),
                                  kb.load(counts, {countAt(kb, bk, c)}));
               pos = kb.add(pos, mine[1]);
               place(kb, item, bucket, pos);
             });
      });
}
