#!/usr/bin/env python3
"""Parity of the compiled low-precision layers with Hugging Face `transformers`.

Run on the GPU machine (torch, transformers 5.x, no internet), from the
folder build_lowprec.py filled (or with --dir):

  python3 hf_lowprec_parity.py [--dir DIR] [--T 1,7,64,300,1024]
                               [--fp8-kernel auto|hf|triton|torch] [--only a,b]

For each small layer of cases.json named in HF_CASES the layer's weights are
made the way checkpoints ship them (bf16 -> e4m3 per 128 x 128 block with
f32 scale_inv; MXFP4: e2m1 per 32 along K with E8M0 scales) and both sides
get the SAME codes and scales, the same x (bf16) and the same routing:

  fp8/<case>     Qwen3-MoE / DeepSeek-V3 experts as transformers builds them
                 for an FP8 checkpoint: `replace_with_fp8_linear` with a
                 FineGrainedFP8Config(weight_block_size=[128, 128], dynamic
                 activations) turns the model's experts into its FP8 experts
                 module (integrations/finegrained_fp8.py, eager expert loop:
                 per-token-group e4m3 activation quantization, block-scaled
                 GEMM, bf16 out), run in bf16. Its GEMM kernel: transformers'
                 own (the `kernels` hub "finegrained-fp8" / DeepGEMM, or the
                 in-file Triton kernel of transformers <= 5.0) when it loads
                 (offline it usually does not), else the Triton kernel
                 transformers 4.57 shipped (act_quant + w8a8_block_fp8_matmul,
                 copied below), else a torch emulation of it; the line says
                 which. ||y - y_hf|| / ||y_hf|| <= TOL["fp8_block"]: both
                 quantize the activations (the GLU output too), at different
                 roundings, so ~1e-2 of difference is the format's, not a bug.
  mxfp4/<case>   gpt-oss `GptOssExperts` (interleaved clamped SwiGLU, expert
                 biases) with its weights dequantized by transformers' own
                 `convert_moe_packed_tensors` (integrations/mxfp4.py, what it
                 does without the triton_kernels hub) from our packed bytes
                 viewed as its `*_blocks [E, N, K/32, 16]` / `*_scales`, run
                 in float32: <= TOL["mxfp4"] (bf16 chain).
  conv/<case>    the weight conversions themselves, exact: transformers'
                 dequantization (Fp8Dequantize / convert_moe_packed_tensors)
                 of our codes equals the float64 decoding of
                 test/Differential/reference.py.

"Same experts for every token": the logits are made so that the top-k set
of every token is unambiguous (the k chosen experts, inside topk_group
groups where the layer has groups, get logits in [1, 3], the others in
[-9, -6]); the routing weights HF applies come from the model's own router
module fed these logits (weight = identity), and its ids must equal the
chosen set for every token (else FAIL: the test, not the layer). Each line
also gives both sides' error against the float64 reference of the format
(reference.py `ffn`, the spec's roundings) and, for FP8, against the model's
plain experts with the dequantized weights (what activation quantization
costs).

  --cpu   no GPU / no compiled layer: builds the transformers modules on the
          CPU (torch emulation of the FP8 kernel) and checks them and the
          conversions against the float64 reference (a smoke test of this
          script; needs cases.json, e.g. from build_lowprec.py).

Writes $OUT/lowprec-hf/summary.txt and results.json (or --out). Exit 0 when
no check failed and at least one passed, 1 a check failed, 2 nothing ran.
"""

import argparse
import contextlib
import copy
import json
import math
import os
import sys
import time
import traceback
import zlib

# No hub downloads (the GPU machine is offline; a hub probe would hang).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = os.path.dirname(os.path.abspath(__file__))

#: case of cases.json -> the transformers model whose experts it is compared with
HF_CASES = {
    "hf-qwen3-fp8": "qwen3",
    "hf-ds-fp8": "deepseek-v3",
    "hf-gptoss-mxfp4": "gpt-oss",
}
#: ||ours - HF|| / ||HF||. FP8: both quantize the activations, at different
#: roundings (HF: bf16 GEMM outputs and GLU; ours fused: the GLU reads f32):
#: the float64 model of our fused chain against HF's module (torch emulation
#: of its kernel, CPU) differs by 1.6e-2 on average, 2.5e-2 at most at T = 1
#: over 25 draws; leaving the activations unquantized would differ by ~4.4e-2.
TOL = {"fp8_block": 3.5e-2, "mxfp4": 2e-2}

try:  # the Triton kernel of transformers 4.57 (optional: GPU only)
    import triton
    import triton.language as tl
