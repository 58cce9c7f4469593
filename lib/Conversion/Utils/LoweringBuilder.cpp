//===- LoweringBuilder.cpp - helpers shared by the moe lowerings ----------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "LoweringBuilder.h"

using namespace mlir;
using namespace mlir::moe;

Value LoweringBuilder::scalar(Type type, double value) {
  if (auto floatType = dyn_cast<FloatType>(type)) {
    APFloat v(value);
    bool losesInfo = false;
    v.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
              &losesInfo);
    return arith::ConstantFloatOp::create(*this, floatType, v);
  }
  if (type.isIndex())
    return idx(static_cast<int64_t>(value));
  return arith::ConstantIntOp::create(*this, type, static_cast<int64_t>(value));
}

SmallVector<Value> mlir::moe::dynRows(RankedTensorType type, Value rows) {
  SmallVector<Value> dyn;
  if (type.isDynamicDim(0))
    dyn.push_back(rows);
  return dyn;
}

SmallVector<Value> LoweringBuilder::dynRowsOf(RankedTensorType type,
                                              Value tensor, int64_t d) {
  if (!type.isDynamicDim(0))
    return {};
  return {dim(tensor, d)};
}

Value LoweringBuilder::dim(Value tensor, int64_t d) {
  auto type = cast<RankedTensorType>(tensor.getType());
  if (!type.isDynamicDim(d))
    return idx(type.getDimSize(d));
  return tensor::DimOp::create(*this, tensor, d);
}

Value LoweringBuilder::memDim(Value memref, int64_t d) {
  auto type = cast<MemRefType>(memref.getType());
  if (!type.isDynamicDim(d))
    return idx(type.getDimSize(d));
  return memref::DimOp::create(*this, memref, d);
}

SmallVector<OpFoldResult> LoweringBuilder::sizes(Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  SmallVector<OpFoldResult> result;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (type.isDynamicDim(d))
      result.push_back(dim(tensor, d));
    else
      result.push_back(getIndexAttr(type.getDimSize(d)));
  }
  return result;
}

Value LoweringBuilder::empty(RankedTensorType type, ValueRange dynSizes) {
  return tensor::EmptyOp::create(*this, type.getShape(), type.getElementType(),
                                 dynSizes);
}

Value LoweringBuilder::filled(RankedTensorType type, ValueRange dynSizes,
                              Value value) {
  Value init = empty(type, dynSizes);
  return linalg::FillOp::create(*this, value, init).getResult(0);
}

Value LoweringBuilder::toIndex(Value intValue) {
  return arith::IndexCastOp::create(*this, getIndexType(), intValue);
}

Value LoweringBuilder::toI32(Value indexValue) {
  return arith::IndexCastOp::create(*this, getI32Type(), indexValue);
}

Value LoweringBuilder::toF32(Value v) {
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(*this, getF32Type(), v);
}

Value LoweringBuilder::fromF32(Value v, Type type) {
  if (type == v.getType())
    return v;
  return arith::TruncFOp::create(*this, type, v);
}

Value LoweringBuilder::add(Value a, Value b) {
  if (isa<FloatType>(a.getType()))
    return arith::AddFOp::create(*this, a, b);
  return arith::AddIOp::create(*this, a, b);
}

Value LoweringBuilder::sub(Value a, Value b) {
  if (isa<FloatType>(a.getType()))
    return arith::SubFOp::create(*this, a, b);
  return arith::SubIOp::create(*this, a, b);
}

Value LoweringBuilder::mul(Value a, Value b) {
  if (isa<FloatType>(a.getType()))
    return arith::MulFOp::create(*this, a, b);
  return arith::MulIOp::create(*this, a, b);
}

Value LoweringBuilder::div(Value a, Value b) {
  if (isa<FloatType>(a.getType()))
    return arith::DivFOp::create(*this, a, b);
  return arith::DivSIOp::create(*this, a, b);
}

Value LoweringBuilder::inRange(Value v, Value lo, Value hi) {
  return andi(cmpi(arith::CmpIPredicate::sge, v, lo),
              cmpi(arith::CmpIPredicate::slt, v, hi));
}

