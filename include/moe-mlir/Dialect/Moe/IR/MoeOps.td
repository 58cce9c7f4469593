//===- MoeOps.td - moe dialect operations ------------------*- tablegen -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The public ops of the `moe` dialect. Names, operand order, attribute names
// and types, and semantics are the contract (docs/Contract.md, and each
// op's description below); the custom assembly syntax
// is ours. Enum attributes are printed as bare keywords in the custom form
// (`scoring = softmax`) through the `EnumKeyword` custom directive, and as
// `#moe.scoring<softmax>` in attribute dictionaries and the generic form.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_DIALECT_MOE_IR_MOEOPS_TD
#define MOE_MLIR_DIALECT_MOE_IR_MOEOPS_TD

include "moe-mlir/Dialect/Moe/IR/MoeBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

/// The routing attributes of moe.route, moe.route_dispatch and moe.ffn (one
/// declaration: their verifier is shared too, MoeOps.cpp verifyRouting).
defvar Moe_RoutingAttrs = (ins
    I64Attr:$k,
    Moe_ScoringAttr:$scoring,
    DefaultValuedAttr<BoolAttr, "false">:$normalize,
    DefaultValuedAttr<I64Attr, "1">:$n_group,
    DefaultValuedAttr<I64Attr, "1">:$topk_group,
    DefaultValuedAttr<Moe_GroupScoreAttr,
                      "::mlir::moe::GroupScore::max">:$group_score,
    DefaultValuedAttr<F32Attr, "1.0f">:$scaling);
/// The GLU's parameters after its activation and layout (moe.glu, moe.ffn,
/// moe.expert_gemm's epilogue).
defvar Moe_GluParamAttrs = (ins
    DefaultValuedAttr<F32Attr, "1.0f">:$alpha,
    OptionalAttr<F32Attr>:$limit,
    DefaultValuedAttr<F32Attr, "0.0f">:$up_bias);

/// The op reference's two sections.
def Moe_PublicOpsDoc : OpDocGroup {
  let summary = "1. Public ops";
  let description = [{
    What a frontend emits: names, operands, attributes and results are
    stable (docs/Contract.md).
  }];
}
def Moe_InternalOpsDoc : OpDocGroup {
  let summary = "2. Internal fused ops";
  let description = [{
    Made by the `--moe-fuse-*` passes from the public ops; documented,
    verified and executable like them, but their form may change.
  }];
}

/// Every moe op is side-effect free and has a C++ verifier.
class Moe_Op<string mnemonic, list<Trait> traits = []>
    : Op<Moe_Dialect, mnemonic, !listconcat([Pure], traits)> {
  let hasVerifier = 1;
  let opDocGroup = Moe_PublicOpsDoc;
}

/// Ops whose result types follow from operands and attributes. The inferred
/// types are checked for compatibility only (dynamic dims match anything);
/// verify() then demands the exact type with a precise diagnostic, so
/// invalid IR reports the broken rule rather than a type mismatch.
class Moe_InferredOp<string mnemonic, list<Trait> traits = []>
    : Moe_Op<mnemonic, !listconcat(traits,
                                   [InferTypeOpAdaptorWithIsCompatible])> {
  let extraClassDefinition = [{
    bool $cppClass::isCompatibleReturnTypes(::mlir::TypeRange l,
                                            ::mlir::TypeRange r) {
      return sameCountAndRanks(l, r);
    }
  }];
}

//===----------------------------------------------------------------------===//
// Routing
//===----------------------------------------------------------------------===//

def Moe_TopKOp : Moe_InferredOp<"topk"> {
  let summary = "per-row top-k values and their indices";
  let description = [{
    For every row of `input` (`T x E`), returns the `k` largest entries in
    descending order and their column indices.

    Ordering is total and deterministic: of two equal values the one with the
    lower expert index comes first, and NaN ranks below every number
    (including `-inf`); NaNs keep ascending index order among themselves.

    Constraints: `E` is static and `1 <= k <= E`. `T` may be dynamic
    (including 0).

    Follows `gating_topk` of the TVM/MLC-LLM MoE operators.

    Example:

    ```mlir
    %vals, %ids = moe.topk %scores k = 2
        : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
    ```
  }];
  let arguments = (ins Moe_FloatTensorOfRank<2>:$input, I64Attr:$k);
  let results = (outs Moe_FloatTensorOfRank<2>:$values,
                      Moe_IndexTensorOfRank<2>:$indices);
  let assemblyFormat = [{
    $input `k` `=` $k attr-dict `:` type($input) `->` type($values) `,`
    type($indices)
  }];
}

