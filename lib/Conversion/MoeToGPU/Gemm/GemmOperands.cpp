//===- GemmOperands.cpp - buffers and facts of one expert GEMM ------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

#include "Utils/LowPrecision.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

Value GemmOperands::gemmColumn(LoweringBuilder &b, int64_t a, Value c) const {
  if (!glu)
    return c;
  if (glu->layout == GluLayout::concat)
    return a == 0 ? c : b.add(c, b.idx(outN));
  Value twice = b.mul(c, b.idx(2));
  return a == 0 ? twice : b.add(twice, b.idx(1));
}

Value GemmOperands::lhsValue(LoweringBuilder &b, Value row, Value k) const {
  if (!lhsScale)
    return b.toF32(b.load(lhs, {row, k}));
  Value code = decodeE4M3(b, b.load(lhs, {row, k}));
  Value group = arith::DivUIOp::create(b, k, b.idx(128));
  return b.mul(code, b.load(lhsScale, {row, group}));
}

Value GemmOperands::rhsValue(LoweringBuilder &b, Value expert, Value col,
                             Value k) const {
  if (fp8()) {
    Value w = decodeE4M3(b, b.load(rhs, {expert, col, k}));
    Value nb = arith::DivUIOp::create(b, col, b.idx(128));
    Value kb = arith::DivUIOp::create(b, k, b.idx(128));
    return b.mul(w, b.load(rhsScale, {expert, nb, kb}));
  }
  if (mxfp4()) {
    Value block = arith::DivUIOp::create(b, k, b.idx(32));
    Value code;
    if (format == WeightFormat::mxfp4_hopper) {
      // The block word that holds the value (e2m1HopperCode).
      Value kk = arith::RemUIOp::create(b, k, b.idx(32));
      Value first = b.add(b.mul(block, b.idx(16)), e2m1HopperWordOffset(b, kk));
      Value word = littleEndianWord(b, [&](int64_t t) {
        return b.load(rhs, {expert, col, b.add(first, b.idx(t))});
      });
      code = e2m1HopperCode(b, word, kk);
    } else {
      Value byte =
          b.load(rhs, {expert, col, arith::ShRUIOp::create(b, k, b.idx(1))});
      Value odd =
          b.cmpi(arith::CmpIPredicate::ne,
                 b.toI32(arith::AndIOp::create(b, k, b.idx(1))), b.i32(0));
      code = e2m1Code(b, byte, odd);
    }
    return b.mul(decodeE2M1(b, code),
                 decodeE8M0(b, b.load(rhsScale, {expert, col, block})));
  }
  SmallVector<Value> at = transposed ? SmallVector<Value>{expert, col, k}
                                     : SmallVector<Value>{expert, k, col};
  return b.toF32(b.load(rhs, at));
}

GemmOperands gpu_lowering::gemmOperandsOf(LoweringBuilder &b, ExpertGemmOp op) {
  GemmOperands g;
  auto resultType = op.getResult().getType();
  g.outElem = resultType.getElementType();
  g.inElem = op.getLhs().getType().getElementType();
  g.transposed = op.getTransposeRhs();
  auto rhsType = op.getRhs().getType();
  g.numExperts = rhsType.getDimSize(0);
  g.kDim = op.getLhs().getType().getDimSize(1);
  g.outN = resultType.getDimSize(1);
  g.gemmN = rhsType.getDimSize(g.transposed ? 1 : 2);
  if (op.hasGluEpilogue())
    g.glu = gluParamsOf(op);
  g.format = op.getFormat();
  g.ue8m0 = op.getScaleFmt() == ScaleFmt::ue8m0;
  if (op.getRhsScale())
    g.rhsScale = toBuffer(b, op.getRhsScale());
  g.lhs = toBuffer(b, op.getLhs());
  g.rhs = toBuffer(b, op.getRhs());
  g.offsets = toBuffer(b, op.getOffsets());
  if (op.getGather())
    g.gather = toBuffer(b, op.getGather());
  if (op.getBias())
    g.bias = toBuffer(b, op.getBias());
  if (op.getScatter())
    g.scatter = toBuffer(b, op.getScatter());
  if (op.getScale())
    g.scale = toBuffer(b, op.getScale());
  g.m = g.gather ? b.memDim(g.gather, 0) : b.memDim(g.lhs, 0);
  g.lhsRows = b.memDim(g.lhs, 0);
  g.out = allocBuffer(b, resultType, dynRows(resultType, g.m));
  return g;
}
