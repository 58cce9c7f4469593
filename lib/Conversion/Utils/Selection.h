//===- Selection.h - the top-k selection order shared by the lowerings -*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// SPEC.md's total order for routing: larger value first, lower index on
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

namespace mlir {
namespace moe {

/// (va, ia) ranks before (vb, ib) in the routing order.
Value precedes(LoweringBuilder &b, Value va, Value ia, Value vb, Value ib);

using ValueAtFn = function_ref<Value(LoweringBuilder &, Value /*e, index*/)>;
using AllowedFn = function_ref<Value(LoweringBuilder &, Value /*e, index*/)>;
using EmitSlotFn = function_ref<SmallVector<Value>(
    LoweringBuilder &, Value /*j, index*/, Value /*e, i32*/,
    ValueRange /*state*/)>;

/// Runs the k selection passes over entries [0, numEntries) of one row.
/// `valueAt` gives an entry's f32 key, `allowed` (optional) excludes
/// entries. For each slot j, `emit` receives the chosen entry and threads
/// `state` (e.g. output tensors; empty when emit stores to buffers).
/// Returns the final state.
SmallVector<Value> selectTopK(LoweringBuilder &b, int64_t k,
                              int64_t numEntries, ValueRange state,
                              ValueAtFn valueAt, AllowedFn allowed,
                              EmitSlotFn emit);

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_LIB_CONVERSION_UTILS_SELECTION_H
