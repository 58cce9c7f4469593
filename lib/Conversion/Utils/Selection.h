//===- Selection.h - the top-k selection order shared by the lowerings -*- C++
//-*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The routing ops' total order: larger value first, lower index on
// ties, NaN below every number (NaNs among themselves by index). k
// selection passes over a row each pick the best entry ranking strictly
// after the previous pick, so no "taken" mask is needed. Used by the CPU
// (tensor) and GPU (memref) lowerings alike: the callbacks decide where
// values come from and where picks go.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_LIB_CONVERSION_UTILS_SELECTION_H
#define MOE_MLIR_LIB_CONVERSION_UTILS_SELECTION_H

#include "LoweringBuilder.h"

#include <functional>

namespace mlir {
namespace moe {

/// (va, ia) ranks before (vb, ib) in the routing order.
Value precedes(LoweringBuilder &b, Value va, Value ia, Value vb, Value ib);

using ValueAtFn = function_ref<Value(LoweringBuilder &, Value /*e, index*/)>;
using AllowedFn = function_ref<Value(LoweringBuilder &, Value /*e, index*/)>;
using EmitSlotFn =
    function_ref<SmallVector<Value>(LoweringBuilder &, Value /*j, index*/,
                                    Value /*e, i32*/, ValueRange /*state*/)>;

/// Runs the k selection passes over entries [0, numEntries) of one row.
/// `valueAt` gives an entry's f32 key, `allowed` (optional) excludes
/// entries. For each slot j, `emit` receives the chosen entry and threads
/// `state` (e.g. output tensors; empty when emit stores to buffers).
/// Returns the final state.
SmallVector<Value> selectTopK(LoweringBuilder &b, int64_t k, int64_t numEntries,
                              ValueRange state, ValueAtFn valueAt,
                              AllowedFn allowed, EmitSlotFn emit);

/// moe.route's routing scores of one row of `numExperts` logits. Built once
/// per row (for softmax: the row max and the sum of exponentials, two
/// passes over `rawLogitAt`), then `score(col)` is the unbiased score of
/// expert `col`: softmax or sigmoid of the sanitised logit (NaN -> -inf,
/// +inf -> largest finite), and 0 for every expert of an all -inf softmax
/// row. The object keeps a copy of `rawLogitAt`.
class RoutingScores {
public:
  using RawLogitFn = std::function<Value(LoweringBuilder &, Value)>;
  RoutingScores(LoweringBuilder &b, int64_t numExperts, bool softmax,
                RawLogitFn rawLogitAt);
  /// The sanitised f32 logit of expert `col`.
  Value logit(LoweringBuilder &b, Value col) const;
  /// The unbiased f32 score of expert `col`.
  Value score(LoweringBuilder &b, Value col) const;

private:
  RawLogitFn rawLogitAt;
  bool softmax;
  Value negInf, maxFinite, rowMax, rowSum;
};

/// Score of the `perGroup` experts starting at `first` for group-limited
/// routing: the largest key, or the sum of the two largest (`top2`).
Value groupScore(LoweringBuilder &b, Value first, int64_t perGroup, bool top2,
                 ValueAtFn keyAt);

/// Whether group `g` (of `nGroup`, score `scoreOf(g)`) is kept: fewer than
/// `topkGroup` groups rank before it by (group score, group index). i1.
Value groupKept(LoweringBuilder &b, int64_t nGroup, int64_t topkGroup, Value g,
                ValueAtFn scoreOf);

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_LIB_CONVERSION_UTILS_SELECTION_H
