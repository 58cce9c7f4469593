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
    Rewrites every `moe.ffn` into the chain of public ops that defines it
    (docs/Contract.md, section 3):

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

//===----------------------------------------------------------------------===//
// Fusion passes (run in this order by --moe-fuse)
//===----------------------------------------------------------------------===//

def MoeFuseDispatchPass : Pass<"moe-fuse-dispatch"> {
  let summary = "Fuse cumsum + get_indices + get_indptr into moe.dispatch";
  let description = [{
    Replaces a `moe.cumsum` whose every user is a `moe.get_indices` on the
    same ids or an exclusive, i32 `moe.get_indptr` with the same expert
    count by one `moe.dispatch`: a counting sort in O(T*k + E) work and
    memory, so the `E*T` cumsum is never materialised. Any other user of
    the cumsum (or an inclusive / i64 indptr) leaves the IR unchanged.

    Before:

    ```mlir
    %cs = moe.cumsum %ids num_experts = 8 : tensor<?x2xi32> -> tensor<?xi32>
    %rev, %tok = moe.get_indices %cs, %ids
        : tensor<?xi32>, tensor<?x2xi32> -> tensor<?xi32>, tensor<?xi32>
    %off = moe.get_indptr %cs num_experts = 8 : tensor<?xi32> -> tensor<9xi32>
    ```

    After:

    ```mlir
    %off, %rev, %tok = moe.dispatch %ids num_experts = 8
        : tensor<?x2xi32> -> tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
    ```
  }];
  let dependentDialects = ["::mlir::moe::MoeDialect"];
}

def MoeFuseGatherMatmulPass : Pass<"moe-fuse-gather-matmul"> {
  let summary = "Read the grouped matmul's lhs through the gather indices";
  let description = [{
    `grouped_matmul(gather(x, idx), w, offsets)` (or a `moe.expert_gemm`
    without a gather stage) becomes `moe.expert_gemm x[idx], w, offsets`:
    the `M x H` gathered copy is never materialised. Out-of-range indices
    still read zero rows. Fires only when the gathered tensor has no other
    user.

    Before:

    ```mlir
    %rows = moe.gather %x[%tok] : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xf32>
    %h = moe.grouped_matmul %rows, %w offsets(%off : tensor<9xi32>)
        : tensor<?x64xf32>, tensor<8x64x256xf32> -> tensor<?x256xf32>
    ```

    After:

    ```mlir
    %h = moe.expert_gemm %x[%tok : tensor<?xi32>], %w offsets(%off : tensor<9xi32>)
        : tensor<?x64xf32>, tensor<8x64x256xf32> -> tensor<?x256xf32>
    ```
  }];
  let dependentDialects = ["::mlir::moe::MoeDialect"];
}

def MoeFuseGluPass : Pass<"moe-fuse-glu"> {
  let summary = "Fuse moe.glu into the producing grouped matmul's epilogue";
  let description = [{
    `glu(grouped_matmul(...))` becomes one `moe.expert_gemm` with a GLU
    epilogue, so the `M x 2I` pre-activation is never materialised (the
    pre-activation stays in f32 instead of being rounded to the layer's
    type). Fires only when the matmul's result has no other user and the
    matmul has no scatter/scale epilogue yet (the GLU must come first).

    Before:

    ```mlir
    %h = moe.expert_gemm %x[%tok : tensor<?xi32>], %w offsets(%off : tensor<9xi32>)
        : tensor<?x64xf32>, tensor<8x64x256xf32> -> tensor<?x256xf32>
    %a = moe.glu %h silu concat : tensor<?x256xf32> -> tensor<?x128xf32>
    ```

    After:

    ```mlir
    %a = moe.expert_gemm %x[%tok : tensor<?xi32>], %w offsets(%off : tensor<9xi32>)
        {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>}
        : tensor<?x64xf32>, tensor<8x64x256xf32> -> tensor<?x128xf32>
    ```
  }];
  let dependentDialects = ["::mlir::moe::MoeDialect"];
}

