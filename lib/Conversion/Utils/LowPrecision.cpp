//===- LowPrecision.cpp - FP8 / MXFP4 number formats, bit-exact -----------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "LowPrecision.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::moe;

using CmpI = arith::CmpIPredicate;

static Value toBits(LoweringBuilder &b, Value f) {
  return arith::BitcastOp::create(b, b.getI32Type(), f);
}
static Value fromBits(LoweringBuilder &b, Value bits) {
  return arith::BitcastOp::create(b, b.getF32Type(), bits);
}
static Value shl(LoweringBuilder &b, Value v, int64_t n) {
  return arith::ShLIOp::create(b, v, b.i32(n));
}
static Value shr(LoweringBuilder &b, Value v, int64_t n) {
  return arith::ShRUIOp::create(b, v, b.i32(n));
}
static Value bitsI32(LoweringBuilder &b, Value i8) {
  if (!i8.getType().isInteger(8))
    i8 = arith::BitcastOp::create(b, b.getI8Type(), i8);
  return arith::ExtUIOp::create(b, b.getI32Type(), i8);
}

Value mlir::moe::decodeE4M3(LoweringBuilder &b, Value bits) {
  Value u = bitsI32(b, bits);
  Value sign = shl(b, b.andi(shr(b, u, 7), b.i32(1)), 31);
  Value exp = b.andi(shr(b, u, 3), b.i32(15));
  Value man = b.andi(u, b.i32(7));
  // Normal: 2^(E - 7) * (1 + m / 8).
  Value normal = b.ori(shl(b, b.add(exp, b.i32(127 - 7)), 23), shl(b, man, 20));
  // Subnormal (E = 0): m * 2^-9, exact in f32.
  Value sub = toBits(b, b.mul(arith::SIToFPOp::create(b, b.getF32Type(), man),
                              b.f32(1.0 / 512.0)));
  Value magnitude = b.select(b.cmpi(CmpI::eq, exp, b.i32(0)), sub, normal);
  Value nan =
      b.andi(b.cmpi(CmpI::eq, exp, b.i32(15)), b.cmpi(CmpI::eq, man, b.i32(7)));
  magnitude = b.select(nan, b.i32(0x7fc00000), magnitude);
  return fromBits(b, b.ori(sign, magnitude));
}

Value mlir::moe::encodeE4M3(LoweringBuilder &b, Value v) {
  Value bits = toBits(b, v);
  Value sign = b.andi(shr(b, bits, 24), b.i32(0x80));
  Value a = fromBits(b, b.andi(bits, b.i32(0x7fffffff)));
  // Normal (|v| >= 2^-6): the exponent rebiased, the top 3 mantissa bits.
  Value abits = toBits(b, a);
  Value e = b.andi(shr(b, abits, 23), b.i32(0xff));
  Value normal = b.ori(shl(b, b.sub(e, b.i32(127 - 7)), 3),
                       b.andi(shr(b, abits, 20), b.i32(7)));
  // Subnormal or zero: |v| / 2^-9, an integer in [0, 7].
  Value sub =
      arith::FPToSIOp::create(b, b.getI32Type(), b.mul(a, b.f32(512.0)));
  Value code = b.select(b.cmpi(CmpI::uge, e, b.i32(127 - 6)), normal, sub);
  Value isNan = b.cmpf(arith::CmpFPredicate::UNO, v, v);
  code = b.select(isNan, b.i32(0x7f), code);
  return arith::TruncIOp::create(b, b.getI8Type(), b.ori(sign, code));
}

Value mlir::moe::decodeE2M1(LoweringBuilder &b, Value code) {
  Value sign = shl(b, b.andi(shr(b, code, 3), b.i32(1)), 31);
  Value exp = b.andi(shr(b, code, 1), b.i32(3));
  Value man = b.andi(code, b.i32(1));
  // E = 0: 0 or 0.5; else 2^(E - 1) * (1 + m / 2).
  Value normal = b.ori(shl(b, b.add(exp, b.i32(127 - 1)), 23), shl(b, man, 22));
  Value sub =
      b.select(b.cmpi(CmpI::eq, man, b.i32(0)), b.i32(0), b.i32(0x3f000000));
  Value magnitude = b.select(b.cmpi(CmpI::eq, exp, b.i32(0)), sub, normal);
  return fromBits(b, b.ori(sign, magnitude));
}

