//===- Passes.td - moe dialect transformation passes -------*- tablegen -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_DIALECT_MOE_TRANSFORMS_PASSES_TD
#define MOE_MLIR_DIALECT_MOE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoeDecomposePass : Pass<"moe-decompose"> {
  let summary = "Expand moe.ffn into the primitive routing/dispatch/GEMM chain";
  let description = [{
    Rewrites every `moe.ffn` into the chain of SPEC section 3:

    ```
    route -> cumsum -> get_indices -> get_indptr -> gather(token_indices)
      -> grouped_matmul(w_up) -> glu -> grouped_matmul(w_down)
      -> scatter(reverse_indices) -> tensor.expand_shape to T x k x H
      -> combine(weights)
    ```

    Routing weights are produced in f32 (routing math is f32); the expert
    activations stay in the layer's element type `F` between the two grouped
    matmuls, as fused MoE kernels round them. A dynamic `T` is read with
    `tensor.dim` for the reshape.

    Before:

    ```mlir
    %y = moe.ffn %x, %logits, %w_up, %w_down k = 2 scoring = softmax
        activation = silu layout = concat {normalize = true}
        : tensor<?x64xf32>, tensor<?x8xf32>, tensor<8x64x256xf32>,
          tensor<8x128x64xf32> -> tensor<?x64xf32>
    ```

    After:

    ```mlir
    %w, %ids = moe.route %logits k = 2 scoring = softmax {normalize = true}
        : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
    %cs = moe.cumsum %ids num_experts = 8 : tensor<?x2xi32> -> tensor<?xi32>
    %rev, %tok = moe.get_indices %cs, %ids : ...
    %off = moe.get_indptr %cs num_experts = 8 : tensor<?xi32> -> tensor<9xi32>
    %rows = moe.gather %x[%tok] : ...
    %h = moe.grouped_matmul %rows, %w_up offsets(%off : tensor<9xi32>) : ...
    %a = moe.glu %h silu concat : tensor<?x256xf32> -> tensor<?x128xf32>
    %o = moe.grouped_matmul %a, %w_down offsets(%off : tensor<9xi32>) : ...
    %s = moe.scatter %o[%rev] : ...
    %p = tensor.expand_shape %s [[0, 1], [2]] output_shape [%t, 2, 64] : ...
    %y = moe.combine %p weights(%w : tensor<?x2xf32>) : ...
    ```
  }];
  let dependentDialects = [
    "::mlir::moe::MoeDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

#endif // MOE_MLIR_DIALECT_MOE_TRANSFORMS_PASSES_TD
