//===- LoweringBuilder.h - helpers shared by the moe lowerings --*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// A location-carrying builder with the handful of idioms every moe lowering
// needs: constants, dims, filled tensors, f32 casts, guarded element access,
// and scf.for / scf.if with tensor-carrying results. Keeps the per-family
// lowering files about the algorithm rather than the builder plumbing.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_LIB_CONVERSION_UTILS_LOWERINGBUILDER_H
#define MOE_MLIR_LIB_CONVERSION_UTILS_LOWERINGBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir {
namespace moe {

/// Dynamic sizes of `type` when its dim 0 is `rows` (only dim 0 may be
/// dynamic in the moe ops): {rows} or {}.
SmallVector<Value> dynRows(RankedTensorType type, Value rows);

class LoweringBuilder : public ImplicitLocOpBuilder {
public:
  LoweringBuilder(Location loc, const OpBuilder &builder)
      : ImplicitLocOpBuilder(loc, builder) {}

  // Constants.
  Value idx(int64_t v) { return arith::ConstantIndexOp::create(*this, v); }
  Value i32(int64_t v) {
    return arith::ConstantIntOp::create(*this, getI32Type(), v);
  }
  Value i1(bool v) {
    return arith::ConstantIntOp::create(*this, getI1Type(), v);
  }
  Value f32(double v) {
    return arith::ConstantFloatOp::create(*this, getF32Type(),
                                          APFloat(static_cast<float>(v)));
  }
  /// A zero (or `value`) of any int/float type.
  Value scalar(Type type, double value = 0.0);

  /// Size of dimension `d` of a ranked tensor, as an index value.
  Value dim(Value tensor, int64_t d);
  /// Sizes of all dims of `tensor` as OpFoldResults (static where known).
  SmallVector<OpFoldResult> sizes(Value tensor);

  /// The dynamic sizes of a result of `type` whose dim 0 (the only dim the
  /// moe ops leave dynamic) is dim `d` of `tensor`; the tensor.dim is built
  /// only when that dim is dynamic.
  SmallVector<Value> dynRowsOf(RankedTensorType type, Value tensor,
                               int64_t d = 0);

  /// tensor.empty of `type` whose dynamic dims take `dynSizes` (index).
  Value empty(RankedTensorType type, ValueRange dynSizes);
  /// `type`-shaped tensor filled with `value` (linalg.fill).
  Value filled(RankedTensorType type, ValueRange dynSizes, Value value);

  // Casts.
  Value toIndex(Value intValue);
  Value toI32(Value indexValue);
  /// Extends f16/bf16 to f32 (f32 unchanged).
  Value toF32(Value v);
  /// Rounds an f32 to `type` (f32 unchanged, f64 not expected).
  Value fromF32(Value v, Type type);

  // Arithmetic shorthands.
  Value add(Value a, Value b);
  Value sub(Value a, Value b);
  Value mul(Value a, Value b);
  Value div(Value a, Value b);
  Value select(Value c, Value a, Value b) {
    return arith::SelectOp::create(*this, c, a, b);
  }
  Value cmpi(arith::CmpIPredicate p, Value a, Value b) {
    return arith::CmpIOp::create(*this, p, a, b);
  }
  Value cmpf(arith::CmpFPredicate p, Value a, Value b) {
    return arith::CmpFOp::create(*this, p, a, b);
  }
  Value andi(Value a, Value b) { return arith::AndIOp::create(*this, a, b); }
  Value ori(Value a, Value b) { return arith::OrIOp::create(*this, a, b); }
  Value noti(Value a) { return arith::XOrIOp::create(*this, a, i1(true)); }
  /// lo <= v < hi for signed integers of the same type.
  Value inRange(Value v, Value lo, Value hi);
  /// Clamps a signed integer into [lo, hi].
  Value clamp(Value v, Value lo, Value hi);

  Value extract(Value tensor, ValueRange indices) {
    return tensor::ExtractOp::create(*this, tensor, indices);
  }
  Value insert(Value scalar, Value tensor, ValueRange indices) {
    return tensor::InsertOp::create(*this, scalar, tensor, indices);
  }

  // Buffers (the GPU lowering works on memrefs inside kernels).
  Value load(Value memref, ValueRange indices) {
    return memref::LoadOp::create(*this, memref, indices);
  }
  void store(Value value, Value memref, ValueRange indices) {
    memref::StoreOp::create(*this, value, memref, indices);
  }
  /// Size of dimension `d` of a ranked memref, as an index value.
  Value memDim(Value memref, int64_t d);
  Value ceilDiv(Value a, int64_t b) {
    return arith::CeilDivUIOp::create(*this, a, idx(b));
  }
  Value minIdx(Value a, Value b) { return arith::MinUIOp::create(*this, a, b); }
  Value maxIdx(Value a, Value b) { return arith::MaxUIOp::create(*this, a, b); }

  /// Elementwise conversion of a float tensor to element type `type`
  /// (linalg.generic with extf/truncf); returns `tensor` when equal.
  Value convertElements(Value tensor, Type type);

  /// Identity indexing maps and all-parallel iterators for rank `rank`.
  SmallVector<utils::IteratorType> parallel(int64_t rank) {
    return SmallVector<utils::IteratorType>(rank,
                                            utils::IteratorType::parallel);
  }

  using LoopBody = function_ref<SmallVector<Value>(LoweringBuilder &, Value iv,
                                                   ValueRange iterArgs)>;
  /// for iv in [lb, ub) step 1 carrying `init`; returns the final values.
  SmallVector<Value> forLoop(Value lb, Value ub, ValueRange init,
                             LoopBody body) {
    return forLoop(lb, ub, idx(1), init, body);
  }
  /// for iv in [lb, ub) step `step` carrying `init`.
  SmallVector<Value> forLoop(Value lb, Value ub, Value step, ValueRange init,
                             LoopBody body);

  using SlotBody = function_ref<SmallVector<Value>(
      LoweringBuilder &, Value row, Value j, Value expert, ValueRange acc)>;
  /// Visits every (row, slot) of a `T x k` id tensor in row-major order,
  /// with `expert = ids[row][j]` (i32), carrying `init`.
  SmallVector<Value> forEachSlot(Value ids, ValueRange init, SlotBody body);
  /// forEachSlot over the slots whose expert id lies in [0, e) (the
  /// dispatched ones); the other slots leave the carried values unchanged.
  SmallVector<Value> forEachExpertSlot(Value ids, int64_t e, ValueRange init,
                                       SlotBody body);

  using Branch = function_ref<SmallVector<Value>(LoweringBuilder &)>;
  /// scf.if yielding values of `types` from both branches.
  SmallVector<Value> ifElse(Value cond, TypeRange types, Branch thenBranch,
                            Branch elseBranch);
  /// scf.if that updates `values` only when `cond` holds.
  SmallVector<Value> ifThen(Value cond, ValueRange values, Branch thenBranch);
};

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_LIB_CONVERSION_UTILS_LOWERINGBUILDER_H