Value mlir::moe::e2m1Code(LoweringBuilder &b, Value byte, Value odd) {
  Value u = byte.getType().isInteger(32) ? byte : bitsI32(b, byte);
  return b.select(odd, shr(b, u, 4), b.andi(u, b.i32(15)));
}

Value mlir::moe::e2m1HopperWordOffset(LoweringBuilder &b, Value kk) {
  Value q = b.andi(b.toI32(kk), b.i32(6));
  return b.toIndex(shl(b, q, 1));
}

Value mlir::moe::littleEndianWord(LoweringBuilder &b,
                                  llvm::function_ref<Value(int64_t)> byte) {
  Value word = b.i32(0);
  for (int64_t t = 0; t < 4; ++t)
    word = b.ori(word, shl(b, bitsI32(b, byte(t)), 8 * t));
  return word;
}

Value mlir::moe::e2m1HopperCode(LoweringBuilder &b, Value word, Value kk) {
  Value k = b.toI32(kk);
  Value p = shr(b, k, 3);
  Value half = shl(b, b.andi(k, b.i32(1)), 4);
  Value last = b.cmpi(CmpI::eq, p, b.i32(3));
  // Bit position of m for p < 3: 6 - 3 p (then e0, e1 above it, s at +9).
  Value base = b.add(b.sub(b.i32(6), b.mul(p, b.i32(3))), half);
  auto at = [&](int64_t offset, int64_t lastPos) {
    Value pos =
        b.select(last, b.add(half, b.i32(lastPos)), b.add(base, b.i32(offset)));
    return b.andi(arith::ShRUIOp::create(b, word, pos), b.i32(1));
  };
  Value code = at(0, 13);
  code = b.ori(code, shl(b, at(1, 14), 1));
  code = b.ori(code, shl(b, at(2, 10), 2));
  return b.ori(code, shl(b, at(9, 11), 3));
}

Value mlir::moe::decodeE8M0(LoweringBuilder &b, Value bits) {
  Value u = bitsI32(b, bits);
  // 2^(s - 127): the f32 exponent field is s itself; s = 0 is 2^-127, an
  // f32 subnormal (0x00400000); s = 255 is NaN.
  Value value =
      b.select(b.cmpi(CmpI::eq, u, b.i32(0)), b.i32(0x00400000), shl(b, u, 23));
  value = b.select(b.cmpi(CmpI::eq, u, b.i32(255)), b.i32(0x7fc00000), value);
  return fromBits(b, value);
}

Value mlir::moe::roundToE4M3(LoweringBuilder &b, Value v) {
  Value bits = toBits(b, v);
  Value sign = b.andi(bits, b.i32(INT32_MIN));
  Value a = fromBits(b, b.andi(bits, b.i32(0x7fffffff)));
  // Saturate (NaN compares false and stays).
  a = b.select(b.cmpf(arith::CmpFPredicate::OGT, a, b.f32(kE4M3Max)),
               b.f32(kE4M3Max), a);
  // The e4m3 quantum at a's binade: 2^(max(e, -6) - 3).
  Value e = b.sub(b.andi(shr(b, toBits(b, a), 23), b.i32(0xff)), b.i32(127));
  Value qe = b.sub(arith::MaxSIOp::create(b, e, b.i32(-6)), b.i32(3));
  Value quantum = fromBits(b, shl(b, b.add(qe, b.i32(127)), 23));
  Value inverse = fromBits(b, shl(b, b.sub(b.i32(127), qe), 23));
  Value r = b.mul(math::RoundEvenOp::create(b, b.mul(a, inverse)), quantum);
  return fromBits(b, b.ori(toBits(b, r), sign));
}

Value mlir::moe::activationScale(LoweringBuilder &b, Value amax, bool ue8m0) {
  Value s = b.div(arith::MaximumFOp::create(b, amax, b.f32(kActAmaxFloor)),
                  b.f32(kE4M3Max));
  if (!ue8m0)
    return s;
  // Up to a power of two: the exponent field, plus one when any mantissa
  // bit is set (s is a positive normal number, or NaN / inf, kept).
  Value bits = toBits(b, s);
  Value exp = b.andi(bits, b.i32(0x7f800000));
  Value up = b.select(b.cmpi(CmpI::ne, b.andi(bits, b.i32(0x7fffff)), b.i32(0)),
                      b.add(exp, b.i32(0x800000)), exp);
  Value finite = b.cmpi(CmpI::ne, exp, b.i32(0x7f800000));
  return fromBits(b, b.select(finite, up, bits));
}
