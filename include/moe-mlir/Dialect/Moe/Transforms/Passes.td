//===- Passes.td - moe dialect transformation passes -------*- tablegen -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_DIALECT_MOE_TRANSFORMS_PASSES_TD
#define MOE_MLIR_DIALECT_MOE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoeDecomposePass : Pass<"moe-decompose"> {
  let summary = "Expand moe.ffn (moe.ffn_train, moe.ffn_grad) into the primitive chain";
  let description = [{
    Rewrites every `moe.ffn` into the chain of public ops that defines it
    (docs/Contract.md, section 3):

    ```
    route -> cumsum -> get_indices -> get_indptr -> gather(token_indices)
      -> grouped_matmul(w_up) -> glu -> grouped_matmul(w_down)
      -> scatter(reverse_indices) -> tensor.expand_shape to T x k x H
      -> combine(weights)
    ```

    Every `moe.ffn_train` becomes the same chain; its `h`, `weights` and
    `indices` results are the chain's `grouped_matmul(w_up)` and
    `moe.route` results.

    Every `moe.ffn_grad` becomes its backward chain (the forward's routing,
    dispatch metadata and pre-activation recomputed, or with
    `saved(h, weights, indices)` only the metadata derived from the saved
    ids and the activation from the saved h; then dgrad, glu_grad, row_dot,
    route_grad and grouped_matmul_wgrad; the op reference of `moe.ffn_grad`
    lists it).

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

def MoeFuseGluGradPass : Pass<"moe-fuse-glu-grad"> {
  let summary = "Fuse a layer backward's GLU gradient into the dgrad GEMM";
  let description = [{
    The down projection's backward as `moe.ffn_grad` decomposes it,
    `g = grouped_matmul(dy_rows, w_down^T)`, `a = glu(h)`, `row_dot(g, a)`,
    `glu_grad(combine(g, w), h)` and `combine(a, w)` (the combines one-slot
    row scales by the same routing weights), becomes one
    `moe.expert_gemm_glu_grad`: `g` stays in f32 and is never
    materialised, and the activation is recomputed once for the
    routing-weight gradient and the scaled activation. Fires only when `g`
    and `a` have exactly these users, the glu and glu_grad share their
    parameters, and the GEMM has no stage but a gather. Runs before
    `moe-fuse-gather-matmul`, whose gather then folds into the weight
    gradient that reads the same rows.

    Before:

    ```mlir
    %g = moe.grouped_matmul %dyr, %w2 offsets(%off : tensor<9xi32>) {transpose_rhs = true}
        : tensor<?x64xbf16>, tensor<8x128x64xbf16> -> tensor<?x128xbf16>
    %a = moe.glu %h silu concat : tensor<?x256xbf16> -> tensor<?x128xbf16>
    %dw = moe.row_dot %g, %a : tensor<?x128xbf16>, tensor<?x128xbf16> -> tensor<?xf32>
    %ge = tensor.expand_shape %g [[0, 1], [2]] output_shape [%m, 1, 128]
        : tensor<?x128xbf16> into tensor<?x1x128xbf16>
    %da = moe.combine %ge weights(%w : tensor<?x1xf32>) : tensor<?x1x128xbf16> -> tensor<?x128xbf16>
    %dh = moe.glu_grad %da, %h silu concat : tensor<?x128xbf16>, tensor<?x256xbf16> -> tensor<?x256xbf16>
    %ae = tensor.expand_shape %a [[0, 1], [2]] output_shape [%m, 1, 128]
        : tensor<?x128xbf16> into tensor<?x1x128xbf16>
    %wa = moe.combine %ae weights(%w : tensor<?x1xf32>) : tensor<?x1x128xbf16> -> tensor<?x128xbf16>
    ```

    After:

    ```mlir
    %wf = tensor.collapse_shape %w [[0, 1]] : tensor<?x1xf32> into tensor<?xf32>
    %dh, %wa, %dw = moe.expert_gemm_glu_grad %dyr, %w2 offsets(%off : tensor<9xi32>)
        preact(%h : tensor<?x256xbf16>) weights(%wf : tensor<?xf32>) silu concat
        {transpose_rhs = true} : tensor<?x64xbf16>, tensor<8x128x64xbf16>
        -> tensor<?x256xbf16>, tensor<?x128xbf16>, tensor<?xf32>
    ```
  }];
  let dependentDialects = ["::mlir::moe::MoeDialect",
                           "::mlir::tensor::TensorDialect"];
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

    Likewise a gathered operand of `moe.grouped_matmul_wgrad` (the weight
    gradients' token rows) is read through its indices on the contraction's
    row loop: `moe.grouped_matmul_wgrad %dh, %x[%tok : tensor<?xi32>] ...`,
    when every user of the gathered rows is a weight gradient.
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
    `weights[rev[m]]` (no scale when the combine has no weights, as for a
    layer's input gradient) and writes it straight to its `(token, slot)`
    row `rev[m]`, followed by an unweighted `moe.combine`: the scattered copy of
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

//===----------------------------------------------------------------------===//
// Run-time shape checks (run by --moe-lower-to-cpu and --moe-lower-to-nvvm)
//===----------------------------------------------------------------------===//

def MoeShapeChecksPass : Pass<"moe-shape-checks", "::mlir::ModuleOp"> {
  let summary = "Record the run-time shape rules of public functions";
  let description = [{
    The verifiers check every static shape rule; a dynamic size (`T`, `M`)
    is only known when the compiled function is called, so a caller can pass
    `x` with 5 rows and `logits` with 4. This pass works out, for every
    public function with a body, which dynamic sizes of its tensor
    arguments must agree and records them as the function attribute
    `moe.shape_checks`; `--moe-emit-shape-checks` turns that into code at
    the function's entry, after bufferization, so that a mismatch is
    reported before any work is done.

    The analysis puts every dynamic dimension of the function's tensors into
    equivalence classes of sizes with rational ratios (weighted union-find):
    each moe op contributes its rules (`moe.ffn`: rows of `x`, `logits` and
    the result are `T`; `moe.cumsum`: the result has `E * T` elements;
    `moe.get_indices`: its results `T * k`; `moe.scatter`: rows of `input`
    and `indices` are `M`; `moe.expert_gemm`: `gather`, `scatter`, `scale`
    and the result have `M` rows; ...), and so do `tensor.cast`,
    `tensor.empty` / `tensor.expand_shape` sizes read by `tensor.dim`,
    `tensor.expand_shape` / `tensor.collapse_shape` groups, elementwise ops
    and destination-style ops (results as their inits). A class that holds
    two argument dimensions gives an equality check (up to the ratio); a
    class with a static size gives a check against it. Besides, the `i32`
    index tensors bound `T * k` and `E * T` below 2^31 (checked where an op
    builds them from a dynamic `T`), a `moe.get_indices` cumsum argument
    must be a multiple of `T`, a `moe.get_indptr` one a multiple of `E`, and
    no argument size may be negative.

    Each record is a dictionary: `kind` (`eq`, `const`, `multiple`, `max`,
    `nonneg`), `lhs` (`[argument, dimension]`), `rhs` (the same, for `eq`
    and `multiple`), `num` / `den` (`eq`: `size(lhs) * den == size(rhs) *
    num`; `max`: `size(lhs) * num <= value * den`), `value`, and `message`,
    the error text with `{0}` and `{1}` standing for the two sizes (in that
    order, each at most once):

    ```mlir
    func.func @ffn(%x: tensor<?x64xf32>, %logits: tensor<?x8xf32>, ...)
        attributes {moe.shape_checks = [{kind = "eq", lhs = array<i64: 1, 0>,
          rhs = array<i64: 0, 0>, num = 1 : i64, den = 1 : i64,
          message = "@ffn: dimension 0 of argument 1 ('logits' of moe.ffn at
          layer.mlir:3:8) is {0}, but dimension 0 of argument 0 ('x' of
          moe.ffn at layer.mlir:3:8) is {1}: they must be equal (T)"}, ...]}
    ```

    Values the ops define behaviour for (ids out of range, offsets beyond
    `M`) are data, not shapes, and are not checked.
  }];
}

def MoeEmitShapeChecksPass : Pass<"moe-emit-shape-checks", "::mlir::ModuleOp"> {
  let summary = "Check the recorded shape rules at function entry (memref level)";
  let description = [{
    For every function with a `moe.shape_checks` attribute (see
    `--moe-shape-checks`) whose arguments are now memrefs, emits the checks
    at the function's entry (`memref.dim` of the arguments) and removes the
    attribute. Argument positions are those of the tensor-level function
    (bufferization keeps them; out-parameters are appended).

    - `mode=report` (the default; `--moe-lower-to-nvvm` and the Python CPU
      JIT): the entry block branches to a failure block per check, which
      calls `report-function(message, lhs, rhs)` (a C function
      `void (const char *, int64_t, int64_t)`; the message is a printf
      format of the two sizes: `{0}` / `{1}` as `%lld`, `%` as `%%`) and
      returns at once, before any kernel
      launch, allocation or write of an output (results are returned as
      empty buffers, of zero size where dynamic). The CUDA runtime's
      `moeRuntimeReportShapeError` records the message for
      `moeRuntimeGetLastError`.
    - `mode=abort` (`--moe-lower-to-cpu`'s default, for `mlir-runner`,
      which has no reporting function): the failure block prints the
      message with the sizes to stderr (`dprintf(2, ...)`, which an abort
      does not lose) and calls `abort()`.

    A record that does not describe the function (argument out of range,
    not a ranked memref, bad kind) is an error.
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"report\"",
           "report (call report-function and return) or abort (print to stderr, abort())">,
    Option<"reportFunction", "report-function", "std::string",
           /*default=*/"\"moeRuntimeReportShapeError\"",
           "The C function a failed check calls in report mode">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
  ];
}

#endif // MOE_MLIR_DIALECT_MOE_TRANSFORMS_PASSES_TD
