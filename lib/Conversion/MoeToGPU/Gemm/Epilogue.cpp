//===- Epilogue.cpp - bias, GLU, scale and scatter of GEMM outputs --------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Per output element: x_a = acc_a + bias[e, gemmColumn(a, c)] (a = gate/up
// with GLU), y = glu(x_0, x_1) or x_0, y *= scale[dest], stored to
// out[dest, c] with dest = scatter[row] (or row); destinations outside
// [0, m) are dropped. Both engines call this on their accumulator layout.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

RowTarget gpu_lowering::rowTarget(LoweringBuilder &b, const GemmOperands &g,
                                  Value row, bool withFactor) {
  Value dest = g.scatter ? b.load(g.scatter, {row}) : b.toI32(row);
  RowTarget t;
  t.valid = b.inRange(dest, b.i32(0), b.toI32(g.m));
  // Clamped so that the factor's load is in bounds even for a dropped row.
  t.dest = b.toIndex(b.select(t.valid, dest, b.i32(0)));
  if (g.scale && withFactor)
    t.factor = b.toF32(b.load(g.scale, {t.dest}));
  return t;
}

Value gpu_lowering::outputValue(LoweringBuilder &b, const GemmOperands &g,
                                Value factor, Value expert, Value c,
                                ArrayRef<Value> acc) {
  SmallVector<Value> v;
  for (auto [a, accValue] : llvm::enumerate(acc)) {
    Value x = accValue;
    if (g.bias)
      x = b.add(x, b.toF32(b.load(g.bias, {expert, g.gemmColumn(b, a, c)})));
    v.push_back(x);
  }
  Value y =
      g.glu ? gluValue(b, *g.glu, v[0], v[1], /*approximate=*/true) : v[0];
  if (factor)
    y = b.mul(y, factor);
  return b.fromF32(y, g.outElem);
}

void gpu_lowering::storeOutput(LoweringBuilder &b, const GemmOperands &g,
                               const RowTarget &target, Value expert, Value c,
                               ArrayRef<Value> acc) {
  b.store(outputValue(b, g, target.factor, expert, c, acc), g.out,
          {target.dest, c});
}
