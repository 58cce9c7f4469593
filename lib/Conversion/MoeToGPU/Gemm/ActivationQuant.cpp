//===- ActivationQuant.cpp - fp8_block activation quantization ------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// An fp8_block expert GEMM multiplies e4m3 activations: each lhs row is
// quantized per 128 columns (scale = max(amax, 1e-4) / 448, a power of two
// with scale_fmt ue8m0; code = e4m3(x / scale), round to nearest even,
// saturating) as --moe-lower-to-cpu quantizes (LowPrecision.h: the same
// scale function and IEEE division; the codes by the hardware's cvt,
// which rounds as roundToE4M3 does), so both lowerings quantize bit for
// bit alike (a NaN's sign aside). One warp per row and two groups: each
// half warp a group, lane l its columns 8 (l % 16) .. + 7, the group's
// amax a butterfly over the half warp. The lhs rows are
// quantized before any gather: each row once, however many experts read it.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

#include "Utils/LowPrecision.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using CmpI = arith::CmpIPredicate;

QuantizedRows gpu_lowering::allocQuantizedRows(LoweringBuilder &b, Value rows,
                                               int64_t k, bool ue8m0) {
  const int64_t groups = llvm::divideCeil(k, 128);
  QuantizedRows q;
  q.codes = allocScratch(b, {ShapedType::kDynamic, k}, b.getI8Type(), {rows});
  q.scales =
      allocScratch(b, {ShapedType::kDynamic, groups}, b.getF32Type(), {rows});
  q.ue8m0 = ue8m0;
  return q;
}

void gpu_lowering::quantizeActivations(LoweringBuilder &b, GemmOperands &g) {
  assert(g.fp8() && !g.lhsScale && "quantizeActivations: fp8_block lhs");
  QuantizedRows q = allocQuantizedRows(b, g.lhsRows, g.kDim, g.ue8m0);
  quantizeRows(b, g.lhs, g.lhsRows, g.kDim, q);
  g.lhs = q.codes;
  g.lhsScale = q.scales;
}

void gpu_lowering::quantizeRows(LoweringBuilder &b, Value lhs, Value rows,
                                int64_t k, const QuantizedRows &q) {
  const int64_t groups = llvm::divideCeil(k, 128);
  Value codes = q.codes, scales = q.scales;
  bool ue8m0 = q.ue8m0;
  // A warp quantizes two groups of a row: lanes 16 h .. 16 h + 15 group
  // 2 p + h, lane l its columns 8 (l % 16) .. + 7 (the last pair of an odd
  // count has an idle half, which still shuffles).
  const int64_t pairs = llvm::divideCeil(groups, 2);
  launchWarpPerRow(
      b, b.mul(rows, b.idx(pairs)),
      [&](LoweringBuilder &b, Value unit, Value lane) {
        Value row = arith::DivUIOp::create(b, unit, b.idx(pairs));
        Value pair = arith::RemUIOp::create(b, unit, b.idx(pairs));
        Value half = arith::ShRUIOp::create(b, lane, b.idx(4));
        Value group = b.add(b.mul(pair, b.idx(2)), half);
        Value sub = arith::AndIOp::create(b, lane, b.idx(15));
        Value first = b.add(b.mul(group, b.idx(128)), b.mul(sub, b.idx(8)));
        SmallVector<Value, 8> cols, in, x;
        Value amax = b.f32(0.0);
        for (int64_t i = 0; i < 8; ++i) {
          Value col = b.add(first, b.idx(i));
          Value ok = b.cmpi(CmpI::ult, col, b.idx(k));
          // Columns past K (and an idle half) read as zero: they do not
          // raise the amax.
          Value v = b.ifElse(
              ok, {b.getF32Type()},
              [&](LoweringBuilder &b) -> SmallVector<Value> {
                return {b.toF32(b.load(lhs, {row, col}))};
              },
              [&](LoweringBuilder &b) -> SmallVector<Value> {
                return {b.f32(0.0)};
              })[0];
          cols.push_back(col);
          in.push_back(ok);
          x.push_back(v);
          amax = arith::MaximumFOp::create(b, amax, math::AbsFOp::create(b, v));
        }
        // The group's amax: a butterfly within the half warp.
        for (int64_t offset = 8; offset >= 1; offset /= 2)
          amax = arith::MaximumFOp::create(
              b, amax, warpShuffle(b, amax, offset, gpu::ShuffleMode::XOR));
        Value scale = activationScale(b, amax, ue8m0);
        // The codes by cvt.rn.satfinite.e4m3x2.f32 (one instruction a pair:
        // round to nearest even, beyond 448 to 448, NaN to 0x7f), which is
        // roundToE4M3 then encodeE4M3 but for a NaN's sign (dropped).
        auto f8 = Float8E4M3FNType::get(b.getContext());
        SmallVector<Value, 8> code;
        for (int64_t i = 0; i < 8; i += 2) {
          Value pair = NVVM::ConvertF32x2ToF8x2Op::create(
              b, b.getI16Type(), b.div(x[i + 1], scale), b.div(x[i], scale),
              NVVM::FPRoundingMode::RN, NVVM::SaturationMode::SATFINITE,
              /*relu=*/false, f8);
          Value word = arith::ExtUIOp::create(b, b.getI32Type(), pair);
          code.push_back(arith::TruncIOp::create(b, b.getI8Type(), word));
          code.push_back(arith::TruncIOp::create(
              b, b.getI8Type(), arith::ShRUIOp::create(b, word, b.i32(8))));
        }
        for (int64_t i = 0; i < 8; ++i)
          when(b, in[i], [&](LoweringBuilder &b) {
            b.store(code[i], codes, {row, cols[i]});
          });
        when(b,
             b.andi(b.cmpi(CmpI::eq, sub, b.idx(0)),
                    b.cmpi(CmpI::ult, group, b.idx(groups))),
             [&](LoweringBuilder &b) { b.store(scale, scales, {row, group}); });
      });
}