except Exception:  # noqa: BLE001
    triton = None


# ---------------------------------------------------------------------------
# transformers 4.57's FP8 block kernel (integrations/finegrained_fp8.py,
# Apache-2.0, "Copied from https://huggingface.co/deepseek-ai/DeepSeek-V3/
# blob/main/inference/kernel.py" / adapted from sglang), kept as it was.
# ---------------------------------------------------------------------------

if triton is not None:

    @triton.jit
    def _act_quant_kernel(x_ptr, y_ptr, s_ptr, BLOCK_SIZE: tl.constexpr):
        pid = tl.program_id(axis=0)
        offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + offs).to(tl.float32)
        s = tl.max(tl.abs(x)) / 448.0
        y = x / s
        y = y.to(y_ptr.dtype.element_ty)
        tl.store(y_ptr + offs, y)
        tl.store(s_ptr + pid, s)

    @triton.jit
    def _w8a8_block_fp8_matmul(
        A,
        B,
        C,
        As,
        Bs,
        M,
        N,
        K,
        group_n,
        group_k,
        stride_am,
        stride_ak,
        stride_bk,
        stride_bn,
        stride_cm,
        stride_cn,
        stride_As_m,
        stride_As_k,
        stride_Bs_k,
        stride_Bs_n,
        BLOCK_SIZE_M: tl.constexpr,
        BLOCK_SIZE_N: tl.constexpr,
        BLOCK_SIZE_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr,
    ):
        pid = tl.program_id(axis=0)
        num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
        num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
        num_pid_in_group = GROUP_SIZE_M * num_pid_n
        group_id = pid // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + (pid % group_size_m)
        pid_n = (pid % num_pid_in_group) // group_size_m

        offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
        offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
        offs_k = tl.arange(0, BLOCK_SIZE_K)
        a_ptrs = A + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
        b_ptrs = B + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

        As_ptrs = As + offs_am * stride_As_m
        offs_bsn = offs_bn // group_n
        Bs_ptrs = Bs + offs_bsn * stride_Bs_n

        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)

            k_start = k * BLOCK_SIZE_K
            offs_ks = k_start // group_k
            a_s = tl.load(As_ptrs + offs_ks * stride_As_k)
            b_s = tl.load(Bs_ptrs + offs_ks * stride_Bs_k)

            accumulator += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
            a_ptrs += BLOCK_SIZE_K * stride_ak
            b_ptrs += BLOCK_SIZE_K * stride_bk

        if C.dtype.element_ty == tl.bfloat16:
            c = accumulator.to(tl.bfloat16)
        elif C.dtype.element_ty == tl.float16:
            c = accumulator.to(tl.float16)
        else:
            c = accumulator.to(tl.float32)

        offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        c_ptrs = C + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
        c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
        tl.store(c_ptrs, c, mask=c_mask)


