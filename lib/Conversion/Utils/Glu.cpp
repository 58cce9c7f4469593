//===- Glu.cpp - the gated activation shared by the lowerings -------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Glu.h"

#include <cmath>

using namespace mlir;
using namespace mlir::moe;

GluParams mlir::moe::gluParamsOf(GluOp op) {
  std::optional<float> limit;
  if (auto l = op.getLimit())
    limit = l->convertToFloat();
  return GluParams{op.getActivation(), op.getLayout(),
                   op.getAlpha().convertToFloat(), limit,
                   op.getUpBias().convertToFloat()};
}

GluParams mlir::moe::gluParamsOf(ExpertGemmOp op) {
  std::optional<float> limit;
  if (auto l = op.getLimit())
    limit = l->convertToFloat();
  return GluParams{*op.getActivation(), *op.getLayout(),
                   op.getAlpha().convertToFloat(), limit,
                   op.getUpBias().convertToFloat()};
}

Value mlir::moe::applyActivation(LoweringBuilder &b, Activation activation,
                                 float alpha, Value x, bool approximate) {
  switch (activation) {
  case Activation::silu: {
    // x / (1 + exp(-alpha x)); approximate: the hardware exp2 and divide
    // (`afn`: __nv_fast_expf, div.approx.f32 on NVPTX), ~2 ulp of f32.
    auto fm =
        approximate ? arith::FastMathFlags::afn : arith::FastMathFlags::none;
    Value ax = b.mul(b.f32(alpha), x);
    Value e = math::ExpOp::create(b, arith::NegFOp::create(b, ax), fm);
    return arith::DivFOp::create(b, x, b.add(b.f32(1.0), e), fm);
  }
  case Activation::gelu: {
    Value erf = math::ErfOp::create(b, b.mul(x, b.f32(M_SQRT1_2)));
    return b.mul(b.mul(b.f32(0.5), x), b.add(b.f32(1.0), erf));
  }
  case Activation::gelu_tanh: {
    Value x3 = b.mul(b.mul(x, x), x);
    Value inner = b.mul(b.f32(std::sqrt(2.0 / M_PI)),
                        b.add(x, b.mul(b.f32(0.044715), x3)));
    Value th = math::TanhOp::create(b, inner);
    return b.mul(b.mul(b.f32(0.5), x), b.add(b.f32(1.0), th));
  }
  }
  llvm_unreachable("unknown activation");
}

Value mlir::moe::gluValue(LoweringBuilder &b, const GluParams &p, Value gate,
                          Value up, bool approximate) {
  if (p.limit) {
    Value lim = b.f32(*p.limit), negLim = b.f32(-*p.limit);
    gate = arith::MinimumFOp::create(b, gate, lim);
    up = arith::MaximumFOp::create(b, arith::MinimumFOp::create(b, up, lim),
                                   negLim);
  }
  Value act = applyActivation(b, p.activation, p.alpha, gate, approximate);
  return b.mul(act, b.add(up, b.f32(p.upBias)));
}