def Moe_RouteOp : Moe_Op<"route"> {
  let summary = "gating: scores, (group-limited) top-k selection and weights";
  let description = [{
    Routes every token (row of `logits`, `T x E`) to `k` experts. Per row,
    all in `f32`:

    1. `s = softmax(logits)` over `E` (`scoring = softmax`), or
       `s = sigmoid(logits)` (`scoring = sigmoid`).
    2. `c = s + bias` when the optional `bias` (`E`, f32; DeepSeek-V3's
       score-correction bias) is given, else `c = s`.
    3. If `n_group > 1`: `E` is split into `n_group` equal groups; each group
       is scored by the max of `c` in it (`group_score = max`) or by the sum
       of its two largest `c` (`top2_sum`); the `topk_group` best groups are
       kept (ties: lower group index) and the experts of the others are
       excluded.
    4. `indices` = the `k` best remaining experts by `c` (ties: lower index).
    5. `weights` = `s` at those indices (the unbiased scores).
    6. If `normalize`, the `k` weights are divided by their sum; then they
       are multiplied by `scaling`.

    Non-finite logits: NaN counts as `-inf` and `+inf` as the largest finite
    f32. A row whose selected scores are all zero gets weights 0, never NaN,
    and its ids stay distinct.

    Constraints: `E % n_group == 0`, `1 <= topk_group <= n_group`,
    `1 <= k <= topk_group * E / n_group`, `bias` has length `E`, `top2_sum`
    needs at least two experts per group, `scaling` is finite. The weights'
    element type `W` is any float type (usually the logits' type or f32).

    Follows `gating_softmax_topk` and `group_limited_greedy_topk` of the
    TVM/MLC-LLM MoE operators (`group_limited_greedy` = softmax + `max`,
    `noaux_tc` = sigmoid + bias + `top2_sum`).

    Example (DeepSeek-V3 style):

    ```mlir
    %w, %ids = moe.route %logits bias(%b : tensor<256xf32>) k = 8
        scoring = sigmoid
        {normalize = true, n_group = 8 : i64, topk_group = 4 : i64,
         group_score = #moe.group_score<top2_sum>, scaling = 2.5 : f32}
        : tensor<?x256xf32> -> tensor<?x8xf32>, tensor<?x8xi32>
    ```
  }];
  let arguments = !con((ins Moe_FloatTensorOfRank<2>:$logits,
                            Optional<Moe_F32Vector>:$bias),
                       Moe_RoutingAttrs);
  let results = (outs Moe_FloatTensorOfRank<2>:$weights,
                      Moe_IndexTensorOfRank<2>:$indices);
  let assemblyFormat = [{
    $logits (`bias` `(` $bias^ `:` type($bias) `)`)? `k` `=` $k
    `scoring` `=` custom<EnumKeyword>($scoring) attr-dict `:` type($logits)
    `->` type($weights) `,` type($indices)
  }];
}

def Moe_RouteGradOp : Moe_Op<"route_grad"> {
  let summary = "gradient of moe.route's weights with respect to the logits";
  let description = [{
    The backward of `moe.route`: given `grad` (`T x k`, the gradient of the
    loss with respect to the routing weights), the forward's `logits` (`T x
    E`) and its selection `indices` (`T x k`), returns the gradient with
    respect to `logits` (`T x E`). The selection itself (top-k, the
    group limit, the score-correction bias) has no gradient, so only
    `scoring`, `normalize` and `scaling` of the forward are needed; all in
    f32 per row:

    1. `s` = the forward's unbiased scores (softmax or sigmoid of the
       sanitised logits, as `moe.route`).
    2. `S = sum_j s[indices[j]]`; with `normalize` and `S > 0`, `ds[i] +=
       scaling * (grad[j] - D / S) / S` at `i = indices[j]`, `D = sum_j
       grad[j] s[indices[j]]`; else `ds[i] += scaling * grad[j]`. Ids
       outside `[0, E)` take no part (also not in `S`).
    3. softmax: `result = s * (ds - sum_e ds[e] s[e])`; sigmoid: `result =
       ds * s * (1 - s)`.

    Constraints: `E` and `k` static, `grad` and `indices` are `T x k`, the
    result is `T x E` of the logits' element type or f32, `scaling` finite.

    Example (DeepSeek-V3: the forward's bias and groups do not matter here):

    ```mlir
    %dl = moe.route_grad %dw, %logits, %ids scoring = sigmoid
        {normalize = true, scaling = 2.5 : f32}
        : tensor<?x8xf32>, tensor<?x256xf32>, tensor<?x8xi32> -> tensor<?x256xf32>
    ```
  }];
  let arguments = (ins Moe_FloatTensorOfRank<2>:$grad,
                       Moe_FloatTensorOfRank<2>:$logits,
                       Moe_IndexTensorOfRank<2>:$indices,
                       Moe_ScoringAttr:$scoring,
                       DefaultValuedAttr<BoolAttr, "false">:$normalize,
                       DefaultValuedAttr<F32Attr, "1.0f">:$scaling);
  let results = (outs Moe_FloatTensorOfRank<2>:$result);
  let assemblyFormat = [{
    $grad `,` $logits `,` $indices `scoring` `=` custom<EnumKeyword>($scoring)
    attr-dict `:` type($grad) `,` type($logits) `,` type($indices) `->`
    type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Dispatch metadata
//===----------------------------------------------------------------------===//

def Moe_CumsumOp : Moe_InferredOp<"cumsum"> {
  let summary = "expert-major inclusive prefix sum of the dispatch mask";
  let description = [{
    `mask[t][e]` counts the slots of row `t` of `indices` (`T x k`) that name
    expert `e`. The result (`E*T`, dynamic when `T` is) is the inclusive
    prefix sum of `mask` transposed to expert-major order and flattened:
    position `e*T + t`. Ids outside `[0, E)` (for example -1 for an expert
    that is not local) are not counted.

    Constraints: `num_experts >= 1`, `k` static, static `E*T < 2^31`.

    Follows `moe_cumsum` of the TVM/MLC-LLM MoE operators. With
    `indices = [[0, 1], [1, 2], [3, 4], [2, 5]]` and `num_experts = 6` the
    result is `[1,1,1,1, 2,3,3,3, 3,4,4,5, 5,5,6,6, 6,6,7,7, 7,7,7,8]`.

    Example:

    ```mlir
    %cs = moe.cumsum %ids num_experts = 6 : tensor<4x2xi32> -> tensor<24xi32>
    ```
  }];
  let arguments = (ins Moe_IndexTensorOfRank<2>:$indices, I64Attr:$num_experts);
  let results = (outs Moe_IndexTensorOfRank<1>:$result);
  let assemblyFormat = [{
    $indices `num_experts` `=` $num_experts attr-dict `:` type($indices) `->`
    type($result)
  }];
}

def Moe_GetIndicesOp : Moe_InferredOp<"get_indices"> {
  let summary = "expert-grouped permutation of the (token, slot) pairs";
  let description = [{
    For every token `b` and slot `j` with `e = indices[b][j]` in `[0, E)` and
    `p = cumsum[e*T + b] - 1`: `reverse_indices[p] = b*k + j` and
    `token_indices[p] = b`. Rows end up grouped by expert, experts ascending,
    tokens ascending inside an expert. `E` is `size(cumsum) / T`.

    Beyond the seed: if one row names an expert twice, those slots take
    consecutive positions in slot order (ending at `p`); slots whose id is
    outside `[0, E)` are not dispatched and take the positions after all
    dispatched rows, in `(b, j)` order. `reverse_indices` is therefore always
    a permutation of `[0, T*k)`. Both results have `T*k` elements.

    Constraints: `k` static; when both sizes are static, `size(cumsum)` is a
    multiple of `T` (for `T > 0`).

    Follows `get_indices` of the TVM/MLC-LLM MoE operators.

    Example:

    ```mlir
    %rev, %tok = moe.get_indices %cs, %ids
        : tensor<?xi32>, tensor<?x2xi32> -> tensor<?xi32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins Moe_IndexTensorOfRank<1>:$cumsum,
                       Moe_IndexTensorOfRank<2>:$indices);
  let results = (outs Moe_IndexTensorOfRank<1>:$reverse_indices,
                      Moe_IndexTensorOfRank<1>:$token_indices);
  let assemblyFormat = [{
    $cumsum `,` $indices attr-dict `:` type($cumsum) `,` type($indices) `->`
    type($reverse_indices) `,` type($token_indices)
  }];
}

def Moe_GetIndptrOp : Moe_Op<"get_indptr"> {
  let summary = "per-expert row offsets from the dispatch cumsum";
  let description = [{
    Reads the end offset of each expert group from `cumsum` (`E*T`):
    `end_e = cumsum[(e+1)*T - 1]` (0 when `T = 0`). With
    `inclusive = false` the result is `[0, end_0, ..., end_(E-1)]`
    (`E+1` elements, the exclusive offsets `moe.grouped_matmul` takes); with
    `inclusive = true` it is `[end_0, ..., end_(E-1)]` (`E` elements). The
    element type `R` is `i32` or `i64`.

    Constraints: `num_experts >= 1`; a static `cumsum` length is a multiple
    of `num_experts`.

    Follows `get_indptr` of the TVM/MLC-LLM MoE operators.

    Example:

    ```mlir
    %offsets = moe.get_indptr %cs num_experts = 8 : tensor<?xi32> -> tensor<9xi32>
    %ends = moe.get_indptr %cs num_experts = 8 {inclusive = true}
        : tensor<?xi32> -> tensor<8xi64>
    ```
  }];
  let arguments = (ins Moe_IndexTensorOfRank<1>:$cumsum, I64Attr:$num_experts,
                       DefaultValuedAttr<BoolAttr, "false">:$inclusive);
  let results = (outs TensorRankOf<[I32, I64], [1]>:$result);
  let assemblyFormat = [{
    $cumsum `num_experts` `=` $num_experts attr-dict `:` type($cumsum) `->`
    type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Moe_GatherOp : Moe_InferredOp<"gather"> {
  let summary = "gather rows: out[m] = input[indices[m]]";
  let description = [{
    `out[m] = input[indices[m]]` for `input` (`T x H`) and `indices` (`M`).
    An index outside `[0, T)` yields a zero row; nothing is ever read out of
    bounds. `H` must be static.

    Example:

    ```mlir
    %rows = moe.gather %x[%tok] : tensor<?x64xbf16>, tensor<?xi32> -> tensor<?x64xbf16>
    ```
  }];
  let arguments = (ins Moe_FloatTensorOfRank<2>:$input,
                       Moe_IndexTensorOfRank<1>:$indices);
  let results = (outs Moe_FloatTensorOfRank<2>:$result);
  let assemblyFormat = [{
    $input `[` $indices `]` attr-dict `:` type($input) `,` type($indices) `->`
    type($result)
  }];
}

def Moe_ScatterOp : Moe_InferredOp<"scatter"> {
  let summary = "scatter rows: out[indices[i]] = input[i]";
  let description = [{
    `out[indices[i]] = input[i]` for `input` (`M x H`) and `indices` (`M`).
    Rows that nothing writes are zero; an index outside `[0, M)` drops that
    row. When two rows name the same destination the later one (higher `i`)
    wins. `H` must be static.

    Follows `scatter_output` of the TVM/MLC-LLM MoE operators.

    Example:

    ```mlir
    %out = moe.scatter %y[%rev] : tensor<?x64xbf16>, tensor<?xi32> -> tensor<?x64xbf16>
    ```
  }];
  let arguments = (ins Moe_FloatTensorOfRank<2>:$input,
                       Moe_IndexTensorOfRank<1>:$indices);
  let results = (outs Moe_FloatTensorOfRank<2>:$result);
  let assemblyFormat = [{
    $input `[` $indices `]` attr-dict `:` type($input) `,` type($indices) `->`
    type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Expert compute
//===----------------------------------------------------------------------===//

def Moe_GroupedMatmulOp : Moe_Op<"grouped_matmul"> {
  let summary = "matmul over ragged, contiguous expert row groups";
  let description = [{
    Row `m` of `lhs` (`M x K`) with `offsets[e] <= m < offsets[e+1]` is
    multiplied by expert `e`'s matrix: `rhs[e]` (`E x K x N`), or its
    transpose when `transpose_rhs` (`rhs` is `E x N x K`, the `x @ w^T`
    "linear" layout), plus `bias[e]` (`E x N`) when given. Products are
    accumulated in f32 and the result (`M x N`) has element type `O`, either
    the operands' type `F` or `f32`.

    `offsets` (`E+1`, i32) are the exclusive offsets `moe.get_indptr`
    produces. Rows outside `[offsets[0], offsets[E])` are zero, so are rows
    of empty experts' ranges; offsets are clamped to `[0, M]` at run time
    and a decreasing pair is an empty group.

    Constraints: `K`, `N`, `E` static; `lhs`, `rhs` and `bias` share `F`.

    Low-precision weights (`weight_format`, absent: `plain`), as the
    checkpoints ship them, always in the `x @ w^T` layout
    (`transpose_rhs`), with their scales in `rhs_scale`; no wider copy of
    the weights is ever made:

    - `fp8_block` (DeepSeek-V3, Qwen3-FP8): `rhs` is `E x N x K` of
      `f8E4M3FN`, `rhs_scale` `E x ceil(N/128) x ceil(K/128)` f32 (one
      factor per 128 x 128 block, multiplied in: a checkpoint's
      `weight_scale_inv`). Row `m` of `lhs` is quantized per 128 columns
      (`g = k / 128`, the last group partial when `K % 128 != 0`):
      `amax = max(max_{k in g} |lhs[m, k]|, 1e-4)`, `s = amax / 448`,
      rounded up to a power of two when `scale_fmt = ue8m0` (DeepSeek-V3.1),
      `q[m, k] = e4m3(lhs[m, k] / s)` (round to nearest even). Then
      `result[m, n] = sum_g s[m, g] * rhs_scale[e, n / 128, g] *
      sum_{k in g} q[m, k] * rhs[e, n, k]`, accumulated in f32.
    - `mxfp4` (gpt-oss): `rhs` is `E x N x K/2` of `i8`, two e2m1 values a
      byte (element `2j` in the low nibble of byte `j`, `2j + 1` in the
      high one; code `c` is `(-1)^(c >> 3) * [0, .5, 1, 1.5, 2, 3, 4,
      6][c & 7]`), `rhs_scale` `E x N x K/32` of `f8E8M0FNU` (the factor
      `2^(s - 127)` of each 32 consecutive K; 255 is NaN); `K % 32 == 0`.
      `lhs` is used as it is: `result[m, n] = sum_k lhs[m, k] *
      e2m1(rhs[e, n, k]) * 2^(rhs_scale[e, n, k / 32] - 127)`.
    - `mxfp4_hopper`: `mxfp4` with each 32-value block's codes (its 16
      bytes) in the order of the Hopper kernels' register fragments, so
      that a GPU thread decodes its values from one 4-byte word by shifts
      and masks (1.4 - 1.6x faster than `mxfp4` on an H100): value `kk`
      of a block lives in its little-endian word `q = (kk / 2) % 4`; with
      `p = kk / 8` and `h = 16 * (kk % 2)` its code bits (m, e0, e1, s:
      bit 0 to 3 of the e2m1 code) sit at word bits `h + (6, 7, 8, 15) -
      3 p` for `p < 3` and `h + (13, 14, 10, 11)` for `p = 3`. Made once
      at load from gpt-oss's bytes by
      `moe_mlir_runtime.mxfp4.repack_mxfp4_hopper`; scales, shapes and
      results are `mxfp4`'s.

    `bias` stays `F`. In the custom form the scales are written
    `scales(%s : type)` after the bias.

    Follows `matmul_ogs` of triton_kernels (without gather/scatter) and the
    expert loop of a C++ expert-GEMM dispatch.

    Example:

    ```mlir
    %h = moe.grouped_matmul %rows, %w_up offsets(%off : tensor<9xi32>)
        : tensor<?x64xbf16>, tensor<8x64x256xbf16> -> tensor<?x256xf32>
    ```
  }];
  let arguments = !con((ins Moe_FloatTensorOfRank<2>:$lhs,
                            Moe_WeightTensorOfRank<3>:$rhs,
                            Moe_IndexTensorOfRank<1>:$offsets,
                            Variadic<AnyRankedTensor>:$optional_operands,
                            DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs),
                       Moe_WeightFormatAttrs);
  let results = (outs Moe_FloatTensorOfRank<2>:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `offsets` `(` $offsets `:` type($offsets) `)`
    custom<GemmOptionalOperands>($optional_operands, type($optional_operands))
    attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// The optional operands by name (null when absent): the bias
    /// (E x N) and the weight scales (weight_format other than plain;
    /// always the last operand then).
    Value getBias();
    Value getRhsScale();
    /// The weight format.
    WeightFormat getFormat() { return getWeightFormat(); }
  }];
}

def Moe_GluOp : Moe_InferredOp<"glu"> {
  let summary = "gated linear unit: act(gate) * (up + up_bias)";
  let description = [{
    Splits every row of `input` (`M x 2N`) into a gate and an up half
    (`layout = concat`: gate = first `N` columns, up = last `N`;
    `interleaved`: gate = even columns, up = odd ones) and returns
    `act(gate) * (up + up_bias)` (`M x N`), computed in f32.

    `activation`: `silu` (`x * sigmoid(alpha * x)`), `gelu` (erf form) or
    `gelu_tanh` (tanh approximation). When `limit` is given the gate is
    clamped to `<= limit` and up to `[-limit, limit]` before use
    (gpt-oss's SwiGLU: `alpha = 1.702`, `limit = 7.0`, `up_bias = 1.0`).

    Constraints: the input's column count is static and even; `alpha` and
    `up_bias` are finite; `limit`, when given, is finite and `> 0`.

    Follows `silu_and_mul` of a C++ expert loop (silu, concat) and the
    swiglu fused activation of triton_kernels (interleaved, alpha, limit).

    Example:

    ```mlir
    %a = moe.glu %h silu interleaved {alpha = 1.702 : f32, limit = 7.0 : f32,
                                      up_bias = 1.0 : f32}
        : tensor<?x256xbf16> -> tensor<?x128xbf16>
    ```
  }];
  let arguments = !con((ins Moe_FloatTensorOfRank<2>:$input,
                            Moe_ActivationAttr:$activation,
                            Moe_GluLayoutAttr:$layout),
                       Moe_GluParamAttrs);
  let results = (outs Moe_FloatTensorOfRank<2>:$result);
  let assemblyFormat = [{
    $input custom<EnumKeyword>($activation) custom<EnumKeyword>($layout)
    attr-dict `:` type($input) `->` type($result)
  }];
}

def Moe_GluGradOp : Moe_InferredOp<"glu_grad"> {
  let summary = "gradient of moe.glu with respect to its input";
  let description = [{
    The backward of `moe.glu` with the same attributes: given `grad` (`M x
    N`, the gradient of the loss with respect to the glu's result) and the
    glu's `input` (`M x 2N`, the pre-activation, saved by the forward),
    returns the gradient with respect to `input` (`M x 2N`, the same
    layout), computed in f32. With `gate`, `up` the halves of a row as
    `moe.glu` splits them and, when `limit` is given, `g = min(gate, limit)`,
    `u = clamp(up, -limit, limit)` (else `g = gate`, `u = up`):

    - `d gate = grad * (u + up_bias) * act'(g)`, zero where `gate > limit`;
    - `d up = grad * act(g)`, zero where `up` is outside `[-limit, limit]`

    (a clamp passes the gradient where its input is inside the closed
    interval, as `torch.clamp` does). `act'`: silu `s(a x) + a x s(a x)
    (1 - s(a x))` with `s` the sigmoid and `a = alpha`; gelu `Phi(x) + x
    phi(x)`; gelu_tanh the derivative of its tanh form.

    Constraints: those of `moe.glu`; `grad` has the input's rows, half its
    columns and its element type.

    Example (gpt-oss's SwiGLU):

    ```mlir
    %dh = moe.glu_grad %da, %h silu interleaved {alpha = 1.702 : f32,
                                                 limit = 7.0 : f32,
                                                 up_bias = 1.0 : f32}
        : tensor<?x128xbf16>, tensor<?x256xbf16> -> tensor<?x256xbf16>
    ```
  }];
  let arguments = !con((ins Moe_FloatTensorOfRank<2>:$grad,
                            Moe_FloatTensorOfRank<2>:$input,
                            Moe_ActivationAttr:$activation,
                            Moe_GluLayoutAttr:$layout),
                       Moe_GluParamAttrs);
  let results = (outs Moe_FloatTensorOfRank<2>:$result);
  let assemblyFormat = [{
    $grad `,` $input custom<EnumKeyword>($activation)
    custom<EnumKeyword>($layout) attr-dict `:` type($grad) `,` type($input)
    `->` type($result)
  }];
}

def Moe_GroupedMatmulWgradOp : Moe_Op<"grouped_matmul_wgrad",
                                       [AttrSizedOperandSegments]> {
  let summary = "the grouped matmul's ragged-contracting mode: weight gradients";
  let description = [{
    The weight gradient of `moe.grouped_matmul`: the rows of `lhs` (`M x
    K`) and `rhs` (`M x N`) are grouped by `offsets` (`E+1`, i32, as
    `moe.grouped_matmul` takes them) and each group's rows are contracted:

    `result[e] = acc[e] + sum_{lo_e <= m < hi_e} lhs[m]^T rhs[m]`

    (`E x K x N`), with `lo_e = clamp(offsets[e], 0, M)`, `hi_e =
    clamp(offsets[e+1], 0, M)` and an empty group where `hi_e <= lo_e`: its
    slice is exactly `acc[e]`, or zero. Products are accumulated in f32; the
    result has element type `O`, the operands' type `F` or `f32`.
    `moe.grouped_matmul` is the ragged-noncontracting mode (the forward and,
    with the weights transposed, the input gradient); this op is XLA
    `ragged_dot`'s ragged-contracting one.

    For the forward `y = moe.grouped_matmul x, w` with `w` `E x K x N`,
    `dw = moe.grouped_matmul_wgrad x, dy`; with `transpose_rhs` (`w` `E x
    N x K`, the `x @ w^T` layout), `dw = moe.grouped_matmul_wgrad dy, x`.

    `accumulate(%acc : tensor<E x K x N x f32>)`, optional, adds into a
    running f32 gradient (Megatron's `main_grad`); the result is f32 then.

    Gathered operands, optional: `%lhs[%idx : tensor<M x i32>]` contracts
    row `lhs[idx[m]]` as row `m` (zero when `idx[m]` is outside `lhs`'s
    rows), likewise `%rhs[%idx]`; `M` is then the indices' length. This is
    `moe.gather` fused into the contraction's row (token) loop: a layer's
    up-projection gradient reads the token rows of `x` in expert order
    without a gathered copy. Produced by `--moe-fuse-gather-matmul`.

    Constraints: `K`, `N`, `E` static; `lhs` and `rhs` share `F`, and
    their (gathered) row counts `M`.

    Examples (nn.Linear layout, 8 experts):

    ```mlir
    %dw = moe.grouped_matmul_wgrad %dy, %x offsets(%off : tensor<9xi32>)
        : tensor<?x256xbf16>, tensor<?x64xbf16> -> tensor<8x256x64xf32>
    %dw_up = moe.grouped_matmul_wgrad %dh, %x[%tok : tensor<?xi32>]
        offsets(%off : tensor<9xi32>)
        : tensor<?x256xbf16>, tensor<?x64xbf16> -> tensor<8x256x64xf32>
    ```
  }];
  let arguments = (ins Moe_FloatTensorOfRank<2>:$lhs,
                       Optional<Moe_IndexTensorOfRank<1>>:$lhs_gather,
                       Moe_FloatTensorOfRank<2>:$rhs,
                       Optional<Moe_IndexTensorOfRank<1>>:$rhs_gather,
                       Moe_IndexTensorOfRank<1>:$offsets,
                       Optional<TensorRankOf<[F32], [3]>>:$acc);
  let results = (outs Moe_FloatTensorOfRank<3>:$result);
  let assemblyFormat = [{
    $lhs (`[` $lhs_gather^ `:` type($lhs_gather) `]`)? `,`
    $rhs (`[` $rhs_gather^ `:` type($rhs_gather) `]`)?
    `offsets` `(` $offsets `:` type($offsets) `)`
    (`accumulate` `(` $acc^ `:` type($acc) `)`)? attr-dict `:` type($lhs)
    `,` type($rhs) `->` type($result)
  }];
  let builders = [
    // Ungathered operands.
    OpBuilder<(ins "Type":$result, "Value":$lhs, "Value":$rhs,
                   "Value":$offsets, "Value":$acc), [{
      build($_builder, $_state, result, lhs, /*lhs_gather=*/Value(), rhs,
            /*rhs_gather=*/Value(), offsets, acc);
    }]>
  ];
}

def Moe_RowDotOp : Moe_Op<"row_dot"> {
  let summary = "per-row dot product of two matrices";
  let description = [{
    `result[m] = acc[m] + sum_n lhs[m][n] * rhs[m][n]` for `lhs` and `rhs`
    (`M x N`, one float type `F`), the products accumulated in f32 (the
    CPU lowering in column order; the GPU kernel per lane of a warp, then
    a fixed butterfly: the same bits on every call); the result (`M`) has
    element type `F` or f32.
    `accumulate(%acc : tensor<M x f32>)`, optional, adds into a running f32
    vector (the result is f32 then).

    In a layer's backward this is the routing weight's gradient of every
    dispatched row, `<dO W2^T, a>` (the down projection's input gradient
    against the GLU output), plus `<dO, b2>` through `acc` when the experts
    have biases: the expert outputs are never needed.

    Constraints: `N` static; `lhs` and `rhs` share `F`, `M` and `N`;
    `acc` is `M` of f32.

    Example:

    ```mlir
    %dw = moe.row_dot %g, %a accumulate(%db : tensor<?xf32>)
        : tensor<?x128xbf16>, tensor<?x128xbf16> -> tensor<?xf32>
    ```
  }];
  let arguments = (ins Moe_FloatTensorOfRank<2>:$lhs,
                       Moe_FloatTensorOfRank<2>:$rhs,
                       Optional<Moe_F32Vector>:$acc);
  let results = (outs Moe_FloatTensorOfRank<1>:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`accumulate` `(` $acc^ `:` type($acc) `)`)? attr-dict `:`
    type($lhs) `,` type($rhs) `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Combine and converters
//===----------------------------------------------------------------------===//

def Moe_CombineOp : Moe_InferredOp<"combine"> {
  let summary = "weighted k-way sum of expert outputs, in slot order";
  let description = [{
    `out[t] = sum_j weights[t][j] * input[t][j]` for `input` (`T x k x H`)
    and the optional `weights` (`T x k`, any float type `W`); without
    weights it is the plain sum. The sum is accumulated in f32 in slot order
    `j = 0, 1, ..., k-1`, so results are deterministic. The result has the
    input's element type.

    Constraints: `k` and `H` static; `weights` is `T x k`.

    Follows `moe_sum` of the TVM/MLC-LLM MoE operators and the weighted
    accumulate of a C++ expert loop.

    Example:

    ```mlir
    %y = moe.combine %parts weights(%w : tensor<?x2xf32>)
        : tensor<?x2x64xbf16> -> tensor<?x64xbf16>
    ```
  }];
  let arguments = (ins Moe_FloatTensorOfRank<3>:$input,
                       Optional<Moe_FloatTensorOfRank<2>>:$weights);
  let results = (outs Moe_FloatTensorOfRank<2>:$result);
  let assemblyFormat = [{
    $input (`weights` `(` $weights^ `:` type($weights) `)`)? attr-dict `:`
    type($input) `->` type($result)
  }];
}

def Moe_CombineGradOp : Moe_Op<"combine_grad"> {
  let summary = "transpose of moe.combine with respect to its input";
  let description = [{
    The gradient of `moe.combine`'s result with respect to its `input`:
    given `grad` (`T x H`, the gradient of the loss with respect to the
    combined rows) and the forward's optional `weights` (`T x k`, any float
    type), `result[t][j] = weights[t][j] * grad[t]` (`T x k x H`, every
    slot `grad[t]` without weights), the product in f32 rounded to the
    element type of `grad`. `k` is the result's dimension 1.

    The gradient with respect to the weights, `<grad[t], input[t][j]>`,
    needs the expert outputs the forward combined; a layer's backward takes
    it from the down projection's input gradient instead (`<grad[t] W2,
    a>`, with `a` the GLU output, which is recomputed), so it is not this
    op's result.

    Constraints: `H` and `k` static, `k >= 1`; the result is `T x k x H`
    of `grad`'s element type; `weights` is `T x k`.

    Example:

    ```mlir
    %dparts = moe.combine_grad %dy weights(%w : tensor<?x4xf32>)
        : tensor<?x64xbf16> -> tensor<?x4x64xbf16>
    ```
  }];
  let arguments = (ins Moe_FloatTensorOfRank<2>:$grad,
                       Optional<Moe_FloatTensorOfRank<2>>:$weights);
  let results = (outs Moe_FloatTensorOfRank<3>:$result);
  let assemblyFormat = [{
    $grad (`weights` `(` $weights^ `:` type($weights) `)`)? attr-dict `:`
    type($grad) `->` type($result)
  }];
}

def Moe_IndicesToMultihotOp : Moe_InferredOp<"indices_to_multihot"> {
  let summary = "top-k ids and probabilities to multi-hot form";
  let description = [{
    From `indices` (`T x k`) and `probs` (`T x k`), builds per row `t`:
    `multihot[t][e]` (`i1`) true when some slot names expert `e`,
    `probs_multihot[t][e]` that slot's probability (else 0), and
    `position_map[t][e]` that slot's index `j` (else -1). Ids `< 0` or
    `>= num_experts` (not local) are ignored. When a row names an expert
    twice, the later slot wins.

    Constraints: `num_experts >= 1`, `k` static, `probs` is `T x k`.

    Follows the forward pass of Megatron-Core's fused indices converter.

    Example:

    ```mlir
    %mh, %pm, %pos = moe.indices_to_multihot %ids, %probs num_experts = 8
        : tensor<?x2xi32>, tensor<?x2xf32>
        -> tensor<?x8xi1>, tensor<?x8xf32>, tensor<?x8xi32>
    ```
  }];
  let arguments = (ins Moe_IndexTensorOfRank<2>:$indices,
                       Moe_FloatTensorOfRank<2>:$probs,
                       I64Attr:$num_experts);
  let results = (outs TensorRankOf<[I1], [2]>:$multihot,
                      Moe_FloatTensorOfRank<2>:$probs_multihot,
                      Moe_IndexTensorOfRank<2>:$position_map);
  let assemblyFormat = [{
    $indices `,` $probs `num_experts` `=` $num_experts attr-dict `:`
    type($indices) `,` type($probs) `->` type($multihot) `,`
    type($probs_multihot) `,` type($position_map)
  }];
}

def Moe_MultihotToIndicesOp : Moe_InferredOp<"multihot_to_indices"> {
  let summary = "multi-hot probabilities back to top-k slot order";
  let description = [{
    `probs[t][position_map[t][e]] = probs_multihot[t][e]` for every `e` with
    `0 <= position_map[t][e] < k`; slots no expert maps to are zero. When
    two experts map to the same slot, the higher expert index wins.

    Constraints: `k >= 1`; `E` static; both operands are `T x E`.

    Follows the backward pass of Megatron-Core's fused indices converter.

    Example:

    ```mlir
    %p = moe.multihot_to_indices %pm, %pos k = 2
        : tensor<?x8xf32>, tensor<?x8xi32> -> tensor<?x2xf32>
    ```
  }];
  let arguments = (ins Moe_FloatTensorOfRank<2>:$probs_multihot,
                       Moe_IndexTensorOfRank<2>:$position_map,
                       I64Attr:$k);
  let results = (outs Moe_FloatTensorOfRank<2>:$probs);
  let assemblyFormat = [{
    $probs_multihot `,` $position_map `k` `=` $k attr-dict `:`
    type($probs_multihot) `,` type($position_map) `->` type($probs)
  }];
}

//===----------------------------------------------------------------------===//
// Composite
//===----------------------------------------------------------------------===//

def Moe_FfnOp : Moe_InferredOp<"ffn"> {
  let summary = "a whole MoE feed-forward layer";
  let description = [{
    Computes exactly the primitive chain

    ```
    route -> cumsum -> get_indices -> get_indptr -> gather(token_indices)
      -> grouped_matmul(w_up) -> glu -> grouped_matmul(w_down)
      -> scatter(reverse_indices) -> reshape to T x k x H -> combine(weights)
    ```

    on `x` (`T x H`) and `logits` (`T x E`), with `w_up` (`E x H x 2I`, or
    `E x 2I x H` when `transpose_weights`), `w_down` (`E x I x H`, or
    `E x H x I` when `transpose_weights`), the optional routing `bias`
    (`E`, f32) and, when `expert_bias` is true, the per-expert matmul
    biases `w_up_bias` (`E x 2I`) and `w_down_bias` (`E x H`), as gpt-oss
    has: the first GEMM adds `w_up_bias[e]` before the activation, the
    second adds `w_down_bias[e]` before the routing weight scales the row.
    It carries every `moe.route` attribute and every `moe.glu` attribute,
    with the same meaning and defaults. `--moe-decompose` expands it into
    the chain; a frontend emits this one op and the compiler owns everything
    below it.

    Constraints: all of `moe.route`'s and `moe.glu`'s; `x`, `w_up`,
    `w_down` and the expert biases share one float type `F`; `logits` are
    `F` or f32 (the router may run in f32 on bf16 / f16 activations, as
    DeepSeek-V3's does); `H`, `I`, `E` static and consistent across the
    operands. After `w_down` come the optional operands in this order:
    `bias`, then `w_up_bias` and `w_down_bias`; the routing bias is present
    exactly when there are 5 operands without the expert biases or 7 with
    them (modules written before `expert_bias` parse unchanged). In the
    custom form the expert biases are written
    `expert_bias(%w_up_bias, %w_down_bias : type, type)` after the routing
    bias, and set `expert_bias`.

    Low-precision weights: `weight_format` (`fp8_block`, `mxfp4` or `mxfp4_hopper`, with
    `transpose_weights`) and `scale_fmt` have `moe.grouped_matmul`'s
    meaning for both GEMMs; `w_up` and `w_down` are then in that format
    (for the mxfp4 formats their last dimension holds two values a byte: `E x 2I x
    H/2` and `E x H x I/2` of `i8`), and their scales `w_up_scale`,
    `w_down_scale` come last among the optional operands, written
    `scales(%w_up_scale, %w_down_scale : type, type)`. The expert biases
    stay `F`.

    Example (Mixtral-style, T dynamic):

    ```mlir
    %y = moe.ffn %x, %logits, %w_up, %w_down k = 2 scoring = softmax
        activation = silu layout = concat {normalize = true}
        : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>,
          tensor<8x128x64xbf16> -> tensor<?x64xbf16>
    ```
  }];
  let arguments = !con((ins Moe_FloatTensorOfRank<2>:$x,
                            Moe_FloatTensorOfRank<2>:$logits,
                            Moe_WeightTensorOfRank<3>:$w_up,
                            Moe_WeightTensorOfRank<3>:$w_down,
                            Variadic<AnyRankedTensor>:$optional_operands),
                       Moe_RoutingAttrs,
                       (ins Moe_ActivationAttr:$activation,
                            Moe_GluLayoutAttr:$layout),
                       Moe_GluParamAttrs,
                       (ins DefaultValuedAttr<BoolAttr, "false">:$transpose_weights,
                            DefaultValuedAttr<BoolAttr, "false">:$expert_bias),
                       Moe_WeightFormatAttrs);
  let results = (outs Moe_FloatTensorOfRank<2>:$result);
  let assemblyFormat = [{
    $x `,` $logits `,` $w_up `,` $w_down
    custom<FfnOptionalOperands>($optional_operands, type($optional_operands),
                                $expert_bias)
    `k` `=` $k `scoring` `=` custom<EnumKeyword>($scoring)
    `activation` `=` custom<EnumKeyword>($activation)
    `layout` `=` custom<EnumKeyword>($layout) attr-dict `:` type($x) `,`
    type($logits) `,` type($w_up) `,` type($w_down) `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// The expert count E.
    int64_t getNumExperts() { return getLogits().getType().getDimSize(1); }
    /// The expert intermediate size I (half of w_up's output width).
    int64_t getIntermediateSize();
    /// The hidden size H.
    int64_t getHiddenSize() { return getX().getType().getDimSize(1); }
    /// The optional operands by name (null when absent): the routing bias
    /// (E, f32) and the expert biases (E x 2I, E x H; expert_bias).
    Value getBias();
    Value getWUpBias();
    Value getWDownBias();
    /// The weight scales (weight_format other than plain), else null.
    Value getWUpScale();
    Value getWDownScale();
    /// The weight format.
    WeightFormat getFormat() { return getWeightFormat(); }
  }];
}

def Moe_FfnTrainOp : Moe_InferredOp<"ffn_train"> {
  let summary = "moe.ffn that also returns what its backward needs saved";
  let description = [{
    The training forward of a MoE layer: exactly `moe.ffn`'s operands,
    attributes and custom syntax, and four results:

    - `y` (`T x H` of `F`): `moe.ffn`'s result, computed by the same chain
      (bitwise the same values),
    - `h` (`(T*k) x 2I` of `F`): the up projection's pre-activation,
      `grouped_matmul(gather(x), w_up)` plus `w_up_bias`, in the chain's
      dispatched row order (`moe.get_indices`: grouped by expert, experts
      ascending, tokens ascending inside an expert), before the GLU,
    - `weights` (`T x k`, f32) and `indices` (`T x k`, i32): the routing
      result, as `moe.route` returns it inside the chain.

    `moe.ffn_grad ... saved(%h, %weights, %indices : ...)` takes these
    three instead of recomputing the routing and the up GEMM; the dispatch
    order and offsets (cumsum, get_indices, get_indptr) follow from
    `indices`, and the activation is recomputed from `h`. `h` is kept in
    dispatch order because that is the order both of the backward's grouped
    GEMMs read it in.

    Saved bytes per token: `k * 2I * sizeof(F) + 8k` (`h`, then 4 bytes of
    f32 weight and 4 of i32 id per slot), beside `x`'s `H * sizeof(F)` that
    the caller keeps anyway. Nothing of size `H` per slot is saved: the
    routing weights' gradient is `<dO W2^T, glu(h)>` (+ `<dO, b_down>`),
    never a saved expert output. For Mixtral-8x7B (`H` 4096, `I` 14336,
    `k` 2, bf16) that is 114,704 bytes per token beside `x`'s 8,192; for
    Qwen3-30B-A3B (`H` 2048, `I` 768, `k` 8) 24,640 beside 4,096.

    Constraints: all of `moe.ffn`'s, with plain weights only (training on
    quantized weights is out of scope, as for `moe.ffn_grad`); the results
    have the types above (`h`'s rows are `T * k`, dynamic when `T` is).
    `--moe-decompose` expands it into `moe.ffn`'s chain (one shared
    builder) and returns the chain's `grouped_matmul(w_up)`, `moe.route`
    weights and ids beside `y`.

    Example (Mixtral-style, T dynamic: 2 * 256 * 2 + 16 = 1040 saved bytes
    per token):

    ```mlir
    %y, %h, %w, %ids = moe.ffn_train %x, %logits, %w_up, %w_down k = 2
        scoring = softmax activation = silu layout = concat
        {normalize = true}
        : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>,
          tensor<8x128x64xbf16>
        -> tensor<?x64xbf16>, tensor<?x256xbf16>, tensor<?x2xf32>,
           tensor<?x2xi32>
    ```
  }];
  let arguments = !con((ins Moe_FloatTensorOfRank<2>:$x,
                            Moe_FloatTensorOfRank<2>:$logits,
                            Moe_WeightTensorOfRank<3>:$w_up,
                            Moe_WeightTensorOfRank<3>:$w_down,
                            Variadic<AnyRankedTensor>:$optional_operands),
                       Moe_RoutingAttrs,
                       (ins Moe_ActivationAttr:$activation,
                            Moe_GluLayoutAttr:$layout),
                       Moe_GluParamAttrs,
                       (ins DefaultValuedAttr<BoolAttr, "false">:$transpose_weights,
                            DefaultValuedAttr<BoolAttr, "false">:$expert_bias),
                       Moe_WeightFormatAttrs);
  let results = (outs Moe_FloatTensorOfRank<2>:$y,
                      Moe_FloatTensorOfRank<2>:$h,
                      TensorRankOf<[F32], [2]>:$weights,
                      Moe_IndexTensorOfRank<2>:$indices);
  let assemblyFormat = [{
    $x `,` $logits `,` $w_up `,` $w_down
    custom<FfnOptionalOperands>($optional_operands, type($optional_operands),
                                $expert_bias)
    `k` `=` $k `scoring` `=` custom<EnumKeyword>($scoring)
    `activation` `=` custom<EnumKeyword>($activation)
    `layout` `=` custom<EnumKeyword>($layout) attr-dict `:` type($x) `,`
    type($logits) `,` type($w_up) `,` type($w_down) `->` type($y) `,`
    type($h) `,` type($weights) `,` type($indices)
  }];
  let extraClassDeclaration = [{
    /// The expert count E.
    int64_t getNumExperts() { return getLogits().getType().getDimSize(1); }
    /// The expert intermediate size I (half of w_up's output width).
    int64_t getIntermediateSize();
    /// The hidden size H.
    int64_t getHiddenSize() { return getX().getType().getDimSize(1); }
    /// The optional operands by name (null when absent), as moe.ffn's.
    Value getBias();
    Value getWUpBias();
    Value getWDownBias();
    /// The weight scales: never valid here (weight_format plain only);
    /// null, for the optional-operand printer shared with moe.ffn.
    Value getWUpScale() { return Value(); }
    Value getWDownScale() { return Value(); }
    /// The weight format (plain is the only valid one).
    WeightFormat getFormat() { return getWeightFormat(); }
  }];
}

def Moe_FfnGradOp : Moe_Op<"ffn_grad"> {
  let summary = "the gradient of a whole MoE feed-forward layer (moe.ffn)";
  let description = [{
    The backward of `moe.ffn`: given `dy` (`T x H`, the gradient of the loss
    with respect to the layer's output) and exactly the operands and
    attributes of the forward `moe.ffn` (`x`, `logits`, `w_up`, `w_down`,
    the optional routing `bias`, and with `expert_bias` the expert biases
    `w_up_bias`, `w_down_bias`; every routing and GLU attribute,
    `transpose_weights`, with `moe.ffn`'s meaning and defaults), returns the
    gradients of the loss with respect to

    - `dx` (`T x H`, the type of `x`),
    - `dlogits` (`T x E`, the type of `logits`),
    - `dw_up`, `dw_down` (the shapes of `w_up` and `w_down`, accumulated
      in f32 as `moe.grouped_matmul_wgrad` does; both f32, ready to add
      into an f32 `main_grad`, or both the weights' type, each sum rounded
      once: half the bytes to write, the parameters' gradient dtype),
    - with `expert_bias`: `dw_up_bias` (`E x 2I`, f32) and `dw_down_bias`
      (`E x H`, f32).

    The routing correction `bias` only steers the selection (as the top-k
    and the group limit do) and gets no gradient. Gradients flow to the
    logits through the routing weights of the selected experts only
    (`moe.route_grad`); a GLU clamp (`limit`) passes the gradient inside
    its closed interval (`moe.glu_grad`).

    `--moe-decompose` expands it into the primitive chain (v74 of
    bench/NOTES.md): the forward's routing and dispatch metadata and the
    pre-activation `h` are recomputed (route -> cumsum -> get_indices ->
    get_indptr, `x_rows = gather(x)`, `h = grouped_matmul(x_rows, w_up)`,
    `a = glu(h)`), then `dO = gather(dy)`, `g = grouped_matmul(dO, w_down
    transposed)`, the routing weights' gradient per row `row_dot(g, a)`
    (`+ <dO, b_down>`), `dh = glu_grad(w * g, h)`, `dx` = the sum over the
    k slots of `grouped_matmul(dh, w_up transposed)`, `dlogits =
    route_grad(...)`, and the weight gradients by
    `moe.grouped_matmul_wgrad` (`a` against `w * dO`, `x_rows` against
    `dh`; the bias gradients are the per-expert row sums, the wgrad of a
    constant-1 input column). Every slot's row flows through the chain
    like the forward's, so results are deterministic.

    What a backward needs saved from the forward, per token (`F` the
    activation type): `x` (`H * sizeof(F)` bytes), the pre-activation `h`
    of its `k` rows (`k * 2I * sizeof(F)`), and the routing metadata: the
    `k` expert ids (`k * 4` bytes, i32) and the `k` routing weights (`k *
    4`, f32); the dispatch order and offsets follow from the ids.

    Two forms:

    - recomputing (no `saved`): the op saves nothing; it takes the
      forward's operands and recomputes the routing and `h` itself (one
      extra up GEMM);
    - saved: `saved(%h, %weights, %indices : types)`, the last three
      results of `moe.ffn_train` (`h`: `(T*k) x 2I` of `F` in dispatch
      order, `weights`: `T x k` f32, `indices`: `T x k` i32). The
      decomposition then has no `moe.route` and no up-projection GEMM: it
      derives cumsum, get_indices and get_indptr from the saved `indices`,
      takes the routing weights and `h` as given and recomputes only the
      activation `glu(h)`. `logits` is still an operand (`moe.route_grad`
      needs the scores, recomputed per row from the logits), `bias` and the
      group attributes then only describe the forward.

    In the generic form the saved tensors are the last three operands
    (after the routing bias and the expert biases): the saved group is
    present exactly when there are three operands more than the other
    rules allow.

    Constraints: all of `moe.ffn`'s; `dy` is `T x H` of `x`'s type; the
    saved tensors have the types above (`h`'s rows `T * k` where `T` is
    static); the results have the types above. Only bf16 / f16 / f32 weights
    (`weight_format = plain`): training on quantized weights is out of
    scope.

    Example (Mixtral-style, T dynamic):

    ```mlir
    %dx, %dl, %dwu, %dwd = moe.ffn_grad %dy, %x, %logits, %w_up, %w_down
        k = 2 scoring = softmax activation = silu layout = concat
        {normalize = true}
        : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>,
          tensor<8x64x256xbf16>, tensor<8x128x64xbf16>
        -> tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xf32>,
           tensor<8x128x64xf32>

    %dx, %dl, %dwu, %dwd = moe.ffn_grad %dy, %x, %logits, %w_up, %w_down
        saved(%h, %w, %ids : tensor<?x256xbf16>, tensor<?x2xf32>,
                             tensor<?x2xi32>)
        k = 2 scoring = softmax activation = silu layout = concat
        {normalize = true}
        : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>,
          tensor<8x64x256xbf16>, tensor<8x128x64xbf16>
        -> tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xf32>,
           tensor<8x128x64xf32>
    ```
  }];
  let arguments = !con((ins Moe_FloatTensorOfRank<2>:$dy,
                            Moe_FloatTensorOfRank<2>:$x,
                            Moe_FloatTensorOfRank<2>:$logits,
                            Moe_WeightTensorOfRank<3>:$w_up,
                            Moe_WeightTensorOfRank<3>:$w_down,
                            Variadic<AnyRankedTensor>:$optional_operands),
                       Moe_RoutingAttrs,
                       (ins Moe_ActivationAttr:$activation,
                            Moe_GluLayoutAttr:$layout),
                       Moe_GluParamAttrs,
                       (ins DefaultValuedAttr<BoolAttr, "false">:$transpose_weights,
                            DefaultValuedAttr<BoolAttr, "false">:$expert_bias),
                       Moe_WeightFormatAttrs);
  let results = (outs Moe_FloatTensorOfRank<2>:$dx,
                      Moe_FloatTensorOfRank<2>:$dlogits,
                      Moe_FloatTensorOfRank<3>:$dw_up,
                      Moe_FloatTensorOfRank<3>:$dw_down,
                      Variadic<Moe_FloatTensorOfRank<2>>:$bias_grads);
  let assemblyFormat = [{
    $dy `,` $x `,` $logits `,` $w_up `,` $w_down
    custom<FfnGradOptionalOperands>($optional_operands,
                                    type($optional_operands), $expert_bias)
    `k` `=` $k `scoring` `=` custom<EnumKeyword>($scoring)
    `activation` `=` custom<EnumKeyword>($activation)
    `layout` `=` custom<EnumKeyword>($layout) attr-dict `:` type($dy) `,`
    type($x) `,` type($logits) `,` type($w_up) `,` type($w_down) `->`
    type($dx) `,` type($dlogits) `,` type($dw_up) `,` type($dw_down)
    (`,` type($bias_grads)^)?
  }];
  let extraClassDeclaration = [{
    /// The expert count E.
    int64_t getNumExperts() { return getLogits().getType().getDimSize(1); }
    /// The expert intermediate size I (half of w_up's output width).
    int64_t getIntermediateSize();
    /// The hidden size H.
    int64_t getHiddenSize() { return getX().getType().getDimSize(1); }
    /// The optional operands by name (null when absent): the routing bias
    /// (E, f32) and the expert biases (E x 2I, E x H; expert_bias).
    Value getBias();
    Value getWUpBias();
    Value getWDownBias();
    /// The weight scales: never valid here (weight_format plain only);
    /// null, for the optional-operand printer shared with moe.ffn.
    Value getWUpScale() { return Value(); }
    Value getWDownScale() { return Value(); }
    /// The saved forward tensors (moe.ffn_train's h, weights, indices),
    /// else null: the last three optional operands, when present.
    bool hasSaved();
    Value getSavedH();
    Value getSavedWeights();
    Value getSavedIndices();
    /// The expert bias gradients (E x 2I, E x H; expert_bias), else null.
    Value getDwUpBias() {
      return getBiasGrads().size() == 2 ? getBiasGrads()[0] : Value();
    }
    Value getDwDownBias() {
      return getBiasGrads().size() == 2 ? getBiasGrads()[1] : Value();
    }
    /// The weight format (plain is the only valid one).
    WeightFormat getFormat() { return getWeightFormat(); }
  }];
}

//===----------------------------------------------------------------------===//
// Fused ops
//
// Produced by the --moe-fuse-* passes from the primitive chain; not part of
// the public contract (docs/Contract.md), but documented, verified and
// executable like the primitives. Each one computes exactly what the
// primitives it replaces compute (within floating-point reassociation).
//===----------------------------------------------------------------------===//

def Moe_DispatchOp : Moe_InferredOp<"dispatch"> {
  let opDocGroup = Moe_InternalOpsDoc;
  let summary = "dispatch metadata in O(T*k): offsets and the index maps";
  let description = [{
    Computes what `moe.cumsum` + `moe.get_indptr` (exclusive, i32) +
    `moe.get_indices` compute, without the `E*T` cumsum: a histogram of the
    in-range ids of `indices` (`T x k`), its exclusive prefix sum (the
    `offsets`, `E+1`), and a counting sort of the `(b, j)` slots in
    row-major order that places slot `(b, j)` naming expert `e` at
    `offsets[e] + (number of earlier slots naming e)`. That reproduces the
    chain's order exactly: experts ascending, tokens ascending inside an
    expert, duplicates of one row in slot order. Slots whose id is outside
    `[0, E)` take the places after all dispatched rows in `(b, j)` order.
    O(T*k + E) work and memory.

    Produced by `--moe-fuse-dispatch`.

    Example:

    ```mlir
    %offsets, %rev, %tok = moe.dispatch %ids num_experts = 8
        : tensor<?x2xi32> -> tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins Moe_IndexTensorOfRank<2>:$indices, I64Attr:$num_experts);
  let results = (outs Moe_IndexTensorOfRank<1>:$offsets,
                      Moe_IndexTensorOfRank<1>:$reverse_indices,
                      Moe_IndexTensorOfRank<1>:$token_indices);
  let assemblyFormat = [{
    $indices `num_experts` `=` $num_experts attr-dict `:` type($indices) `->`
    type($offsets) `,` type($reverse_indices) `,` type($token_indices)
  }];
}

def Moe_ExpertGemmOp : Moe_Op<"expert_gemm", [AttrSizedOperandSegments]> {
  let opDocGroup = Moe_InternalOpsDoc;
  let summary = "grouped matmul with fused gather prologue and GLU / scatter epilogues";
  let description = [{
    `moe.grouped_matmul` with optional fused stages. For each expert `e` and
    each row `m` in `[clamp(offsets[e]), clamp(offsets[e+1]))` (clamped to
    `[0, M]`):

    1. gather prologue: the row read is `lhs[gather[m]]` when `gather` is
       given (zero when out of range), else `lhs[m]`;
    2. `acc = row @ rhs[e]` (or `rhs[e]^T` with `transpose_rhs`), in f32,
       plus `bias[e]`;
    3. GLU epilogue, when `activation` and `layout` are set: `acc` (`2N'`
       columns) becomes `act(gate) * (up + up_bias)` (`N'` columns) with the
       `moe.glu` meaning of `activation`, `layout`, `alpha`, `limit`,
       `up_bias`;
    4. destination `d = scatter[m]` when `scatter` is given, else `d = m`;
       the row is multiplied by `scale[d]` when `scale` is given;
    5. rounded to the result type and written to row `d` of the result
       (`M x N'`); an out-of-range `d` drops the row. Rows nothing writes
       are zero. `M` is `gather`'s length when given, else `lhs`'s rows.

    Low-precision weights (`weight_format`, `scale_fmt`, `rhs_scale`) as
    in `moe.grouped_matmul`; with `fp8_block` the row read in stage 1 is
    what is quantized.

    Produced by `--moe-fuse-gather-matmul` (stage 1), `--moe-fuse-glu`
    (stage 3) and `--moe-fuse-scatter` (stages 4-5); an expert_gemm without
    any of them is a plain `moe.grouped_matmul`.

    Example (first expert GEMM of a fused layer):

    ```mlir
    %act = moe.expert_gemm %x[%tok : tensor<?xi32>], %w_up
        offsets(%off : tensor<9xi32>)
        {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>}
        : tensor<?x64xbf16>, tensor<8x64x256xbf16> -> tensor<?x128xbf16>
    ```
  }];
  let arguments = !con((ins Moe_FloatTensorOfRank<2>:$lhs,
                       Moe_WeightTensorOfRank<3>:$rhs,
                       Moe_IndexTensorOfRank<1>:$offsets,
                       Optional<Moe_IndexTensorOfRank<1>>:$gather,
                       Optional<Moe_FloatTensorOfRank<2>>:$bias,
                       Optional<Moe_IndexTensorOfRank<1>>:$scatter,
                       Optional<TensorRankOf<Moe_FloatTypes, [1]>>:$scale,
                       Optional<AnyRankedTensor>:$rhs_scale,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs,
                       OptionalAttr<Moe_ActivationAttr>:$activation,
                       OptionalAttr<Moe_GluLayoutAttr>:$layout),
                       Moe_GluParamAttrs, Moe_WeightFormatAttrs);
  let results = (outs Moe_FloatTensorOfRank<2>:$result);
  let assemblyFormat = [{
    $lhs (`[` $gather^ `:` type($gather) `]`)? `,` $rhs
    `offsets` `(` $offsets `:` type($offsets) `)`
    (`bias` `(` $bias^ `:` type($bias) `)`)?
    (`scatter` `(` $scatter^ `:` type($scatter) `)`)?
    (`scale` `(` $scale^ `:` type($scale) `)`)?
    (`scales` `(` $rhs_scale^ `:` type($rhs_scale) `)`)?
    attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// The weight format.
    WeightFormat getFormat() { return getWeightFormat(); }
    /// True when the GLU epilogue is fused.
    bool hasGluEpilogue() { return getActivation().has_value(); }
    /// The contraction's N (before the GLU epilogue halves it).
    int64_t getGemmN() {
      return getRhs().getType().getDimSize(getTransposeRhs() ? 1 : 2);
    }
  }];
}

def Moe_ExpertGemmGluGradOp : Moe_Op<"expert_gemm_glu_grad",
                                      [AttrSizedOperandSegments]> {
  let opDocGroup = Moe_InternalOpsDoc;
  let summary = "the down projection's input gradient with the GLU backward "
                "and the routing-weight gradient fused";
  let description = [{
    The backward of a layer's second expert GEMM and its GLU in one op. For
    each row `m` (`M` rows: `gather`'s length when given, else `lhs`'s):

    1. `g = row @ rhs[e]` (or `rhs[e]^T` with `transpose_rhs`) in f32 for
       the rows of expert `e`'s group (`moe.grouped_matmul`'s groups; the
       row read through `gather` as in `moe.expert_gemm`), zero for a row
       in no group (`N'` columns);
    2. `a = glu(preact[m])` in f32 (`moe.glu` with `activation`, `layout`,
       `alpha`, `limit`, `up_bias`);
    3. `weight_grad[m] = acc[m] + sum_n g[n] * a[n]` (the routing weight's
       gradient, `moe.row_dot`);
    4. `input_grad[m] = glu_grad(weights[m] * g, preact[m])` (`2N'`
       columns, `moe.glu_grad` of the routing-weighted gradient);
    5. `scaled_act[m] = weights[m] * a` (what the down projection's weight
       gradient contracts with the upstream gradient's rows).

    `g` stays in f32 (never rounded); `input_grad` and `scaled_act` are
    rounded once to `F`, `weight_grad` to its type (`F` or f32).

    Produced by `--moe-fuse-glu-grad` from the primitives
    `moe.ffn_grad` decomposes into (`moe.grouped_matmul`, `moe.glu`,
    `moe.row_dot`, two weighted `moe.combine`s, `moe.glu_grad`): the
    gradient `g`, the recomputed activation and their routing-weighted
    forms are never materialised in `F`.

    Example:

    ```mlir
    %dh, %wa, %dw = moe.expert_gemm_glu_grad %dy[%tok : tensor<?xi32>], %w_down
        offsets(%off : tensor<9xi32>) preact(%h : tensor<?x256xbf16>)
        weights(%wr : tensor<?xf32>) silu concat {transpose_rhs = true}
        : tensor<?x64xbf16>, tensor<8x128x64xbf16>
        -> tensor<?x256xbf16>, tensor<?x128xbf16>, tensor<?xf32>
    ```
  }];
  let arguments = !con((ins Moe_FloatTensorOfRank<2>:$lhs,
                       Optional<Moe_IndexTensorOfRank<1>>:$gather,
                       Moe_FloatTensorOfRank<3>:$rhs,
                       Moe_IndexTensorOfRank<1>:$offsets,
                       Moe_FloatTensorOfRank<2>:$preact,
                       TensorRankOf<Moe_FloatTypes, [1]>:$weights,
                       Optional<Moe_F32Vector>:$acc,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs,
                       Moe_ActivationAttr:$activation,
                       Moe_GluLayoutAttr:$layout),
                       Moe_GluParamAttrs);
  let results = (outs Moe_FloatTensorOfRank<2>:$input_grad,
                      Moe_FloatTensorOfRank<2>:$scaled_act,
                      Moe_FloatTensorOfRank<1>:$weight_grad);
  let assemblyFormat = [{
    $lhs (`[` $gather^ `:` type($gather) `]`)? `,` $rhs
    `offsets` `(` $offsets `:` type($offsets) `)`
    `preact` `(` $preact `:` type($preact) `)`
    `weights` `(` $weights `:` type($weights) `)`
    (`accumulate` `(` $acc^ `:` type($acc) `)`)?
    custom<EnumKeyword>($activation) custom<EnumKeyword>($layout)
    attr-dict `:` type($lhs) `,` type($rhs) `->` type($input_grad) `,`
    type($scaled_act) `,` type($weight_grad)
  }];
}

def Moe_RouteDispatchOp : Moe_Op<"route_dispatch"> {
  let opDocGroup = Moe_InternalOpsDoc;
  let summary = "routing and its dispatch metadata in one kernel";
  let description = [{
    `moe.route` followed by `moe.dispatch` on its ids, as one op: the
    router's top-k selection also counts the per-expert histogram, so no
    kernel boundary separates routing from dispatch. Results are exactly
    `moe.route`'s (`weights`, `indices`) followed by `moe.dispatch`'s
    (`offsets`, `reverse_indices`, `token_indices`) with `num_experts = E`;
    attributes and constraints are `moe.route`'s.

    Produced by `--moe-fuse-route-dispatch`.

    Example:

    ```mlir
    %w, %ids, %off, %rev, %tok = moe.route_dispatch %logits k = 2
        scoring = softmax {normalize = true}
        : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>, tensor<9xi32>,
          tensor<?xi32>, tensor<?xi32>
    ```
  }];
  let arguments = !con((ins Moe_FloatTensorOfRank<2>:$logits,
                            Optional<Moe_F32Vector>:$bias),
                       Moe_RoutingAttrs);
  let results = (outs Moe_FloatTensorOfRank<2>:$weights,
                      Moe_IndexTensorOfRank<2>:$indices,
                      Moe_IndexTensorOfRank<1>:$offsets,
                      Moe_IndexTensorOfRank<1>:$reverse_indices,
                      Moe_IndexTensorOfRank<1>:$token_indices);
  let assemblyFormat = [{
    $logits (`bias` `(` $bias^ `:` type($bias) `)`)? `k` `=` $k
    `scoring` `=` custom<EnumKeyword>($scoring) attr-dict `:` type($logits)
    `->` type($weights) `,` type($indices) `,` type($offsets) `,`
    type($reverse_indices) `,` type($token_indices)
  }];
}

#endif // MOE_MLIR_DIALECT_MOE_IR_MOEOPS_TD