def triton_fp8_matmul(input, weight, weight_scale_inv, block_size, output_dtype=None, **_):
    """transformers 4.57 FP8Linear.forward's act_quant +
    w8a8_block_fp8_matmul_triton, as the `matmul` entry of transformers'
    finegrained-fp8 kernel bundle (input [..., K], weight [N, K] e4m3,
    weight_scale_inv [N/bn, K/bk] f32)."""
    import torch

    block_n, block_k = block_size
    K = input.shape[-1]
    assert K % block_k == 0, "act_quant needs K %% %d == 0" % block_k
    x = input.reshape(-1, K).contiguous()
    M = x.shape[0]
    N = weight.shape[0]
    out_dtype = output_dtype or input.dtype
    C = torch.empty(M, N, dtype=out_dtype, device=x.device)
    if M == 0:
        return C.reshape(*input.shape[:-1], N)
    q = torch.empty_like(x, dtype=torch.float8_e4m3fn)
    s = torch.empty(M, K // block_k, dtype=torch.float32, device=x.device)
    ctx = torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext()
    with ctx:  # (CPU: only under TRITON_INTERPRET=1)
        _act_quant_kernel[(triton.cdiv(x.numel(), block_k),)](x, q, s, BLOCK_SIZE=block_k)
        w = weight.contiguous()
        ws = weight_scale_inv.contiguous()
        bm = 128 if M >= 128 else max(triton.next_power_of_2(M), 16)

        def grid(meta):
            return (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)

        _w8a8_block_fp8_matmul[grid](
            q,
            w,
            C,
            s,
            ws,
            M,
            N,
            K,
            block_n,
            block_k,
            q.stride(-2),
            q.stride(-1),
            w.stride(1),
            w.stride(0),
            C.stride(-2),
            C.stride(-1),
            s.stride(-2),
            s.stride(-1),
            ws.stride(1),
            ws.stride(0),
            BLOCK_SIZE_M=bm,
            BLOCK_SIZE_N=block_n,
            BLOCK_SIZE_K=block_k,
            GROUP_SIZE_M=8,
        )
    return C.reshape(*input.shape[:-1], N)


def torch_fp8_matmul(input, weight, weight_scale_inv, block_size, output_dtype=None, **_):
    """The same computation in torch (float32): each row's 1 x block_k
    groups scaled by amax / 448 and cast to e4m3, times the dequantized
    weight blocks, output in `output_dtype`."""
    import torch

    block_n, block_k = block_size
    K = input.shape[-1]
    N = weight.shape[0]
    x = input.reshape(-1, K).float()
    M = x.shape[0]
    G = -(-K // block_k)
    xp = torch.nn.functional.pad(x, (0, G * block_k - K)).view(M, G, block_k)
    s = xp.abs().amax(dim=-1, keepdim=True) / 448.0
    q = (xp / s).to(torch.float8_e4m3fn).float()
    xq = (q * s).reshape(M, G * block_k)[:, :K]
    sc = weight_scale_inv.float().repeat_interleave(block_n, 0).repeat_interleave(block_k, 1)
    w = weight.float() * sc[:N, :K]
    out = xq @ w.t()
    return out.to(output_dtype or input.dtype).reshape(*input.shape[:-1], N)


# ---------------------------------------------------------------------------
# Weights, logits
# ---------------------------------------------------------------------------


def quantize_fp8_blocks(torch, w):
    """[E, N, K] -> (e4m3 codes, f32 scale_inv [E, N/128, K/128]): amax / 448
    per block (what lowprec_check.py and the checkpoints do)."""
    E, N, K = w.shape
    nb, kb = -(-N // 128), -(-K // 128)
    we = torch.nn.functional.pad(w.float(), (0, kb * 128 - K, 0, nb * 128 - N))
    blk = we.reshape(E, nb, 128, kb, 128)
    s = blk.abs().amax(dim=(2, 4)).clamp(min=1e-12) / 448.0
    q = (blk / s[:, :, None, :, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
    return q.reshape(E, nb * 128, kb * 128)[:, :N, :K].contiguous(), s.contiguous()


def quantize_mxfp4(torch, w):
    """[E, N, K] -> (packed e2m1 bytes [E, N, K/2] i8, low nibble first;
    E8M0 scales [E, N, K/32] float8_e8m0fnu)."""
    E, N, K = w.shape
    e2m1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=torch.float32, device=w.device)
    blk = w.float().reshape(E, N, K // 32, 32)
    amax = blk.abs().amax(dim=3).clamp(min=2.0**-120)
    exp = torch.ceil(torch.log2(amax / 6.0)).clamp(-127, 127)
    v = blk / torch.exp2(exp)[..., None]
    mag = v.abs().clamp(max=6.0)
    code = (mag[..., None] - e2m1).abs().argmin(dim=-1)
    code = (code | ((v < 0).to(torch.int64) << 3)).reshape(E, N, K)
    packed = (code[..., 0::2] | (code[..., 1::2] << 4)).to(torch.uint8).view(torch.int8)
    scales = (exp + 127).to(torch.uint8).view(torch.float8_e8m0fnu)
    return packed.contiguous(), scales.contiguous()


def designed_logits(torch, gen, T, E, k, n_group, topk_group, device):
    """(logits f32 [T, E], chosen bool [T, E]): per token k experts (inside
    topk_group randomly chosen groups, each holding at least one) with
    logits in [1, 3], the others in [-9, -6]: the top-k set is the chosen
    one under softmax and under sigmoid + group selection (with a
    correction bias well below the gap)."""
    key = torch.rand(T, E, generator=gen, device=device)
    if n_group > 1:
        size = E // n_group
        gkey = torch.rand(T, n_group, generator=gen, device=device)
        groups = torch.topk(gkey, topk_group, dim=1).indices
        gmask = torch.zeros(T, n_group, dtype=torch.bool, device=device)
        gmask.scatter_(1, groups, True)
        emask = gmask.repeat_interleave(size, dim=1)
        lead = key.view(T, n_group, size).argmax(dim=2)  # each group's first pick
        lead_mask = torch.zeros(T, n_group, size, dtype=torch.bool, device=device)
        lead_mask.scatter_(2, lead[..., None], True)
        key = key + 10.0 * emask + 5.0 * (lead_mask.view(T, E) & emask)
    ids = torch.topk(key, k, dim=1).indices
    chosen = torch.zeros(T, E, dtype=torch.bool, device=device)
    chosen.scatter_(1, ids, True)
    hi = 1.0 + 2.0 * torch.rand(T, E, generator=gen, device=device)
    lo = -9.0 + 3.0 * torch.rand(T, E, generator=gen, device=device)
    return torch.where(chosen, hi, lo), chosen


# ---------------------------------------------------------------------------
# transformers modules
# ---------------------------------------------------------------------------


def hf_block(kind, cfg):
    """(block, router, config) of the model's MoE block at the case's sizes
    and routing values."""
    H, I, E, k = cfg["hidden"], cfg["intermediate"], cfg["experts"], cfg["top_k"]
    if kind == "qwen3":
        from transformers import Qwen3MoeConfig
        from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock as B

        conf = Qwen3MoeConfig(
            hidden_size=H,
            moe_intermediate_size=I,
            num_experts=E,
            num_experts_per_tok=k,
            norm_topk_prob=cfg["normalize"],
            hidden_act="silu",
        )
        rname = "gate"
    elif kind == "deepseek-v3":
        from transformers import DeepseekV3Config
        from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE as B

        conf = DeepseekV3Config(
            hidden_size=H,
            moe_intermediate_size=I,
            n_routed_experts=E,
            num_experts_per_tok=k,
            n_group=cfg["n_group"],
            topk_group=cfg["topk_group"],
            routed_scaling_factor=cfg["scaling"],
            norm_topk_prob=cfg["normalize"],
            n_shared_experts=1,
            hidden_act="silu",
        )
        rname = "gate"
    elif kind == "gpt-oss":
        from transformers import GptOssConfig
        from transformers.models.gpt_oss.modeling_gpt_oss import GptOssMLP as B

        conf = GptOssConfig(
            hidden_size=H,
            intermediate_size=I,
            num_local_experts=E,
            num_experts_per_tok=k,
        )
        rname = "router"
    else:
        raise KeyError(kind)
    try:  # the plain per-expert loop of the modeling files
        conf._experts_implementation = "eager"
    except Exception:  # noqa: BLE001
        pass
    block = B(conf)
    return block, getattr(block, rname), conf


def router_on_logits(torch, router, E, rbias):
    """The model's router module fed logits directly (weight = identity, no
    bias; DeepSeek's e_score_correction_bias = ours), on the CPU in f32."""
    r = copy.deepcopy(router).cpu().float()
    r.hidden_dim = E
    r.weight = torch.nn.Parameter(torch.eye(E))
    if getattr(r, "bias", None) is not None:
        r.bias = torch.nn.Parameter(torch.zeros(E))
    if hasattr(r, "e_score_correction_bias"):
        r.e_score_correction_bias.copy_(
            rbias.float().cpu() if rbias is not None else torch.zeros(E)
        )

    def route(logits):
        with torch.no_grad():
            out = r(logits.float().cpu())
        w, ids = (out[1], out[2]) if len(out) == 3 else (out[0], out[1])
        return w.float(), ids.long()

    return route


def fp8_experts(torch, block, conf, dev):
    """The model's experts turned into transformers' FP8 experts module the
    way an FP8 checkpoint loads (replace_with_fp8_linear, weight_block_size
    [128, 128], dynamic activations), materialized on `dev` (uninitialized)."""
    from transformers.integrations import finegrained_fp8 as F8

    try:
        from transformers import FineGrainedFP8Config
    except ImportError:
        from transformers.utils.quantization_config import FineGrainedFP8Config
    qc = FineGrainedFP8Config(weight_block_size=[128, 128], activation_scheme="dynamic")
    holder = torch.nn.Module()
    holder.config = conf
    holder.moe = torch.nn.Module()
    holder.moe.experts = block.experts
    F8.replace_with_fp8_linear(holder, quantization_config=qc)
    ex = holder.moe.experts
    if not type(ex).__name__.startswith("FP8Expert") and not any(
        c.__name__.startswith("FP8Expert") for c in type(ex).__mro__
    ):
        raise RuntimeError("replace_with_fp8_linear left %s" % type(ex).__name__)
    return ex.to_empty(device=dev)


def install_fp8_kernel(torch, mode, dev):
    """Makes the FP8 experts' GEMM run with `mode` (auto: transformers' own
    when it loads, else the 4.57 Triton kernel, else torch); returns a label."""
    from transformers.integrations import finegrained_fp8 as F8

    hub = hasattr(F8, "FineGrainedFP8") and hasattr(F8, "load_finegrained_fp8_kernel")
    inline = hasattr(F8, "w8a8_block_fp8_matmul_triton")  # transformers <= 5.0
    if mode in ("auto", "hf") and dev.type == "cuda":
        if inline and not hub:
            return "transformers' in-file Triton kernel"
        if hub:
            try:
                F8._FINEGRAINED_FP8 = None
                F8.load_finegrained_fp8_kernel()
                return "transformers' finegrained-fp8 hub kernel (DeepGEMM if loadable)"
            except Exception as ex:  # noqa: BLE001
                if mode == "hf":
                    raise RuntimeError("transformers' FP8 kernel does not load: %s" % ex)
    elif mode == "hf":
        raise RuntimeError("transformers' FP8 kernels need CUDA")
    if not hub:
        raise RuntimeError(
            "this transformers has no FP8 kernel hook (finegrained_fp8.FineGrainedFP8)"
        )
    if mode in ("auto", "triton") and dev.type == "cuda" and triton is not None:
        fn, label = triton_fp8_matmul, "transformers 4.57 Triton kernel (copy)"
    elif mode == "triton":
        raise RuntimeError("the Triton kernel needs triton and CUDA")
    else:
        fn, label = torch_fp8_matmul, "torch emulation of the FP8 kernel"
    F8._FINEGRAINED_FP8 = F8.FineGrainedFP8(matmul=fn, batched_matmul=None, grouped_matmul=None)
    os.environ["TRANSFORMERS_DISABLE_DEEPGEMM_LINEAR"] = "1"  # our matmul, not DeepGEMM
    return label


def hf_fp8_dequantize(torch, q, s):
    """transformers' Fp8Dequantize of [E, N, K] codes with [E, N/128, K/128]
    scale_inv, float32."""
    from transformers.integrations import finegrained_fp8 as F8

    op = F8.Fp8Dequantize(None)
    return torch.stack(
        [op._dequantize_one(q[e], s[e], output_dtype=torch.float32) for e in range(q.shape[0])]
    )


def hf_mxfp4_dequantize(torch, packed, scales):
    """transformers' convert_moe_packed_tensors of our [E, N, K/2] bytes and
    [E, N, K/32] E8M0 scales (its *_blocks [E, N, K/32, 16] and uint8
    *_scales): [E, K, N] float32 (bf16 values), gpt-oss's layout."""
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    E, N, K2 = packed.shape
    blocks = packed.view(torch.uint8).reshape(E, N, K2 // 16, 16)
    return convert_moe_packed_tensors(
        blocks, scales.view(torch.uint8), dtype=torch.bfloat16
    ).float()


# ---------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------


def rel(torch, got, want):
    if got.numel() == 0:
        return 0.0
    if not torch.isfinite(got).all():
        return float("inf")
    got, want = got.double().cpu(), want.double().cpu()
    num = float(torch.linalg.vector_norm((got - want).reshape(-1)))
    den = float(torch.linalg.vector_norm(want.reshape(-1)))
    return num / den if den else (0.0 if num == 0 else float("inf"))


class Case:
    def __init__(self, torch, R, case, kind, dev, fn, kernel_mode):
        self.torch, self.R, self.case, self.kind, self.dev, self.fn = (
            torch,
            R,
            case,
            kind,
            dev,
            fn,
        )
        c = self.cfg = case["config"]
        self.name = case["name"]
        self.fmt = c["weight_format"]
        H, I, E = self.H, self.I, self.E = c["hidden"], c["intermediate"], c["experts"]
        self.k = c["top_k"]
        block, router, conf = hf_block(kind, c)
        self.impl = getattr(conf, "_experts_implementation", None)
        # bf16 weights, then the checkpoint format
        up_scale = (4.0 if kind == "gpt-oss" else 1.0) / math.sqrt(H)
        wu16 = self.gen("wu", (E, 2 * I, H), up_scale).to(torch.bfloat16)
        wd16 = self.gen("wd", (E, H, I), 1.0 / math.sqrt(I)).to(torch.bfloat16)
        self.rbias = self.gen("rbias", (E,), 0.05) if c["routing_bias"] else None
        self.ebias = []
        if c["expert_bias"]:
            self.ebias = [
                self.gen("bu", (E, 2 * I), 0.5).to(torch.bfloat16),
                self.gen("bd", (E, H), 0.1).to(torch.bfloat16),
            ]
        if self.fmt == "fp8_block":
            self.wu, self.su = quantize_fp8_blocks(torch, wu16)
            self.wd, self.sd = quantize_fp8_blocks(torch, wd16)
        elif self.fmt == "mxfp4":
            self.wu, self.su = quantize_mxfp4(torch, wu16)
            self.wd, self.sd = quantize_mxfp4(torch, wd16)
        else:
            raise ValueError("weight_format %r" % self.fmt)
        del wu16, wd16
        self.route = router_on_logits(torch, router, E, self.rbias)
        # float64 decoding of the weights (reference.py) and the conversion check
        u8 = lambda t: t.view(torch.uint8).cpu().numpy()  # noqa: E731
        self.sc_np = (
            (self.su.cpu().numpy(), self.sd.cpu().numpy())
            if self.fmt == "fp8_block"
            else (u8(self.su), u8(self.sd))
        )
        exact_u = torch.as_tensor(R.dequantize_weights(u8(self.wu), self.fmt, self.sc_np[0]))
        exact_d = torch.as_tensor(R.dequantize_weights(u8(self.wd), self.fmt, self.sc_np[1]))
        with torch.no_grad():
            if self.fmt == "fp8_block":
                try:
                    hu = hf_fp8_dequantize(torch, self.wu, self.su)  # [E, 2I, H]
                    hd = hf_fp8_dequantize(torch, self.wd, self.sd)
                    self.conv = max(rel(torch, hu, exact_u), rel(torch, hd, exact_d))
                except Exception as ex:  # noqa: BLE001 (its API moves between versions)
                    self.conv = "Fp8Dequantize: %s: %s" % (type(ex).__name__, str(ex)[:200])
                    hu, hd = exact_u.float(), exact_d.float()
                # the model's plain experts with the dequantized weights (f32)
                self.plain = block.experts.to(dev).float()
                self.plain.gate_up_proj.copy_(hu.to(dev))
                self.plain.down_proj.copy_(hd.to(dev))
                self.kernel = install_fp8_kernel(torch, kernel_mode, dev)
                ex = fp8_experts(torch, block, conf, dev)
                ex.gate_up_proj.copy_(self.wu)
                ex.gate_up_proj_scale_inv.copy_(self.su)
                ex.down_proj.copy_(self.wd)
                ex.down_proj_scale_inv.copy_(self.sd)
                if hasattr(ex, "_deepgemm_disabled") and "hub" not in self.kernel:
                    ex._deepgemm_disabled = True
                self.hf = ex.eval()
                self.module = type(ex).__name__
            else:
                # gpt-oss: [E, K, N] weights, interleaved gate/up columns
                hu = hf_mxfp4_dequantize(torch, self.wu, self.su)  # [E, H, 2I]
                hd = hf_mxfp4_dequantize(torch, self.wd, self.sd)  # [E, I, H]
                self.conv = max(
                    rel(torch, hu, exact_u.transpose(1, 2)), rel(torch, hd, exact_d.transpose(1, 2))
                )
                ex = block.experts.to(dev).float()
                ex.gate_up_proj.copy_(hu.to(dev))
                ex.down_proj.copy_(hd.to(dev))
                ex.gate_up_proj_bias.copy_(self.ebias[0].float())
                ex.down_proj_bias.copy_(self.ebias[1].float())
                for attr, want in (("alpha", c["alpha"]), ("limit", c["limit"])):
                    got = getattr(ex, attr, want)
                    if abs(got - want) > 1e-6:
                        raise RuntimeError("GptOssExperts.%s = %r, ours %r" % (attr, got, want))
                self.hf = ex.eval()
                self.kernel = "dequantized by convert_moe_packed_tensors, float32"
                self.module = type(ex).__name__
                self.plain = None
        del block

    def gen(self, key, shape, scale=1.0):
        torch = self.torch
        g = torch.Generator(device=self.dev)
        g.manual_seed(zlib.crc32(("hflp/%s/%s" % (self.name, key)).encode()))
        return torch.randn(shape, dtype=torch.float32, device=self.dev, generator=g) * scale

    def run(self, T):
        torch, R, c = self.torch, self.R, self.cfg
        g = torch.Generator(device=self.dev)
        g.manual_seed(zlib.crc32(("hflp/%s/lg/%d" % (self.name, T)).encode()))
        lg32, chosen = designed_logits(
            torch, g, T, self.E, self.k, c["n_group"], c["topk_group"], self.dev
        )
        lg = lg32.to(torch.float32 if c.get("logits_dtype") == "f32" else torch.bfloat16)
        x = self.gen("x/%d" % T, (T, self.H)).to(torch.bfloat16)
        # the routing HF applies (its router on the very logits we get)
        w_hf, ids_hf = self.route(lg)
        got_set = torch.zeros(T, self.E, dtype=torch.bool)
        got_set.scatter_(1, ids_hf, True)
        route_bad = int((got_set != chosen.cpu()).any(dim=1).sum())
        ids_d, w_d = ids_hf.to(self.dev), w_hf.to(self.dev)
        with torch.no_grad():
            if self.fmt == "fp8_block":
                y_hf = self.hf(x, ids_d, w_d)
                y_plain = self.plain(x.float(), ids_d, w_d)
            else:
                y_hf = self.hf(x.float(), ids_d, w_d)
                y_plain = None
        if isinstance(y_hf, tuple):
            y_hf = y_hf[0]
        # the float64 reference of the format (reference.py), our routing
        np64 = lambda t: t.double().cpu().numpy()  # noqa: E731
        u8 = lambda t: t.view(torch.uint8).cpu().numpy()  # noqa: E731
        want, _, defined = R.ffn(
            np64(x),
            np64(lg),
            u8(self.wu),
            u8(self.wd),
            "bf16",
            self.k,
            c["scoring"],
            bias=np64(self.rbias) if self.rbias is not None else None,
            w_up_bias=np64(self.ebias[0]) if self.ebias else None,
            w_down_bias=np64(self.ebias[1]) if self.ebias else None,
            w_up_scale=self.sc_np[0],
            w_down_scale=self.sc_np[1],
            **self.case["reference_attrs"],
        )
        want = torch.as_tensor(want)
        r = dict(
            route_mismatch=route_bad,
            ref_ambiguous_rows=int((~defined).sum()),
            hf_vs_ref=rel(torch, y_hf, want),
            conv_err=self.conv if not isinstance(self.conv, str) else None,
        )
        if self.fn is not None:
            y = torch.full((T, self.H), float("nan"), dtype=torch.bfloat16, device=self.dev)
            extra = ([self.rbias] if self.rbias is not None else []) + self.ebias
            self.fn(x, lg, self.wu, self.wd, *extra, self.su, self.sd, y)
            torch.cuda.synchronize()
            r["err"] = rel(torch, y, y_hf)
            r["ours_vs_ref"] = rel(torch, y, want)
            if y_plain is not None:
                r["ours_vs_plain"] = rel(torch, y, y_plain)
        if y_plain is not None:
            r["hf_vs_plain"] = rel(torch, y_hf, y_plain)
        return r


# ---------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=HERE)
    ap.add_argument("--T", default="1,7,64,300,1024")
    ap.add_argument("--only", default="")
    ap.add_argument("--fp8-kernel", default="auto", choices=("auto", "hf", "triton", "torch"))
    ap.add_argument("--cpu", action="store_true", help="no GPU: the HF side and conversions only")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    art = os.path.abspath(args.dir)
    ref_dir = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir, "Differential"))
    for p in (ref_dir, art):  # the artifacts' copies first
        if os.path.isdir(p):
            sys.path.insert(0, p)
    import torch

    out = args.out or os.path.join(os.environ.get("OUT", os.getcwd()), "lowprec-hf")
    os.makedirs(out, exist_ok=True)
    lines, rows = [], []
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}

    def emit(status, check, T, detail, **kw):
        counts[status] += 1
        line = "%-4s %-24s T=%-5s %s" % (status, check, T, detail)
        rows.append(dict(status=status, check=check, T=T, detail=detail, **kw))
        lines.append(line)
        print(line, flush=True)

    try:
        import transformers

        tv = transformers.__version__
    except Exception as ex:  # noqa: BLE001
        transformers, tv = None, "missing (%s)" % ex
    with open(os.path.join(art, "cases.json")) as f:
        meta = json.load(f)
    if args.cpu:
        dev, gpu = torch.device("cpu"), "cpu"
        kernel_mode = "torch"
        rt = None
    else:
        dev, gpu = torch.device("cuda:0"), torch.cuda.get_device_name(0)
        kernel_mode = args.fp8_kernel
        import moe_mlir_runtime as rt
    m = torch.backends.cuda.matmul
    try:
        m.fp32_precision = "ieee"
    except Exception:  # noqa: BLE001
        m.allow_tf32 = False
    import reference as R

    head = "=== HF low-precision parity: commit %s, transformers %s, torch %s, %s" % (
        meta.get("commit"),
        tv,
        torch.__version__,
        gpu,
    )
    print(head, flush=True)
    lines.append(head)
    start = time.time()
    only = [s for s in args.only.split(",") if s]
    Ts = [int(t) for t in args.T.split(",") if t]
    cases = [c for c in meta["cases"] if c["name"] in HF_CASES and (not only or c["name"] in only)]
    if not cases:
        emit("SKIP", "-", "-", "no case of %s in cases.json" % ", ".join(HF_CASES))
    for case in cases:
        name, kind = case["name"], HF_CASES[case["name"]]
        prefix = "fp8" if case["config"]["weight_format"] == "fp8_block" else "mxfp4"
        check = "%s/%s" % (prefix, name)
        if transformers is None:
            emit("SKIP", check, "-", "transformers: %s" % tv)
            continue
        t0 = time.time()
        try:
            fn = None
            if rt is not None:
                fn = rt.load(os.path.join(art, case["library"])).fn("ffn")
            c = Case(torch, R, case, kind, dev, fn, kernel_mode)
        except (ImportError, AttributeError) as ex:
            traceback.print_exc()
            emit("SKIP", check, "-", "transformers lacks it: %s: %s" % (type(ex).__name__, ex))
            continue
        except Exception as ex:  # noqa: BLE001
            traceback.print_exc()
            emit("FAIL", check, "-", "setup: %s: %s" % (type(ex).__name__, str(ex)[:300]))
            continue
        if isinstance(c.conv, str):
            emit("SKIP", "conv/%s" % name, "-", c.conv)
        else:
            emit(
                # f32 products of e4m3 codes and f32 scales (HF's fp8 dequantization
                # runs in float32); MXFP4 values are exact in bf16
                "PASS" if c.conv <= (1e-6 if c.fmt == "fp8_block" else 0.0) else "FAIL",
                "conv/%s" % name,
                "-",
                "transformers' dequantization of our %s weights vs float64 decoding: rel err %.1e"
                % (case["config"]["weight_format"], c.conv),
            )
        print(
            "    %s: %s (%s, experts impl %r), HF kernel: %s"
            % (name, c.module, kind, c.impl, c.kernel),
            flush=True,
        )
        tol = TOL[c.fmt]
        for T in Ts:
            try:
                r = c.run(T)
            except Exception as ex:  # noqa: BLE001
                traceback.print_exc()
                emit("FAIL", check, T, "%s: %s" % (type(ex).__name__, str(ex)[:300]))
                continue
            f = lambda v: "%.2e" % v if v is not None else "-"  # noqa: E731
            if c.fn is not None:
                # and against the float64 reference: catches a layer that (like
                # HF) is off by ~tol in the other direction, e.g. unquantized
                # activations (~4.4e-2)
                ok = r["err"] <= tol and r["ours_vs_ref"] <= tol and r["route_mismatch"] == 0
                detail = "vs HF %s (tol %.1e) | vs f64 ref: ours %s, HF %s" % (
                    f(r["err"]),
                    tol,
                    f(r["ours_vs_ref"]),
                    f(r["hf_vs_ref"]),
                )
                if "ours_vs_plain" in r:
                    detail += " | vs HF dequantized, no act quant: ours %s, HF %s" % (
                        f(r["ours_vs_plain"]),
                        f(r["hf_vs_plain"]),
                    )
            else:  # --cpu: the HF side against the reference
                ok = r["hf_vs_ref"] <= tol and r["route_mismatch"] == 0
                detail = "HF vs f64 ref %s (tol %.1e)" % (f(r["hf_vs_ref"]), tol)
                if "hf_vs_plain" in r:
                    detail += " | HF vs HF dequantized, no act quant %s" % f(r["hf_vs_plain"])
            detail += " | route: %d tokens off the chosen experts" % r["route_mismatch"]
            emit(
                "PASS" if ok else "FAIL",
                check,
                T,
                detail,
                case=name,
                kernel=c.kernel,
                module=c.module,
                **r,
            )
        print("    %s: %.1fs" % (name, time.time() - t0), flush=True)
        del c
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    tail = "%d PASS, %d FAIL, %d SKIP in %.0fs" % (
        counts["PASS"],
        counts["FAIL"],
        counts["SKIP"],
        time.time() - start,
    )
    print(tail)
    lines.append(tail)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(
            dict(
                meta=dict(
                    commit=meta.get("commit"), transformers=tv, torch=torch.__version__, gpu=gpu
                ),
                results=rows,
            ),
            f,
            indent=1,
        )
    if counts["FAIL"]:
        return 1
    return 0 if counts["PASS"] else 2


if __name__ == "__main__":
    sys.exit(main())
