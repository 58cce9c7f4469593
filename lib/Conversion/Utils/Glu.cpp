//===- Glu.cpp - the gated activation shared by the lowerings -------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Glu.h"

#include <cmath>

using namespace mlir;
using namespace mlir::moe;

/// The attributes of moe.glu and moe.glu_grad (the same ODS list).
template <typename OpTy> static GluParams gluOpParams(OpTy op) {
  std::optional<float> limit;
  if (auto l = op.getLimit())
    limit = l->convertToFloat();
  return GluParams{op.getActivation(), op.getLayout(),
                   op.getAlpha().convertToFloat(), limit,
                   op.getUpBias().convertToFloat()};
}

GluParams mlir::moe::gluParamsOf(GluOp op) { return gluOpParams(op); }

GluParams mlir::moe::gluParamsOf(GluGradOp op) { return gluOpParams(op); }

GluParams mlir::moe::gluParamsOf(ExpertGemmGluGradOp op) {
  return gluOpParams(op);
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

std::pair<Value, Value> mlir::moe::gluPairColumns(LoweringBuilder &b,
                                                  GluLayout layout, int64_t n,
                                                  Value col) {
  if (layout == GluLayout::concat)
    return {col, b.add(col, b.idx(n))};
  Value gate = b.mul(col, b.idx(2));
  return {gate, b.add(gate, b.idx(1))};
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

/// act'(x) in f32 (exact forms).
static Value activationDerivative(LoweringBuilder &b, Activation activation,
                                  float alpha, Value x) {
  switch (activation) {
  case Activation::silu: {
    // s + a x s (1 - s), s = sigmoid(a x).
    Value ax = b.mul(b.f32(alpha), x);
    Value e = math::ExpOp::create(b, arith::NegFOp::create(b, ax));
    Value s = arith::DivFOp::create(b, b.f32(1.0), b.add(b.f32(1.0), e));
    Value oneMinus = arith::SubFOp::create(b, b.f32(1.0), s);
    return b.add(s, b.mul(b.mul(ax, s), oneMinus));
  }
  case Activation::gelu: {
    // Phi(x) + x phi(x).
    Value erf = math::ErfOp::create(b, b.mul(x, b.f32(M_SQRT1_2)));
    Value cdf = b.mul(b.f32(0.5), b.add(b.f32(1.0), erf));
    Value pdf = b.mul(b.f32(0.5 * M_2_SQRTPI * M_SQRT1_2),
                      math::ExpOp::create(b, b.mul(b.f32(-0.5), b.mul(x, x))));
    return b.add(cdf, b.mul(x, pdf));
  }
  case Activation::gelu_tanh: {
    // 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 k x^2), t = tanh(c (x + k x^3)).
    const float c = std::sqrt(2.0 / M_PI), k = 0.044715f;
    Value x2 = b.mul(x, x);
    Value inner = b.mul(b.f32(c), b.add(x, b.mul(b.f32(k), b.mul(x2, x))));
    Value t = math::TanhOp::create(b, inner);
    Value sech2 = arith::SubFOp::create(b, b.f32(1.0), b.mul(t, t));
    Value dInner = b.mul(b.f32(c), b.add(b.f32(1.0), b.mul(b.f32(3 * k), x2)));
    return b.add(b.mul(b.f32(0.5), b.add(b.f32(1.0), t)),
                 b.mul(b.mul(b.mul(b.f32(0.5), x), sech2), dInner));
  }
  }
  llvm_unreachable("unknown activation");
}

std::pair<Value, Value> mlir::moe::gluGradValues(LoweringBuilder &b,
                                                 const GluParams &p, Value grad,
                                                 Value gate, Value up) {
  Value g = gate, u = up;
  Value gatePasses, upPasses;
  if (p.limit) {
    // A clamp passes the gradient inside its closed interval (torch.clamp).
    Value lim = b.f32(*p.limit), negLim = b.f32(-*p.limit);
    g = arith::MinimumFOp::create(b, gate, lim);
    u = arith::MaximumFOp::create(b, arith::MinimumFOp::create(b, up, lim),
                                  negLim);
    gatePasses = arith::CmpFOp::create(b, arith::CmpFPredicate::OLE, gate, lim);
    upPasses =
        b.andi(arith::CmpFOp::create(b, arith::CmpFPredicate::OLE, up, lim),
               arith::CmpFOp::create(b, arith::CmpFPredicate::OGE, up, negLim));
  }
  Value act = applyActivation(b, p.activation, p.alpha, g);
  Value dAct = activationDerivative(b, p.activation, p.alpha, g);
  Value dGate = b.mul(b.mul(grad, b.add(u, b.f32(p.upBias))), dAct);
  Value dUp = b.mul(grad, act);
  if (p.limit) {
    // NaN inputs keep their NaN (the comparisons are ordered: a NaN gate
    // fails them, so select the product, which is NaN, back in).
    Value zero = b.f32(0.0);
    Value gateNan =
        arith::CmpFOp::create(b, arith::CmpFPredicate::UNO, gate, gate);
    Value upNan = arith::CmpFOp::create(b, arith::CmpFPredicate::UNO, up, up);
    dGate = b.select(b.ori(gatePasses, gateNan), dGate, zero);
    dUp = b.select(b.ori(upPasses, upNan), dUp, zero);
  }
  return {dGate, dUp};
}
