"""Low-precision formats and baselines of bench_moe.py --weight-format
fp8_block / mxfp4 (FP8 block weights below; MXFP4 at the end).

Runs on the GPU machine (torch 2.11, triton 3.6; no vLLM). Imported by
bench_lowprec.py; the layers take (x bf16 [T, H], logits [T, E]) and
return bf16 [T, H], with the bench's routing (softmax over the E logits,
top-k, renormalised) passed in as `routing_fn(logits, k) -> (weights f32
[T, k], ids [T, k])`.

The checkpoint format (DeepSeek-V3 / Qwen3-FP8): expert weights
float8_e4m3fn [E, N, K] (K contiguous; w_up [E, 2I, H] gate rows then up
rows, w_down [E, H, I]) with f32 scales [E, ceil(N/128), ceil(K/128)]
(dequantize = multiply); activations quantized at run time per token per
128 channels, scale = max(amax, eps) / 448.

  quantize_fp8_blocks       bf16 [E, N, K] -> that format (what the
                            checkpoints hold; test/GPU/lowprec's recipe)
  make_vllm_layer           vLLM's Triton fused_moe in its block-FP8 mode
                            (w8a8, block_shape [128, 128]), vendored by
                            bench/fetch_vllm_fused_moe.sh into a folder
                            given to import_vllm_fp8 (bench_moe.py
                            --vllm-fp8 DIR): per-token-group quantization
                            of x (vLLM's Triton kernel), the naive or the
                            aligned expert assignment (moe_align_block_size
                            in torch), fused_moe_kernel for gate/up,
                            silu_and_mul, quantization, fused_moe_kernel
                            for down with the routing weights, sum over k;
                            vLLM's tile table for the GPU if it ships one,
                            else its default-config heuristic, per call
                            (fused_experts_impl of vLLM 0.26.0, step by
                            step)
  make_scaled_grouped_mm_layer  torch._scaled_grouped_mm rowwise x rowwise
                            (the only FP8 grouped recipe torch 2.11 has on
                            SM90): the block weights re-quantized per
                            output channel (requantize_per_channel), the
                            activations per row; rows sorted by expert into
                            groups padded to a multiple of 16, offs the
                            int32 group ends; graph-capturable

MXFP4 (gpt-oss): weights [E, N, K] (nn.Linear layout) as e2m1 codes, two a
byte along K (low nibble = even K: int8 [E, N, K/2]), with an E8M0 scale
per 32 K (float8_e8m0fnu [E, N, K/32], value 2^(s - 127)); activations
stay bf16 (w4a16).

  quantize_mxfp4            bf16 [E, N, K] -> that format, as
                            test/GPU/lowprec/lowprec_check.py's
                            quantize_mxfp4 (scale 2^ceil(log2(amax / 6)),
                            nearest e2m1 magnitude, ties to the smaller)
  dequantize_mxfp4, Mxfp4Experts  the exact f32 weights (code x 2^(s-127)),
                            per expert, for the references
  tk_quantize_mxfp4         triton_kernels' own quantization of the same
                            bf16 weights (downcast_to_mxfp along K: round-up
                            scale, e2m1 round to nearest even) in its matmul
                            layouts for the GPU (Hopper: HopperMXValueLayout,
                            HopperMXScaleLayout per num_warps), made once
  make_tk_mxfp4_layer       OpenAI triton_kernels (v3.6.0) matmul_ogs with
                            those MXFP4 weights: its routing (topk,
                            apply_softmax), gate/up with the expert bias and
                            the fused gpt-oss SwiGLU (swiglu_fn: alpha,
                            limit, up + 1), down with the expert bias and the
                            routing weights (gammas), the k-way sum; the
                            scale layout's num_warps as its bench_mlp.py
                            picks it (4 up to 512 tokens, else 8)
"""

import os
import sys

import torch
import torch.nn.functional as F

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
BLOCK = 128  # the weight block and the activation group
EPS = 1e-4  # amax floor of the activation scales (the format's spec)
SGMM_ALIGN = 16  # rows per group of torch._scaled_grouped_mm, padded to this