def MoeFuseScatterPass : Pass<"moe-fuse-scatter"> {
  let summary = "Fuse scatter + routing weights into the second matmul's epilogue";
  let description = [{
    `combine(expand_shape(scatter(grouped_matmul(...), rev)), weights)`
    becomes a `moe.expert_gemm` whose epilogue scales row `m` by
    `weights[rev[m]]` and writes it straight to its `(token, slot)` row
    `rev[m]`, followed by an unweighted `moe.combine`: the scattered copy of
    the expert outputs is never materialised, and the k-way sum still reads
    `T x k x H` once, in slot order (deterministic). Fires only when `rev`
    comes from `moe.get_indices` or `moe.dispatch` (a permutation), the
    reshape is `[[0, 1], [2]]`, and the intermediates have no other users.

    Before:

    ```mlir
    %o = moe.grouped_matmul %a, %w2 offsets(%off : tensor<9xi32>) : ...
    %s = moe.scatter %o[%rev] : ...
    %p = tensor.expand_shape %s [[0, 1], [2]] output_shape [%t, 2, 64] : ...
    %y = moe.combine %p weights(%w : tensor<?x2xf32>) : ...
    ```

    After:

    ```mlir
    %wf = tensor.collapse_shape %w [[0, 1]] : tensor<?x2xf32> into tensor<?xf32>
    %o = moe.expert_gemm %a, %w2 offsets(%off : tensor<9xi32>)
        scatter(%rev : tensor<?xi32>) scale(%wf : tensor<?xf32>) : ...
    %p = tensor.expand_shape %o [[0, 1], [2]] output_shape [%t, 2, 64] : ...
    %y = moe.combine %p : tensor<?x2x64xf32> -> tensor<?x64xf32>
    ```
  }];
  let dependentDialects = ["::mlir::moe::MoeDialect",
                           "::mlir::tensor::TensorDialect"];
}

def MoeFuseRouteDispatchPass : Pass<"moe-fuse-route-dispatch"> {
  let summary = "Fuse moe.route with the moe.dispatch of its ids";
  let description = [{
    `dispatch(route(logits).indices)` becomes one `moe.route_dispatch`:
    routing and the dispatch histogram run as one kernel, removing the
    kernel boundary between them (on the GPU the router counts the
    per-expert histogram as it selects). The ids remain available to other
    users. Run after `--moe-fuse-dispatch`.

    Before:

    ```mlir
    %w, %ids = moe.route %logits k = 2 scoring = softmax
        : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
    %off, %rev, %tok = moe.dispatch %ids num_experts = 8
        : tensor<?x2xi32> -> tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
    ```

    After:

    ```mlir
    %w, %ids, %off, %rev, %tok = moe.route_dispatch %logits k = 2
        scoring = softmax : tensor<?x8xf32> -> tensor<?x2xf32>,
        tensor<?x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
    ```
  }];
  let dependentDialects = ["::mlir::moe::MoeDialect"];
}

def MoeCostReportPass : Pass<"moe-cost-report"> {
  let summary = "Print the compute ops and materialised intermediates per function";
  let description = [{
    An analysis that changes nothing. For every function it prints (to
    stderr) the tensor-level compute ops (every moe and linalg op; a backend
    runs each as one or more kernels: `--moe-gpu-launch-report` counts what
    the GPU lowering launches) and every intermediate tensor (a result
    used by another op of the function), with its size in bytes as a
    function of the token count `T` (dynamic dims are tracked as multiples
    of `T`: `M = T*k`, the cumsum's `E*T`, ...), and the totals. Run it
    before and after `--moe-fuse` to see what fusion removed:

    ```
    moe-opt layer.mlir --moe-decompose --moe-cost-report=label=unfused \
        --moe-fuse --moe-cost-report=label=fused
    ```
  }];
  let options = [
    Option<"label", "label", "std::string", /*default=*/"\"\"",
           "A tag printed with each report (e.g. before / after)">,
  ];
}

#endif // MOE_MLIR_DIALECT_MOE_TRANSFORMS_PASSES_TD