Value LoweringBuilder::clamp(Value v, Value lo, Value hi) {
  Value atLeastLo = arith::MaxSIOp::create(*this, v, lo);
  return arith::MinSIOp::create(*this, atLeastLo, hi);
}

SmallVector<Value> LoweringBuilder::forLoop(Value lb, Value ub, Value step,
                                            ValueRange init, LoopBody body) {
  auto loop = scf::ForOp::create(
      *this, lb, ub, step, init,
      [&](OpBuilder &nested, Location loc, Value iv, ValueRange args) {
        LoweringBuilder b(loc, nested);
        SmallVector<Value> next = body(b, iv, args);
        scf::YieldOp::create(b, next);
      });
  return SmallVector<Value>(loop.getResults());
}

SmallVector<Value> LoweringBuilder::forEachSlot(Value ids, ValueRange init,
                                                SlotBody body) {
  int64_t k = cast<RankedTensorType>(ids.getType()).getDimSize(1);
  return forLoop(idx(0), dim(ids, 0), init,
                 [&](LoweringBuilder &b, Value row, ValueRange acc) {
                   return b.forLoop(
                       b.idx(0), b.idx(k), acc,
                       [&](LoweringBuilder &b, Value j, ValueRange acc) {
                         Value expert = b.extract(ids, {row, j});
                         return body(b, row, j, expert, acc);
                       });
                 });
}

SmallVector<Value> LoweringBuilder::forEachExpertSlot(Value ids, int64_t e,
                                                      ValueRange init,
                                                      SlotBody body) {
  return forEachSlot(ids, init,
                     [&](LoweringBuilder &b, Value row, Value j, Value expert,
                         ValueRange acc) {
                       Value valid = b.inRange(expert, b.i32(0), b.i32(e));
                       return b.ifThen(valid, acc, [&](LoweringBuilder &b) {
                         return body(b, row, j, expert, acc);
                       });
                     });
}

SmallVector<Value> LoweringBuilder::ifElse(Value cond, TypeRange types,
                                           Branch thenBranch,
                                           Branch elseBranch) {
  // Result types are inferred from the then-branch's yield.
  auto ifOp = scf::IfOp::create(
      *this, cond,
      [&](OpBuilder &nested, Location loc) {
        LoweringBuilder b(loc, nested);
        scf::YieldOp::create(b, thenBranch(b));
      },
      [&](OpBuilder &nested, Location loc) {
        LoweringBuilder b(loc, nested);
        scf::YieldOp::create(b, elseBranch(b));
      });
  assert(TypeRange(ifOp.getResultTypes()) == types && "branch types differ");
  (void)types;
  return SmallVector<Value>(ifOp.getResults());
}

SmallVector<Value> LoweringBuilder::ifThen(Value cond, ValueRange values,
                                           Branch thenBranch) {
  SmallVector<Value> current(values);
  return ifElse(cond, ValueRange(values).getTypes(), thenBranch,
                [&](LoweringBuilder &) { return current; });
}

Value LoweringBuilder::convertElements(Value tensor, Type type) {
  auto srcType = cast<RankedTensorType>(tensor.getType());
  if (srcType.getElementType() == type)
    return tensor;
  auto dstType = srcType.clone(type);
  SmallVector<Value> dyn;
  for (int64_t d = 0; d < srcType.getRank(); ++d)
    if (srcType.isDynamicDim(d))
      dyn.push_back(dim(tensor, d));
  Value init = empty(dstType, dyn);
  AffineMap id = getMultiDimIdentityMap(srcType.getRank());
  auto generic = linalg::GenericOp::create(
      *this, TypeRange{dstType}, ValueRange{tensor}, ValueRange{init},
      ArrayRef<AffineMap>{id, id}, parallel(srcType.getRank()),
      [&](OpBuilder &nested, Location loc, ValueRange args) {
        LoweringBuilder b(loc, nested);
        Value v = b.fromF32(b.toF32(args[0]), type);
        linalg::YieldOp::create(b, v);
      });
  return generic.getResult(0);
}
