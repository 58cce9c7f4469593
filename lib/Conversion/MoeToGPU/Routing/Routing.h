//===- Routing.h - the routing kernels' parts -------------------*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// moe.topk, moe.route and moe.route_dispatch become the kernels built here;
// the patterns that choose between them are in ../RoutingToGPU.cpp.
//
//   WarpSelect.cpp          one row across a warp (lane l holds entries
//                           l * R .. l * R + R - 1 in registers) and its k
//                           picks as warp-wide argmaxes of i32 selection
//                           keys
//   TopK.cpp                moe.topk: one thread per row (large E), or one
//                           warp per row
//   Route.cpp               moe.route: scores, group-limited routing, the
//                           picks' normalised weights; one thread per row
//                           (large E / n_group), or one warp per row
//   RouteDispatchSmall.cpp  moe.route_dispatch with few rows as one kernel
//                           in a thread-block cluster (route-dispatch-small)
//
// Every kernel picks exactly what Selection.h's `selectTopK` picks and
// scores with the f32 operations of its RoutingScores / groupScore /
// groupKept, so the warp-per-row kernels' results are bit-identical to the
// one-thread-per-row kernels'.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_LIB_CONVERSION_MOETOGPU_ROUTING_ROUTING_H
#define MOE_MLIR_LIB_CONVERSION_MOETOGPU_ROUTING_ROUTING_H

#include "MoeToGPU/KernelBuilder.h"

namespace mlir {
namespace moe {
namespace gpu_lowering {
namespace routing {

//===----------------------------------------------------------------------===//
// One row across a warp (WarpSelect.cpp)
//===----------------------------------------------------------------------===//

/// Largest row length (E) and group count of the one-warp-per-row kernels
/// (E / 32 entries per lane live in registers; every lane evaluates the
/// n_group^2 group ranking).
constexpr int64_t kMaxWarpRowEntries = 512;
constexpr int64_t kMaxWarpGroups = 32;

/// Whether a row of `e` entries in `nGroup` groups takes the one-warp-per-row
/// kernels.
inline bool useWarpPerRow(int64_t e, int64_t nGroup) {
  return e <= kMaxWarpRowEntries && nGroup <= kMaxWarpGroups;
}

/// An unsigned i32 whose integer order is the order of f32 values in
/// `precedes`: larger value -> larger key, -0 and +0 the same key (OEQ),
/// NaN 0, below every number (-inf is 0x007fffff).
Value orderKey(LoweringBuilder &b, Value v);

/// How the warp-per-row kernels select: i32 order keys, the lanes' best
/// (their sorted heads when a lane holds at most kSortedSelectRegs
/// entries, WarpSelect.cpp), redux.sync umax / umin (a butterfly before
/// sm_80) and the pick leaving the candidates (bench/NOTES.md v22).
struct WarpSelectMode {
  bool redux = false;
  /// match.any.sync for the slot ranks (sm_70 and later).
  bool matchSync = false;
  /// The selection key of value `v` (0: not selectable).
  Value key(LoweringBuilder &b, Value v) const;
  Value none(LoweringBuilder &b) const { return b.i32(0); }
};

/// A row of `numEntries` spread over a warp: lane l holds the consecutive
/// entries l * R + r, r < R = ceil(numEntries / 32), in registers (so the
/// row in index order is lane-major, which the in-order softmax sum uses).
struct WarpRow {
  int64_t numEntries;
  Value lane; // index

