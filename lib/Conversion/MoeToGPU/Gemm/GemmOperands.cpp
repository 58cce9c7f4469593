//===- GemmOperands.cpp - buffers and facts of one expert GEMM ------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

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
