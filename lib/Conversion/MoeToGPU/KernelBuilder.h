//===- KernelBuilder.h - gpu.launch helpers for the moe GPU lowering -*- C++
//-*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The GPU lowering turns each moe op (on tensors) into
//
//   %in  = bufferization.to_buffer %t read_only   (any strided layout)
//   %out = memref.alloc(...)                       (device memory, later)
//   gpu.launch ... { memref.load / memref.store / scf / arith }
//   %r   = bufferization.to_tensor %out restrict writable
//
// so one-shot bufferization handles everything around the kernels. These
// helpers build the buffer plumbing and the common launch shapes: one
// thread per item, rows x columns (rows on grid.x, which allows 2^31-1
// blocks), one warp per row (warp shuffles), single-block ordered passes
// and a multi-block stable counting sort for the order-dependent dispatch
// metadata. All index arithmetic is in `index`, i.e. 64-bit on the
// device.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_LIB_CONVERSION_MOETOGPU_KERNELBUILDER_H
#define MOE_MLIR_LIB_CONVERSION_MOETOGPU_KERNELBUILDER_H

#include "Utils/LoweringBuilder.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir {
namespace moe {
namespace gpu_lowering {

/// Threads per block of the one-thread-per-item kernels.
constexpr int64_t kBlockThreads = 256;
/// Threads of the single-block ordered passes.
constexpr int64_t kScanThreads = 1024;

/// memref type of `type`'s shape and element type with a fully dynamic
/// strided layout: any buffer bufferization picks casts to it.
MemRefType anyLayoutType(RankedTensorType type);

/// Read-only buffer view of a tensor operand.
Value toBuffer(LoweringBuilder &b, Value tensor);
/// Fresh identity-layout buffer for a result of `type`.
Value allocBuffer(LoweringBuilder &b, RankedTensorType type,
                  ValueRange dynSizes);
/// Fresh identity-layout scratch buffer (freed by the deallocation pass).
Value allocScratch(LoweringBuilder &b, ArrayRef<int64_t> shape, Type element,
                   ValueRange dynSizes);
/// The tensor of a buffer the kernels have fully written.
Value toTensor(LoweringBuilder &b, Value buffer);

/// Ids available in a kernel body.
struct KernelIds {
  Value blockX, blockY, threadX, gridX;
};
using KernelBody = function_ref<void(LoweringBuilder &, const KernelIds &,
                                     ArrayRef<Value> workgroup)>;

/// gpu.launch with grid (max(gridX, 1), gridY, 1) and `threads` x 1 x 1,
/// workgroup (shared) buffers of `workgroup` types.
void launch(LoweringBuilder &b, Value gridX, Value gridY, int64_t threads,
            ArrayRef<MemRefType> workgroup, KernelBody body);

/// gpu.launch of `gridX` x 1 x 1 blocks (no rounding up from 0: the caller
/// guarantees >= 1) of `threads` threads, in clusters of `clusterX` x 1 x 1
/// blocks (a run-time value; null: no cluster size, a plain launch), with
/// `dynamicSharedBytes` (i32; null: none) and `workgroup` buffers; `body`
/// as for launch (the terminator is added after it).
void launchInClusters(LoweringBuilder &b, Value gridX, Value clusterX,
                      int64_t threads, Value dynamicSharedBytes,
                      ArrayRef<MemRefType> workgroup, KernelBody body);

/// One thread per i in [0, n).
void launchForEach(LoweringBuilder &b, Value n,
                   function_ref<void(LoweringBuilder &, Value i)> body);

/// One thread per (row, col) of rows x cols: rows on grid.x, column blocks
/// of kBlockThreads on grid.y (coalesced along a row).
void launchRowsCols(
    LoweringBuilder &b, Value rows, Value cols,
    function_ref<void(LoweringBuilder &, Value row, Value col)> body);

/// Fills a buffer of rank 1 or 2 with `value` (one kernel).
void fillBuffer(LoweringBuilder &b, Value buffer, Value value);

/// Statements with no results.
void forEach(LoweringBuilder &b, Value lb, Value ub, Value step,
             function_ref<void(LoweringBuilder &, Value iv)> body);
void when(LoweringBuilder &b, Value cond,
          function_ref<void(LoweringBuilder &)> body);

/// Visits the k slots of row `row` of a T x k i32 id buffer in order:
/// body(j, ids[row][j]).
void forEachSlotOfRow(
    LoweringBuilder &b, Value ids, Value row,
    function_ref<void(LoweringBuilder &, Value j, Value expert)> body);
/// forEachSlotOfRow over the slots whose expert id lies in [0, e) (the
/// dispatched ones).
void forEachExpertSlotOfRow(
    LoweringBuilder &b, Value ids, Value row, int64_t e,
    function_ref<void(LoweringBuilder &, Value j, Value expert)> body);
/// (row, j) of the flat slot index `slot` = row * k + j.
std::pair<Value, Value> rowAndSlot(LoweringBuilder &b, Value slot, int64_t k);

/// A workgroup-memory memref type.
MemRefType workgroupType(ArrayRef<int64_t> shape, Type element);

/// Ordered bucketing of `n` items by one block of kScanThreads threads:
/// each item gets `bucketOf(item)` in [0, numBuckets) or -1 (skipped);
/// items of one bucket get consecutive ranks 0, 1, ... in item order.
/// After counting, thread 0 runs `onTotals(totals)` with a buffer of the
/// per-bucket totals (numBuckets i32); after a barrier, every item is
/// passed to `place(item, bucket, rank)`. Deterministic, O(n / 1024 +
/// numBuckets * 1024) per thread; uses a kScanThreads x numBuckets scratch.
void orderedBuckets(
    LoweringBuilder &b, Value n, int64_t numBuckets,
    function_ref<Value(LoweringBuilder &, Value item)> bucketOf,
    function_ref<void(LoweringBuilder &, Value totals)> onTotals,
    function_ref<void(LoweringBuilder &, Value item, Value bucket, Value rank)>
        place);

/// Column `col` of the i32 buffer `counts` ([rows][buckets], shared or
/// global), in place and in row order: each entry becomes the sum of the
/// entries above it; returns the column's total.
Value exclusiveColumnScan(LoweringBuilder &b, Value counts, int64_t rows,
                          Value col);

/// In-place inclusive prefix sum of a rank-1 i32 buffer of `n` elements
/// (one block, chunked).
void inclusiveScan(LoweringBuilder &b, Value buffer, Value n);

//===----------------------------------------------------------------------===//
// Warp-level building blocks. Every helper below must be reached by all 32
// lanes of the warp together (warp-uniform control flow around it): the
// shuffles are gpu.shuffle with width 32, i.e. shfl.sync with a full mask.
//===----------------------------------------------------------------------===//

/// Lanes per warp.
constexpr int64_t kWarpSize = 32;
/// Warps (= rows) per block of the one-warp-per-row kernels.
constexpr int64_t kRowsPerBlock = 4;

/// gpu.shuffle of an i32 / f32 value (i64: as two i32 shuffles) across the
/// 32 lanes of a warp: `xor`, `up`, `down` or `idx` with an i32 offset.
Value warpShuffle(LoweringBuilder &b, Value v, Value offset,
                  gpu::ShuffleMode mode);
Value warpShuffle(LoweringBuilder &b, Value v, int64_t offset,
                  gpu::ShuffleMode mode);

using CombineFn =
    function_ref<SmallVector<Value>(LoweringBuilder &, ValueRange, ValueRange)>;
/// Butterfly all-reduce over the warp of a tuple of values: after 5 xor
/// steps every lane holds combine over all 32 lanes' tuples. `combine`
/// must be associative and commutative (bit for bit, or lanes may end up
/// with different results).
SmallVector<Value> warpAllReduce(LoweringBuilder &b, ValueRange values,
                                 CombineFn combine);

/// Inclusive prefix sum of an i32 over the lanes of a warp (lane 0 first);
/// `lane` is the index-typed lane id.
Value warpInclusiveSum(LoweringBuilder &b, Value v, Value lane);

/// For an i32 `key` per lane: (lanes below this one with the same key,
/// lanes with the same key): one match.any.sync and two popc where
/// `matchSync` (sm_70 and later), else 32 idx shuffles; `laneI32` is the
/// i32 lane id.
std::pair<Value, Value> warpRankOf(LoweringBuilder &b, Value key, Value laneI32,
                                   bool matchSync = false);

/// Whether `chip` ("sm_90a", "sm_75", ...) is sm_`version` or later; false
/// for a chip name that is not sm_<digits>.
bool chipAtLeast(StringRef chip, unsigned version);

/// One warp per row of `rows`: kRowsPerBlock rows per block, blocks over
/// grid.x. body(row, lane) runs on all 32 lanes of the row's warp (the
/// `row < rows` guard is warp-uniform, so the body may shuffle).
void launchWarpPerRow(
    LoweringBuilder &b, Value rows,
    function_ref<void(LoweringBuilder &, Value row, Value lane)> body);

//===----------------------------------------------------------------------===//
// Stable bucketing over many blocks.
//===----------------------------------------------------------------------===//

/// stableBuckets' scratch of per-chunk bucket counts holds at most about
/// this many entries (more items make longer chunks), which bounds its
/// memory and its scans.
constexpr int64_t kMaxSortCounts = int64_t(1) << 20;
/// Largest bucket count stableBuckets handles (per-warp bucket counters in
/// shared memory, at most 32 KiB a block); orderedBuckets has no limit.
constexpr int64_t kMaxSortBuckets = 8192;

/// Stable counting sort of `n` items into `numBuckets` buckets, the same
/// result as orderedBuckets, in three multi-block kernels:
///   1. one warp per chunk of 32 * s consecutive items, in s rounds of 32
///      (s = clamp(ceil(numBuckets / 32), 1, 8), larger when the chunks
///      would pass max(256, kMaxSortCounts / numBuckets)): each item's
///      rank among the chunk's earlier items of its bucket (warpRankOf
///      inside the round, a running per-bucket count in the warp's row of
///      shared memory across rounds, each round's ids loaded during the
///      one before) into `ranks` (n i32), and the chunk's histogram into
///      `counts[bucket][chunk]`;
///   2. one block per bucket: the exclusive prefix of its counts over the
///      chunks (in place, block-wide scans of kScanThreads chunks) and its
///      total;
///   3. one thread per item; each block first scans the bucket totals into
///      the exclusive bucket offsets (block 0 also writes them to
///      `bucketOffsets`, numBuckets i32); position = offset[bucket] +
///      counts[bucket][chunk] + rank, passed to place(item, bucket, pos).
/// `bucketOf(item)` is in [0, numBuckets) or -1 (the item is skipped); it
/// is evaluated in kernels 1 and 3, and only for items < n. Items of one
/// bucket get consecutive positions in item order. Deterministic, no
/// atomics, O(n + numBuckets * chunks) work; `matchSync` as warpRankOf.
void stableBuckets(
    LoweringBuilder &b, Value n, int64_t numBuckets,
    function_ref<Value(LoweringBuilder &, Value item)> bucketOf,
    Value bucketOffsets,
    function_ref<void(LoweringBuilder &, Value item, Value bucket, Value pos)>
        place,
    bool matchSync = false);

/// moe.dispatch's bucket of slot `slot` (row slot / k, slot slot % k) of the
/// `T x k` expert ids: its expert, E for an id outside [0, E).
Value dispatchBucket(LoweringBuilder &b, Value ids, Value slot, int64_t k,
                     int64_t e);

/// moe.dispatch's kernels (DispatchToGPU.cpp) on the `T x k` expert ids
/// `ids` (m = T * k slots, as index and i32): the exclusive offsets of the
/// E + 1 buckets (E: ids outside [0, E)) into `offsets`, and for every slot
/// its position's reverse index and token into `rev` / `tok`; `matchSync`
/// as warpRankOf.
void emitDispatch(LoweringBuilder &b, Value ids, int64_t k, int64_t e, Value m,
                  Value mI32, Value offsets, Value rev, Value tok,
                  bool matchSync = false);

} // namespace gpu_lowering
} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_LIB_CONVERSION_MOETOGPU_KERNELBUILDER_H
