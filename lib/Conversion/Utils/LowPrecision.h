//===- LowPrecision.h - FP8 / MXFP4 number formats, bit-exact ----*- C++
//-*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The scalar functions behind the low-precision weight formats of the expert
// GEMMs (moe.grouped_matmul's `weight_format`), built from integer and f32
// arith ops so that every lowering computes them bit for bit alike, with no
// f8 / f4 support from LLVM: decoding e4m3 (fp8_block weights), e2m1 and
// E8M0 (mxfp4 weights and scales), and the run-time quantization of
// activations to e4m3 with their per-128-channel scales.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_LIB_CONVERSION_UTILS_LOWPRECISION_H
#define MOE_MLIR_LIB_CONVERSION_UTILS_LOWPRECISION_H

#include "LoweringBuilder.h"

namespace mlir {
namespace moe {

/// Largest finite e4m3 (float8_e4m3fn) magnitude.
inline constexpr float kE4M3Max = 448.0f;
/// The smallest amax an activation group is quantized with.
inline constexpr float kActAmaxFloor = 1e-4f;

/// The f32 value of e4m3 bits `bits` (i8): exact; 0x7f / 0xff are NaN.
Value decodeE4M3(LoweringBuilder &b, Value bits);
/// The f32 value of e2m1 code `code` (i32, 0..15): (-1)^(c >> 3) *
/// [0, .5, 1, 1.5, 2, 3, 4, 6][c & 7].
Value decodeE2M1(LoweringBuilder &b, Value code);
/// The e2m1 code (i32, 0..15) of element 2j + `odd` of a packed mxfp4 byte
/// j (`byte`: i8 or i32 bits): the low nibble holds element 2j, the high
/// one 2j + 1.
Value e2m1Code(LoweringBuilder &b, Value byte, Value odd);
/// mxfp4_hopper (moe.grouped_matmul): the byte offset, within its block's
/// 16, of the little-endian word that holds value `kk` (index, 0..31) of
/// the block: 4 * ((kk / 2) % 4).
Value e2m1HopperWordOffset(LoweringBuilder &b, Value kk);
/// mxfp4_hopper: the little-endian i32 of the four bytes `byte(0..3)`
/// returns (i8) from the word's first byte on.
Value littleEndianWord(LoweringBuilder &b,
                       llvm::function_ref<Value(int64_t)> byte);
/// mxfp4_hopper: the e2m1 code (i32, 0..15) of value `kk` (index, 0..31)
/// of a block, from the word (i32) that holds it: with p = kk / 8 and
/// h = 16 * (kk % 2), code bits m, e0, e1, s (bit 0 .. 3) sit at word bits
/// h + (6, 7, 8, 15) - 3 p for p < 3 and h + (13, 14, 10, 11) for p = 3.
Value e2m1HopperCode(LoweringBuilder &b, Value word, Value kk);
/// The f32 value of E8M0 bits `bits` (i8): 2^(s - 127); 255 is NaN.
Value decodeE8M0(LoweringBuilder &b, Value bits);
/// The e4m3 bits (i8) of `v` (f32), which must be an e4m3 value (as
/// roundToE4M3 returns) or NaN (0x7f, sign kept).
Value encodeE4M3(LoweringBuilder &b, Value v);
/// `v` (f32) rounded to the nearest e4m3 value (ties to even), as an f32;
/// magnitudes above 448 saturate to 448, NaN stays NaN.
Value roundToE4M3(LoweringBuilder &b, Value v);
/// The quantization scale of a group whose largest magnitude is `amax`
/// (f32): max(amax, 1e-4) / 448, rounded up to a power of two with
/// `ue8m0`. NaN stays NaN.
Value activationScale(LoweringBuilder &b, Value amax, bool ue8m0);

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_LIB_CONVERSION_UTILS_LOWPRECISION_H
