//===- Passes.td - moe conversion passes -------------------*- tablegen -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_CONVERSION_PASSES_TD
#define MOE_MLIR_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertMoeToLinalgPass : Pass<"convert-moe-to-linalg"> {
  let summary = "Lower every moe op to linalg / scf / tensor / arith / math";
  let description = [{
    The executable semantics of the `moe` dialect: every op (and `moe.ffn`,
    through the `--moe-decompose` patterns) becomes upstream tensor-level
    IR that one-shot bufferization and the usual LLVM lowering handle. The
    lowering follows SPEC.md to the letter, including the run-time rules
    (NaN ranking, non-finite routing logits, ids out of range, empty
    experts, T = 0); every data-dependent access is bounds-guarded.

    Strategy by family:
    - routing (`topk`, `route`): per-row `scf.for` selection passes over the
      total order "larger first, lower index on ties, NaN last";
    - dispatch (`cumsum`, `get_indices`, `get_indptr`): sequential loops,
      O(E*T + T*k*k);
    - movement: `gather` and `combine` as `linalg.generic` (combine reduces
      the slot dim in f32, in slot order), `scatter` and the multi-hot
      converters as ordered loops;
    - expert compute: `grouped_matmul` as a loop over experts with a
      dynamic-size `linalg.generic` contraction per expert, `glu` as one
      `linalg.generic` reading the gate and up views.

    Example:

    ```mlir
    %rows = moe.gather %x[%tok] : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xf32>
    ```

    becomes a `linalg.generic` over `(m, h)` whose body reads
    `%x[%tok[m], h]` under an `scf.if` on `0 <= %tok[m] < T` and yields 0
    otherwise.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

#endif // MOE_MLIR_CONVERSION_PASSES_TD