  int64_t regs() const { return (numEntries + kWarpSize - 1) / kWarpSize; }
  /// Every lane's entry of register r is < numEntries.
  bool full() const { return regs() * kWarpSize == numEntries; }
  Value entry(LoweringBuilder &b, int64_t r) const {
    return b.add(b.mul(lane, b.idx(regs())), b.idx(r));
  }
  /// entry < numEntries (i1).
  Value valid(LoweringBuilder &b, int64_t r) const {
    if (full())
      return b.i1(true);
    return b.cmpi(arith::CmpIPredicate::ult, entry(b, r), b.idx(numEntries));
  }
  /// The entry clamped into the row: always a legal column.
  Value column(LoweringBuilder &b, int64_t r) const {
    if (full())
      return entry(b, r);
    return b.minIdx(entry(b, r), b.idx(numEntries - 1));
  }
  /// The lane holding entry `e` (i32).
  Value owner(LoweringBuilder &b, Value e) const {
    return arith::DivUIOp::create(b, e, b.i32(regs()));
  }
};

/// Result of warpSelect: for q < ceil(k / 32), lane l holds slot q * 32 + l
/// (when < k): its pick and, when scores were given, the pick's score.
struct WarpPicks {
  SmallVector<Value> picks, scores;
  Value scoreSum; // sum of the k picks' scores in slot order (when asked)
};

/// The k picks of a row (warpSelectSorted or warpSelect, WarpSelect.cpp).
WarpPicks warpSelectWith(LoweringBuilder &b, const WarpSelectMode &mode,
                         const WarpRow &row, int64_t k, ArrayRef<Value> keys,
                         ArrayRef<Value> scores, bool sumScores);

/// Visits the slots a lane holds after warpSelect: body(j, q) for
/// j = q * 32 + lane < k.
void forEachLaneSlot(
    LoweringBuilder &b, const WarpRow &row, int64_t k,
    function_ref<void(LoweringBuilder &, Value, int64_t)> body);

//===----------------------------------------------------------------------===//
// moe.topk (TopK.cpp)
//===----------------------------------------------------------------------===//

/// One thread per row: the k selection passes of `selectTopK`.
void topkPerThread(LoweringBuilder &b, int64_t k, int64_t e, Value input,
                   Value t, Value values, Value indices);

/// One warp per row (useWarpPerRow): warpSelectWith.
void topkPerWarp(LoweringBuilder &b, int64_t k, int64_t e, Value input, Value t,
                 Value values, Value indices, const WarpSelectMode &mode);

//===----------------------------------------------------------------------===//
// moe.route (Route.cpp)
//===----------------------------------------------------------------------===//

/// What the route kernels need of a moe.route.
struct RouteConfig {
  int64_t e, k, nGroup, topkGroup, perGroup;
  bool softmax, top2, normalize;
  float scaling;
  Type w;
  Value logits, bias, t, weights, indices;
};

/// One thread per row: the k selection passes of `selectTopK` over the row
/// (O(k * E) per row), the group mask in a T x n_group scratch buffer.
void routePerThread(LoweringBuilder &b, const RouteConfig &cfg);

/// The softmax row sum of a warp's exponentials (lane l holds entries
/// l * R + r), added in expert order: (..((0 + e_0) + e_1) ..).
using OrderedSumFn =
    function_ref<Value(LoweringBuilder &, ArrayRef<Value> exps)>;

/// Routes row `rowIdx` on the calling warp (all 32 lanes, `lane` = lane
/// id): weights and indices into cfg.weights / cfg.indices, stored only
/// where `rowValid` (null: always). `orderedSum` (null: the lanes hand
/// the running sum on, 32 shuffles) adds the softmax exponentials.
void routeRowOnWarp(LoweringBuilder &b, const RouteConfig &cfg,
                    const WarpSelectMode &mode, Value rowIdx, Value lane,
                    Value rowValid = nullptr,
                    OrderedSumFn orderedSum = nullptr);

/// One warp per row (useWarpPerRow); with softmax and E <= 128, blocks of
/// 16 rows whose softmax row sums are added in shared memory.
void routePerWarp(LoweringBuilder &b, const RouteConfig &cfg,
                  const WarpSelectMode &mode);

//===----------------------------------------------------------------------===//
// moe.route_dispatch at small T (RouteDispatchSmall.cpp)
//===----------------------------------------------------------------------===//

/// route_dispatch in one launch of up to kClusterBlocks blocks forming one
/// thread-block cluster, for T <= kClusterRows, k <= kClusterMaxK and E <=
/// kClusterMaxExperts (bucket counters in shared memory): block
/// b (= its cluster rank) routes rows [8 b, 8 b + 8), one per warp, and
/// ranks their slots; the blocks' bucket counts meet through distributed
/// shared memory after a cluster barrier, so no block passes over all rows
/// and no counter needs zeroing.
constexpr int64_t kClusterBlocks = 8, kClusterThreads = 256;
constexpr int64_t kClusterRowsPerBlock = kClusterThreads / kWarpSize;
constexpr int64_t kClusterRows = kClusterBlocks * kClusterRowsPerBlock;
constexpr int64_t kClusterMaxK = kClusterThreads / kClusterRowsPerBlock;
constexpr int64_t kClusterMaxExperts = 256;

/// The cluster kernel: routes the rows, then places their slots (offsets,
/// reverse indices `rev`, token indices `tok`) for the M = T * k slots `m`.
/// With `allowDependents`, the next kernel may launch early.
void routeDispatchCluster(LoweringBuilder &b, const RouteConfig &cfg,
                          const WarpSelectMode &mode, Value m, Value offsets,
                          Value rev, Value tok, bool allowDependents);

} // namespace routing
} // namespace gpu_lowering
} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_LIB_CONVERSION_MOETOGPU_ROUTING_ROUTING_H