V = VC = None  # the vendored vLLM module and its vllm_compat (import_vllm_fp8)


def over_fp8_max(amax):
    """amax / 448 as IEEE division, as the format and our kernels compute
    it. (torch on the GPU divides a tensor by a Python scalar as a multiply
    by its reciprocal, 1 ulp off for about half of the scales, which flips
    e4m3 codes of values near a rounding midpoint: the FP8 references read
    ours at ~1.4e-2 instead of ~5e-3, bench/NOTES.md v76.)"""
    return amax / torch.tensor(FP8_MAX, dtype=amax.dtype, device=amax.device)


# ----------------------------------------------------------------------------
# The format
# ----------------------------------------------------------------------------


def quantize_fp8_blocks(w):
    """bf16 [E, N, K] -> (e4m3 codes [E, N, K], f32 scale_inv [E, N/128, K/128]):
    per 128 x 128 block (edges zero-padded), scale = amax / 448."""
    E, N, K = w.shape
    nb, kb = -(-N // BLOCK), -(-K // BLOCK)
    codes = torch.empty(E, N, K, dtype=FP8, device=w.device)
    scales = torch.empty(E, nb, kb, dtype=torch.float32, device=w.device)
    for e in range(E):
        we = F.pad(w[e].float(), (0, kb * BLOCK - K, 0, nb * BLOCK - N))
        blk = we.reshape(nb, BLOCK, kb, BLOCK)
        s = over_fp8_max(blk.abs().amax(dim=(1, 3)).clamp(min=1e-12))
        q = (blk / s[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8)
        codes[e] = q.reshape(nb * BLOCK, kb * BLOCK)[:N, :K]
        scales[e] = s
    return codes, scales


def dequantize_fp8_block(codes, scales):
    """One expert: e4m3 [N, K] with scales [N/128, K/128] -> f32 [N, K]."""
    N, K = codes.shape
    s = scales.repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)[:N, :K]
    return codes.float() * s


def requantize_per_channel(codes, scales):
    """Block-FP8 weights [E, N, K] -> per-output-channel FP8: (e4m3 [E, N, K],
    f32 [E, N]), from the dequantized block weights (what a user holding only
    the checkpoint would run through a rowwise kernel)."""
    E, N, K = codes.shape
    out = torch.empty_like(codes)
    row_scales = torch.empty(E, N, dtype=torch.float32, device=codes.device)
    for e in range(E):
        w = dequantize_fp8_block(codes[e], scales[e])
        s = over_fp8_max(w.abs().amax(dim=1).clamp(min=1e-12))
        out[e] = (w / s[:, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8)
        row_scales[e] = s
    return out, row_scales


def quantize_rows(a, eps=EPS):
    """[M, K] -> (e4m3 [M, K], f32 [M]): one scale per row, max(amax, eps) / 448."""
    s = over_fp8_max(a.abs().amax(dim=1).float().clamp(min=eps))
    q = (a.float() / s[:, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q, s


def fake_quant_groups(a, eps=EPS):
    """f32 [M, K] quantized per row per 128 columns as the format says, and
    dequantized again (the reference's activations)."""
    M, K = a.shape
    G = -(-K // BLOCK)
    ag = F.pad(a.float(), (0, G * BLOCK - K)).reshape(M, G, BLOCK)
    s = over_fp8_max(ag.abs().amax(dim=2).clamp(min=eps))
    q = (ag / s[..., None]).clamp(-FP8_MAX, FP8_MAX).to(FP8).float()
    return (q * s[..., None]).reshape(M, G * BLOCK)[:, :K]


def fake_quant_rows(a, eps=EPS):
    """f32 [M, K] quantized per row (quantize_rows) and dequantized again."""
    q, s = quantize_rows(a, eps)
    return q.float() * s[:, None]


# ----------------------------------------------------------------------------
# vLLM fused_moe (block FP8)
# ----------------------------------------------------------------------------


def import_vllm_fp8(d):
    """The vendored vLLM fused_moe (bench/fetch_vllm_fused_moe.sh) from `d`:
    sets V / VC; returns the version text for the report."""
    global V, VC
    if not os.path.isfile(os.path.join(d, "vllm_fused_moe_fp8.py")):
        sys.exit(
            "lowprec_baselines: no vllm_fused_moe_fp8.py in %s "
            "(make it with bash bench/fetch_vllm_fused_moe.sh)" % d
        )
    if d not in sys.path:
        sys.path.insert(0, d)
    import vllm_compat as vc
    import vllm_fused_moe_fp8 as v
    import triton

    V, VC = v, vc
    return "vllm %s fused_moe (Triton, block FP8; triton %s)" % (v.VLLM_VERSION, triton.__version__)


def vllm_config(w1_shape, w2_shape, top_k, M, block_shape):
    """(config, source) as vLLM's try_get_optimal_moe_config picks it for M
    tokens: its tile table for this GPU, (E, N = I) and block FP8 if it ships
    one (the entry of the nearest batch size), else get_default_config."""
    E, _, N = w2_shape
    configs = V.get_moe_configs(E, N, "fp8_w8a8", block_shape[0], block_shape[1])
    if configs:
        key = min(configs, key=lambda m: abs(m - M))
        name = V.get_config_file_name(E, N, "fp8_w8a8", list(block_shape))
        return dict(configs[key]), "table %s [%d]" % (name, key)
    config = V.get_default_config(M, E, N, w1_shape[2], top_k, "fp8_w8a8", list(block_shape))
    return config, "default"


def vllm_quant_groups(x, group):
    """vLLM's per_token_group_quant_fp8 (row-major scales, its Triton
    kernel, eps 1e-10 as vLLM calls it): (e4m3 [M, K], f32 [M, K/group])."""
    import triton

    M, K = x.shape
    assert K % group == 0 and x.is_contiguous()
    xq = torch.empty((M, K), dtype=FP8, device=x.device)
    xs = torch.empty((M, K // group), dtype=torch.float32, device=x.device)
    n = M * (K // group)
    if n:
        block = triton.next_power_of_2(group)
        V._per_token_group_quant_fp8[(n,)](
            x,
            xq,
            xs,
            group,
            K,
            x.stride(0),
            1e-10,
            fp8_min=-FP8_MAX,
            fp8_max=FP8_MAX,
            use_ue8m0=False,
            BLOCK=block,
            num_warps=min(max(block // 256, 1), 8),
            num_stages=1,
        )
    return xq, xs


def make_vllm_layer(E, k, w1, w2, w1_scale, w2_scale, routing_fn, block_shape=(128, 128)):
    """layer(x, logits) -> bf16 [T, H]: vLLM's fused_experts_impl (0.26.0)
    for block FP8, its steps with the vendored functions. w1 e4m3 [E, 2I, H]
    (gate rows then up rows, vLLM's w13 layout), w2 e4m3 [E, H, I], scales
    f32 [E, 2I/128, H/128] and [E, H/128, I/128]. layer.used holds the tile
    config and its source of the last call."""
    import triton.language as tl

    assert V is not None, "import_vllm_fp8 first"
    assert w1.dtype == FP8 and w2.dtype == FP8 and w1.is_contiguous() and w2.is_contiguous()
    N, K = w1.shape[1], w2.shape[1]  # 2I, H
    block = list(block_shape)
    used = {}

    def layer(x, logits):
        M = x.shape[0]
        topk_weights, topk_ids = routing_fn(logits, k)
        topk_weights = topk_weights.to(torch.float32).contiguous()
        topk_ids = topk_ids.to(torch.int32).contiguous()
        config, source = vllm_config(w1.shape, w2.shape, k, M, block)
        used.update(config=config, source=source)
        cache13 = torch.empty(M * k * max(N, K), device=x.device, dtype=x.dtype)
        cache1 = cache13[: M * k * N].view(M, k, N)
        cache3 = cache13[: M * k * K].view(M, k, K)
        cache2 = torch.empty((M * k, N // 2), device=x.device, dtype=x.dtype)
        qx, sx = vllm_quant_groups(x.contiguous(), block[1])
        sorted_ids, expert_ids, padded = V._prepare_expert_assignment(
            topk_ids, config, M, k, E, None, block_shape=block, ignore_invalid_experts=True
        )
        common = dict(
            compute_type=tl.bfloat16,
            use_fp8_w8a8=True,
            use_int8_w8a8=False,
            use_int8_w8a16=False,
            use_int4_w4a16=False,
            per_channel_quant=False,
            block_shape=block,
        )
        V.invoke_fused_moe_triton_kernel(
            qx, w1, cache1, sx, w1_scale, topk_weights, sorted_ids, expert_ids, padded,
            False, k, config, **common,
        )  # fmt: skip
        VC.silu_and_mul(cache2, cache1.view(-1, N))
        q2, s2 = vllm_quant_groups(cache2, block[1])
        V.invoke_fused_moe_triton_kernel(
            q2, w2, cache3, s2, w2_scale, topk_weights, sorted_ids, expert_ids, padded,
            True, 1, config, **common,
        )  # fmt: skip
        return VC.moe_sum(cache3)

    layer.used = used
    return layer


# ----------------------------------------------------------------------------
# torch._scaled_grouped_mm, rowwise
# ----------------------------------------------------------------------------


def make_scaled_grouped_mm_layer(
    E, k, w1, w1_rows, w2, w2_rows, routing_fn, align=SGMM_ALIGN, fast_accum=False
):
    """layer(x, logits) -> bf16 [T, H] with torch._scaled_grouped_mm (2d-3d,
    rowwise): w1 e4m3 [E, 2I, H] and w2 [E, H, I] with per-output-channel
    scales w1_rows [E, 2I], w2_rows [E, H] (requantize_per_channel). The
    routed rows are sorted by expert (stable) into groups padded to
    `align` rows (zero rows, scale 0), x quantized per row once and
    gathered, the gate/up output's SwiGLU (concat) quantized per row; the
    routing weights and the k-way sum in one bf16 bmm. No host
    synchronisation: graph-capturable."""
    assert w1.dtype == FP8 and w2.dtype == FP8
    N, H = w1.shape[1], w2.shape[1]
    b1, b2 = w1.transpose(1, 2), w2.transpose(1, 2)  # [E, H, 2I], [E, I, H]: column-major

    def layer(x, logits):
        T = x.shape[0]
        w, ids = routing_fn(logits, k)
        flat = ids.reshape(-1)
        n = flat.numel()
        dev = x.device
        counts = torch.zeros(E, dtype=torch.int64, device=dev)
        counts.scatter_add_(0, flat, torch.ones_like(flat))
        padded = (counts + align - 1) // align * align
        ends = torch.cumsum(padded, 0)
        order = torch.argsort(flat, stable=True)  # slots grouped by expert
        expert_of = flat[order]
        first = torch.cumsum(counts, 0) - counts
        pos = (ends - padded)[expert_of] + torch.arange(n, device=dev) - first[expert_of]
        R = min(n * align, n + E * (align - 1))  # rows of the padded layout
        xq, xs = quantize_rows(x)
        tok = order // k
        a = torch.zeros((R, H), dtype=torch.uint8, device=dev)
        a.index_copy_(0, pos, xq.view(torch.uint8).index_select(0, tok))
        sa = torch.zeros(R, dtype=torch.float32, device=dev)
        sa.index_copy_(0, pos, xs.index_select(0, tok))
        offs = ends.to(torch.int32)
        gu = torch._scaled_grouped_mm(
            a.view(FP8), b1, sa, w1_rows, offs=offs, out_dtype=torch.bfloat16,
            use_fast_accum=fast_accum,
        )  # fmt: skip
        h = F.silu(gu[:, : N // 2]) * gu[:, N // 2 :]
        hq, hs = quantize_rows(h)
        d = torch._scaled_grouped_mm(
            hq, b2, hs, w2_rows, offs=offs, out_dtype=torch.bfloat16, use_fast_accum=fast_accum
        )
        row_of_slot = torch.empty_like(pos).scatter_(0, order, pos)
        dk = d.index_select(0, row_of_slot).view(T, k, H)
        return torch.bmm(w.to(torch.bfloat16).unsqueeze(1), dk).squeeze(1)

    return layer


# ----------------------------------------------------------------------------
# MXFP4 (gpt-oss)
# ----------------------------------------------------------------------------

MX_BLOCK = 32  # K elements per E8M0 scale
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # magnitudes of codes 0..7
E2M1_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
E8M0 = torch.float8_e8m0fnu


def quantize_mxfp4(w):
    """bf16 [E, N, K] -> (packed e2m1 int8 [E, N, K/2], E8M0 [E, N, K/32]):
    per 32 K, scale = 2^ceil(log2(amax / 6)) (E8M0 = exponent + 127), code
    = the nearest e2m1 magnitude of w / scale (ties to the smaller: the
    argmin of test/GPU/lowprec/lowprec_check.py's quantize_mxfp4, as a
    bucketize over the midpoints, the differences being exact there), sign
    bit 3; two codes a byte, the even K in the low nibble. One expert at a
    time (the model's weights do not fit the argmin's temporaries)."""
    E, N, K = w.shape
    assert K % MX_BLOCK == 0, "K must be a multiple of 32"
    packed = torch.empty(E, N, K // 2, dtype=torch.int8, device=w.device)
    scales = torch.empty(E, N, K // MX_BLOCK, dtype=torch.uint8, device=w.device)
    mids = torch.tensor(E2M1_MIDPOINTS, dtype=torch.float32, device=w.device)
    for e in range(E):
        blk = w[e].float().reshape(N, K // MX_BLOCK, MX_BLOCK)
        amax = blk.abs().amax(dim=2).clamp(min=2.0**-120)
        exp = torch.ceil(torch.log2(amax / 6.0)).clamp(-127, 127)
        v = blk / torch.exp2(exp)[..., None]
        code = torch.bucketize(v.abs().clamp(max=6.0), mids)  # nearest magnitude
        code = (code | ((v < 0).to(torch.int64) << 3)).reshape(N, K)
        packed[e] = (code[:, 0::2] | (code[:, 1::2] << 4)).to(torch.uint8).view(torch.int8)
        scales[e] = (exp + 127).to(torch.uint8)
    return packed, scales.view(E8M0)


def e8m0_to_f32(scales):
    """E8M0 (or its uint8 bits) -> f32 2^(s - 127), exactly (s = 0: 2^-127,
    subnormal; 255: NaN)."""
    s = scales.view(torch.uint8).to(torch.int32)
    bits = torch.where(s > 0, s << 23, torch.full_like(s, 0x00400000))
    f = bits.view(torch.float32)
    return torch.where(s == 255, torch.full_like(f, float("nan")), f)


def dequantize_mxfp4(packed, scales):
    """One expert: packed e2m1 [N, K/2] (int8 / uint8) with E8M0 scales
    [N, K/32] -> f32 [N, K], exactly (code x 2^(s - 127))."""
    N, K2 = packed.shape
    p = packed.view(torch.uint8).to(torch.int64)
    codes = torch.stack((p & 0xF, p >> 4), dim=-1).reshape(N, 2 * K2)
    lut = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=packed.device)
    lut = torch.cat((lut, -lut))
    s = e8m0_to_f32(scales).repeat_interleave(MX_BLOCK, dim=1)
    return lut[codes] * s


class Mxfp4Experts(object):
    """Packed MXFP4 weights [E, N, K/2] and their scales as
    torch_reference.ffn's weight operand: shape (E, N, K), [e] the f32
    dequantized expert e (made when the reference asks for it)."""

    def __init__(self, packed, scales):
        self.packed, self.scales = packed, scales
        E, N, K2 = packed.shape
        self.shape = (E, N, 2 * K2)

    def __getitem__(self, e):
        return dequantize_mxfp4(self.packed[e], self.scales[e])


def tk_num_warps(T):
    """The num_warps of the Hopper scale layout for T tokens, as
    triton_kernels' bench/bench_mlp.py picks it (its batch is T)."""
    return 4 if T <= 512 else 8


def tk_quantize_mxfp4(w, num_warps=(4, 8)):
    """bf16 [E, N, K] (nn.Linear layout) -> matmul_ogs's MXFP4 right operand
    (logical [E, K, N], K-major), quantized along K by triton_kernels'
    downcast_to_mxfp and put into its default matmul layouts for this GPU
    (make_default_matmul_mxfp4_w_layout / _w_scale_layout, mx_axis 1; the
    scale layout depends on the kernel's num_warps: one per entry of
    num_warps), as its bench_utils.quantize_weight does. Returns dict(w=the
    value Tensor, scales={num_warps: scale Tensor}, codes=int8 [E, N, K/2],
    e8m0=[E, N, K/32]): codes / e8m0 are the unswizzled quantized data in
    quantize_mxfp4's format (downcast_to_mxfp packs the even K in the low
    nibble too), for the reference of its own weights."""
    from triton_kernels.numerics_details.mxfp import downcast_to_mxfp
    from triton_kernels.tensor import FP4, convert_layout, wrap_torch_tensor
    from triton_kernels.tensor_details import layout

    # [E, K/2, N] and [E, K/32, N]: views of [E, N, K/2] and [E, N, K/32]
    wq, ws = downcast_to_mxfp(w.transpose(1, 2), torch.uint8, axis=1)
    value_layout, value_opts = layout.make_default_matmul_mxfp4_w_layout(mx_axis=1)
    wt = convert_layout(wrap_torch_tensor(wq, dtype=FP4), value_layout, **value_opts)
    scales = {}
    for nw in num_warps:
        scale_layout, scale_opts = layout.make_default_matmul_mxfp4_w_scale_layout(
            mx_axis=1, num_warps=nw
        )
        scales[nw] = convert_layout(wrap_torch_tensor(ws), scale_layout, **scale_opts)
    return dict(
        w=wt,
        scales=scales,
        codes=wq.transpose(1, 2).view(torch.int8),
        e8m0=ws.transpose(1, 2).view(E8M0),
    )


def make_tk_mxfp4_layer(tkb, E, k, w1, w2, b1, b2, activation):
    """layer(x, logits) -> bf16 [T, H]: triton_kernels' MoE layer with MXFP4
    weights (w1, w2: tk_quantize_mxfp4 of w_up [E, 2I, H], interleaved
    gate/up, and w_down [E, H, I]; b1 [E, 2I], b2 [E, H]: the expert biases,
    f32 as gpt-oss passes them), through triton_kernels_bench (tkb: its
    routing and the matmul_ogs names): h = matmul_ogs(x, w1, b1, gather,
    fused SwiGLU `activation`), y = matmul_ogs(h, w2, b2, scatter, gammas =
    the routing weights). The scale layout (and so the kernel's num_warps)
    is tk_num_warps(T)'s; layer.used["num_warps"] holds the last call's."""
    tk = tkb.tk
    assert set(w1["scales"]) == set(w2["scales"])
    pcs = {
        nw: (
            tk.PrecisionConfig(weight_scale=w1["scales"][nw]),
            tk.PrecisionConfig(weight_scale=w2["scales"][nw]),
        )
        for nw in w1["scales"]
    }
    used = {}

    def layer(x, logits):
        nw = tk_num_warps(x.shape[0])
        pc1, pc2 = pcs[nw]
        used["num_warps"] = nw
        rdata, gi, si = tkb.tk_routing(logits, E, k)
        h = tk.matmul_ogs(
            x, w1["w"], b1, rdata, gather_indx=gi, precision_config=pc1,
            fused_activation=activation,
        )  # fmt: skip
        return tk.matmul_ogs(
            h, w2["w"], b2, rdata, scatter_indx=si, precision_config=pc2, gammas=rdata.gate_scal
        )

    layer.used = used
    return layer
