//===- Glu.h - the gated activation shared by the lowerings -----*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// moe.glu's function on one (gate, up) pair in f32: optional clamping by
// `limit`, act(alpha * gate) forms, times (up + up_bias). Used by the CPU
// lowering's linalg bodies and the GPU kernels' epilogues alike.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_LIB_CONVERSION_UTILS_GLU_H
#define MOE_MLIR_LIB_CONVERSION_UTILS_GLU_H

#include "LoweringBuilder.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

#include <optional>

namespace mlir {
namespace moe {

/// The GLU attributes of moe.glu and of moe.expert_gemm's epilogue.
struct GluParams {
  Activation activation;
  GluLayout layout;
  float alpha;
  std::optional<float> limit;
  float upBias;
};

/// GLU parameters of a moe.glu op.
GluParams gluParamsOf(GluOp op);
/// GLU parameters of an expert_gemm's epilogue (requires one).
GluParams gluParamsOf(ExpertGemmOp op);
/// GLU parameters of a moe.glu_grad op.
GluParams gluParamsOf(GluGradOp op);
/// GLU parameters of a moe.expert_gemm_glu_grad op.
GluParams gluParamsOf(ExpertGemmGluGradOp op);

/// act(gate) in f32 for the GLU activations of moe.glu. `approximate`
/// lets silu use approximate exp and division (`afn`; the GPU epilogues:
/// an IEEE divide and expf per element were a large part of the Hopper
/// GEMM's epilogue, bench/NOTES.md v15); the other activations are exact
/// either way.
Value applyActivation(LoweringBuilder &b, Activation activation, float alpha,
                      Value x, bool approximate = false);

/// act(clamped gate) * (clamped up + up_bias), all f32.
Value gluValue(LoweringBuilder &b, const GluParams &p, Value gate, Value up,
               bool approximate = false);

/// The input columns {gate, up} of output column `col` of a GLU whose
/// output has `n` columns (concat: col and n + col; interleaved: 2 col and
/// 2 col + 1).
std::pair<Value, Value> gluPairColumns(LoweringBuilder &b, GluLayout layout,
                                       int64_t n, Value col);

/// moe.glu_grad on one pair, all f32: {d gate, d up} from the result's
/// gradient `grad` and the glu's input pair (exact forms, no `afn`).
std::pair<Value, Value> gluGradValues(LoweringBuilder &b, const GluParams &p,
                                      Value grad, Value gate, Value up);

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_LIB_CONVERSION_UTILS_GLU_H
