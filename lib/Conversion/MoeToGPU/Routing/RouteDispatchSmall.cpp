//===- RouteDispatchSmall.cpp - moe.route_dispatch at small T -------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// With route-dispatch-small (the default), a moe.route_dispatch launch with
// few rows (T <= 64, k <= 32, E <= 256) is one kernel, a thread-block
// cluster of up to 8 blocks (routeDispatchCluster), chosen on the host;
// larger launches take the route kernel (Route.cpp) and moe.dispatch's
// kernels (DispatchToGPU.cpp).
//
//===----------------------------------------------------------------------===//

#include "Routing.h"

#include "MoeToGPU/Gemm/NVVMBuilder.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;
using namespace mlir::moe::gpu_lowering::routing;

using CmpI = arith::CmpIPredicate;

/// The cluster kernel. Block b's slots are [b R k, (b + 1) R k) (R = 8
/// rows): thread s takes slot b R k + s, its bucket (the expert, E for an
/// id outside [0, E)) and its rank among the earlier slots of its warp with
/// that bucket (shuffles); per bucket, the warps' counts become the
/// earlier warps' (in place) and the block's total is published in shared
/// memory. After the cluster barrier each block reads every block's totals
/// of its q = ceil((E + 1) / 256) buckets per thread (DSMEM loads): the
/// earlier blocks' sum and the bucket total, whose exclusive scan over the
/// buckets (a block scan) is the offsets result (written by block 0). Slot
/// s goes to offsets[bucket] + earlier blocks' + earlier warps' count +
/// rank: the same stable counting sort as stableBuckets (moe.dispatch).
void routing::routeDispatchCluster(LoweringBuilder &b, const RouteConfig &cfg,
                                   const WarpSelectMode &mode, Value m,
                                   Value offsets, Value rev, Value tok,
                                   bool allowDependents) {
  Type i32 = b.getI32Type();
  int64_t e = cfg.e, k = cfg.k, nb = cfg.e + 1;
  constexpr int64_t warps = kClusterRowsPerBlock;
  int64_t perThread = (nb + kClusterThreads - 1) / kClusterThreads;
  Value one = b.idx(1);
  // One block per 8 rows, all of them one cluster (at T <= 8 a plain
  // one-block launch: the runtime launches a 1-CTA cluster so).
  Value blocks = b.maxIdx(b.ceilDiv(cfg.t, warps), one);
  SmallVector<MemRefType> wg = {
      workgroupType({warps, nb}, i32), workgroupType({nb}, i32),
      workgroupType({nb}, i32), workgroupType({nb}, i32),
      workgroupType({warps}, i32)};
  launchInClusters(
      b, blocks, /*clusterX=*/blocks, kClusterThreads,
      /*dynamicSharedBytes=*/Value(), wg,
      [&](LoweringBuilder &b, const KernelIds &ids, ArrayRef<Value> shared) {
        Value counts = shared[0], blockTotals = shared[1],
              earlierBlocks = shared[2], offs = shared[3], warpSums = shared[4];
        Value tid = ids.threadX;
        Value rank = ids.blockX;
        Value w = arith::DivUIOp::create(b, tid, b.idx(kWarpSize));
        Value lane = arith::RemUIOp::create(b, tid, b.idx(kWarpSize));
        Value zero = b.idx(0);
        // The first GEMM may be launched now (it waits for this kernel on the
        // device before it reads anything).
        if (allowDependents)
          nvvm::allowDependents(b);
        // Phase 1: warp w routes row R b + w (a warp-uniform guard).
        Value row = b.add(b.mul(rank, b.idx(warps)), w);
        when(b, b.cmpi(CmpI::ult, row, cfg.t), [&](LoweringBuilder &b) {
          routeRowOnWarp(b, cfg, mode, row, lane);
        });
        forEach(b, lane, b.idx(nb), b.idx(kWarpSize),
                [&](LoweringBuilder &b, Value bk) {
                  b.store(b.i32(0), counts, {w, bk});
                });
        // The block's routed indices are visible to it, its counters zero.
        gpu::BarrierOp::create(b);
        // Phase 2: the block's slots, ranked within their warps.
        Value slot = b.add(b.mul(rank, b.idx(warps * k)), tid);
        Value valid = b.andi(b.cmpi(CmpI::ult, tid, b.idx(warps * k)),
                             b.cmpi(CmpI::ult, slot, m));
        Value bucket = b.ifElse(
            valid, {i32},
            [&](LoweringBuilder &b) -> SmallVector<Value> {
              return {dispatchBucket(b, cfg.indices, slot, k, e)};
            },
            [&](LoweringBuilder &b) -> SmallVector<Value> {
              return {b.i32(-1)};
            })[0];
        Value before, total;
        std::tie(before, total) =
            warpRankOf(b, bucket, b.toI32(lane), mode.matchSync);
        Value placed = b.cmpi(CmpI::sge, bucket, b.i32(0));
        Value last = b.cmpi(CmpI::eq, total, b.add(before, b.i32(1)));
        when(b, b.andi(placed, last), [&](LoweringBuilder &b) {
          b.store(total, counts, {w, b.toIndex(bucket)});
        });
        gpu::BarrierOp::create(b);
        // Thread t's buckets q t .. q t + q - 1: the earlier warps' counts in
        // place, the block's total published.
        auto forMyBuckets =
            [&](LoweringBuilder &b,
                function_ref<void(LoweringBuilder &, int64_t, Value)> body) {
              for (int64_t j = 0; j < perThread; ++j) {
                Value bk = b.add(b.mul(tid, b.idx(perThread)), b.idx(j));
                when(b, b.cmpi(CmpI::ult, bk, b.idx(nb)),
                     [&](LoweringBuilder &b) { body(b, j, bk); });
              }
            };
        forMyBuckets(b, [&](LoweringBuilder &b, int64_t, Value bk) {
          b.store(exclusiveColumnScan(b, counts, warps, bk), blockTotals, {bk});
        });
        // Every block's totals are published (release / acquire at cluster
        // scope).
        nvvm::clusterSync(b);
        // Phase 3: per bucket, the earlier blocks' count and the total.
        Value rankI32 = b.toI32(rank);
        Value totalsBase = nvvm::bufferAddress(b, blockTotals);
        SmallVector<Value> bucketTotals;
        Value mySum = b.i32(0);
        for (int64_t j = 0; j < perThread; ++j) {
          Value bk = b.add(b.mul(tid, b.idx(perThread)), b.idx(j));
          Value in = b.cmpi(CmpI::ult, bk, b.idx(nb));
          Value address = arith::AddIOp::create(
              b, totalsBase,
              nvvm::toI64(b, b.mul(b.minIdx(bk, b.idx(nb - 1)), b.idx(4))));
          Value earlier = b.i32(0), sum = b.i32(0);
          for (int64_t r = 0; r < kClusterBlocks; ++r) {
            // Ranks past the cluster read the last one's and count nothing.
            Value inCluster = b.cmpi(CmpI::ult, b.idx(r), blocks);
            Value peer = b.toI32(b.minIdx(b.idx(r), b.sub(blocks, one)));
            Value v = b.select(inCluster,
                               nvvm::loadSharedClusterI32(b, address, peer),
                               b.i32(0));
            sum = b.add(sum, v);
            earlier =
                b.add(earlier, b.select(b.cmpi(CmpI::slt, b.i32(r), rankI32), v,
                                        b.i32(0)));
          }
          sum = b.select(in, sum, b.i32(0));
          when(b, in, [&](LoweringBuilder &b) {
            b.store(earlier, earlierBlocks, {bk});
          });
          bucketTotals.push_back(sum);
          mySum = b.add(mySum, sum);
        }
        // The exclusive scan of the totals over the buckets: the threads'
        // sums by warp scans, then the earlier warps' sums (lane l < 8 holds
        // warp l's; a butterfly adds those below w).
        Value incl = warpInclusiveSum(b, mySum, lane);
        when(b, b.cmpi(CmpI::eq, lane, b.idx(kWarpSize - 1)),
             [&](LoweringBuilder &b) { b.store(incl, warpSums, {w}); });
        gpu::BarrierOp::create(b);
        Value laneWarp = b.minIdx(lane, b.idx(warps - 1));
        Value earlierWarps = b.select(b.cmpi(CmpI::ult, lane, w),
                                      b.load(warpSums, {laneWarp}), b.i32(0));
        Value base = warpAllReduce(b, {earlierWarps},
                                   [](LoweringBuilder &b, ValueRange x,
                                      ValueRange y) -> SmallVector<Value> {
                                     return {b.add(x[0], y[0])};
                                   })[0];
        Value running = b.add(base, b.sub(incl, mySum));
        Value isFirst = b.cmpi(CmpI::eq, rank, zero);
        forMyBuckets(b, [&](LoweringBuilder &b, int64_t j, Value bk) {
          Value start = running;
          for (int64_t i = 0; i < j; ++i)
            start = b.add(start, bucketTotals[i]);
          b.store(start, offs, {bk});
          when(b, isFirst,
               [&](LoweringBuilder &b) { b.store(start, offsets, {bk}); });
        });
        gpu::BarrierOp::create(b);
        // Phase 4: placement.
        when(b, placed, [&](LoweringBuilder &b) {
          Value bk = b.toIndex(bucket);
          Value pos =
              b.add(b.add(b.load(offs, {bk}), b.load(earlierBlocks, {bk})),
                    b.add(b.load(counts, {w, bk}), before));
          Value p = b.toIndex(pos);
          auto [slotRow, j] = rowAndSlot(b, slot, k);
          (void)j;
          b.store(b.toI32(slot), rev, {p});
          b.store(b.toI32(slotRow), tok, {p});
        });
        // No block leaves while a peer may still read its totals.
        nvvm::clusterSync(b);
      });
}
