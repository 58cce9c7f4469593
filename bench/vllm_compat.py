"""What the vendored vLLM fused_moe functions need from the rest of vLLM.

bench/fetch_vllm_fused_moe.sh copies this file next to the generated
vllm_fused_moe_fp8.py (bench-variants/vllm_fp8/), whose verbatim vLLM
functions import their vLLM globals from here:

  current_platform, envs, logger, get_device_name_as_file_name
      small stand-ins for vllm.platforms / vllm.envs / vllm.logger /
      vllm.utils.platform_utils (CUDA only, vLLM's defaults: no batch
      invariance; VLLM_TUNED_CONFIG_FOLDER read from the environment);
  moe_align_block_size
      vLLM's CUDA op (vllm._C moe_align_block_size) as three small Triton
      kernels (count, offsets, scatter; the plain-torch version
      moe_align_block_size_torch, ~25 launches, with VLLM_COMPAT_ALIGN=torch),
      same outputs and padding sentinel; no host synchronisation, so it can
      be captured in a CUDA graph;
  silu_and_mul, moe_sum
      replacements of vLLM's CUDA ops _C.silu_and_mul (a Triton kernel
      here, f32 math, one bf16 rounding) and _C.moe_sum (torch sum over
      the top-k axis).

The device machine has torch and triton but no vLLM: nothing here imports
vllm.
"""

import logging
import os
import re

import torch
import triton
import triton.language as tl

logger = logging.getLogger("vllm_fused_moe_fp8")
_said = set()


def _once(fn, msg, *args, **_kwargs):
    key = msg % args if args else msg
    if key not in _said:
        _said.add(key)
        fn(key)


logger.warning_once = lambda msg, *a, **k: _once(logger.warning, msg, *a, **k)
logger.info_once = lambda msg, *a, **k: _once(logger.info, msg, *a, **k)


class _Envs:
    """vllm.envs at its defaults; VLLM_TUNED_CONFIG_FOLDER from the
    environment as in vLLM (a folder of tuned tile tables, read before the
    vendored configs/)."""

    VLLM_BATCH_INVARIANT = False
    VLLM_TUNED_CONFIG_FOLDER = os.environ.get("VLLM_TUNED_CONFIG_FOLDER")


envs = _Envs()


class _CudaPlatform:
    """vllm.platforms.current_platform on an NVIDIA GPU."""

    @staticmethod
    def is_rocm():
        return False

    @staticmethod
    def is_cuda():
        return True

    @staticmethod
    def is_cuda_alike():
        return True

    @staticmethod
    def is_xpu():
        return False

    @staticmethod
    def is_device_capability(capability, device_id=0):
        major, minor = torch.cuda.get_device_capability(device_id)
        return major * 10 + minor == capability

    @staticmethod
    def fp8_dtype():
        return torch.float8_e4m3fn

    @staticmethod
    def get_device_name(device_id=0):
        return torch.cuda.get_device_name(device_id)


current_platform = _CudaPlatform()


def get_device_name_as_file_name(device_id=0):
    """vllm.utils.platform_utils.get_device_name_as_file_name."""
    return re.sub(r"[\s/]+", "_", current_platform.get_device_name(device_id))


def _max_padded(numel, block_size, num_experts, pad_sorted_ids):
    """The length of sorted_token_ids, as vLLM's wrapper sizes it."""
    max_padded = numel + num_experts * (block_size - 1)
    if pad_sorted_ids:
        max_padded = triton.cdiv(max_padded, block_size) * block_size
    if numel < num_experts:
        max_padded = min(numel * block_size, max_padded)
    return max_padded


@triton.jit
def _align_count_kernel(ids_ptr, counts_ptr, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    e = tl.load(ids_ptr + offs, mask=mask, other=0)
    tl.atomic_add(counts_ptr + e, 1, mask=mask)


@triton.jit
def _align_offsets_kernel(
    counts_ptr,
    cursor_ptr,
    expert_ids_ptr,
    post_pad_ptr,
    sorted_ids_ptr,
    num_experts,
    numel,
    max_padded,
    num_blocks,
    block_size,
    E_P2: tl.constexpr,
    CHUNK: tl.constexpr,
    FILL: tl.constexpr,
):
    ex = tl.arange(0, E_P2)
    emask = ex < num_experts
    counts = tl.load(counts_ptr + ex, mask=emask, other=0)
    padded = (counts + block_size - 1) // block_size * block_size
    ends = tl.cumsum(padded, 0)
    tl.store(cursor_ptr + ex, ends - padded, mask=emask)  # each expert's first row
    tl.store(post_pad_ptr, tl.sum(padded, 0))
    ends = tl.where(emask, ends, 2147483647)
    for b0 in range(0, num_blocks, CHUNK):
        blocks = b0 + tl.arange(0, CHUNK)
        start = blocks * block_size
        expert = tl.sum((ends[None, :] <= start[:, None]).to(tl.int32), 1)
        expert = tl.minimum(expert, num_experts - 1)
        tl.store(expert_ids_ptr + blocks, expert, mask=blocks < num_blocks)
    for s0 in range(0, max_padded, FILL):
        offs = s0 + tl.arange(0, FILL)
        tl.store(sorted_ids_ptr + offs, tl.zeros([FILL], tl.int32) + numel, mask=offs < max_padded)


@triton.jit
def _align_scatter_kernel(ids_ptr, cursor_ptr, sorted_ids_ptr, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    e = tl.load(ids_ptr + offs, mask=mask, other=0)
    row = tl.atomic_add(cursor_ptr + e, 1, mask=mask)
    tl.store(sorted_ids_ptr + row, offs.to(tl.int32), mask=mask)


def moe_align_block_size(
    topk_ids,
    block_size,
    num_experts,
    expert_map=None,
    pad_sorted_ids=False,
    ignore_invalid_experts=False,
):
    """vllm.model_executor.layers.fused_moe.moe_align_block_size with its
    CUDA op in Triton: (sorted_token_ids int32 [max_padded], expert_ids int32
    [max_padded / block_size], num_tokens_post_pad int32 [1]). Each
    expert's slots (indices into topk_ids.flatten()) fill a segment padded
    to a multiple of block_size with the sentinel topk_ids.numel(); the
    segments follow in expert order; expert_ids[b] is the expert of block b.
    Within a segment the slots come in the order of the atomics, as in the
    CUDA op (any order computes the same). Blocks past num_tokens_post_pad
    (which the GEMM kernel skips) repeat the last expert."""
    if os.environ.get("VLLM_COMPAT_ALIGN") == "torch":
        return moe_align_block_size_torch(
            topk_ids, block_size, num_experts, expert_map, pad_sorted_ids, ignore_invalid_experts
        )
    if expert_map is not None:
        raise NotImplementedError("expert_map (expert parallelism) is not vendored")
    device = topk_ids.device
    ids = topk_ids.reshape(-1)
    numel = ids.numel()
    max_padded = _max_padded(numel, block_size, num_experts, pad_sorted_ids)
    blocks = triton.cdiv(max_padded, block_size)
    counts = torch.zeros(num_experts, dtype=torch.int32, device=device)
    cursor = torch.empty(num_experts, dtype=torch.int32, device=device)
    sorted_ids = torch.empty((max_padded,), dtype=torch.int32, device=device)
    expert_ids = torch.empty((blocks,), dtype=torch.int32, device=device)
    num_tokens_post_pad = torch.empty((1,), dtype=torch.int32, device=device)
    BLOCK = 1024
    grid = (triton.cdiv(numel, BLOCK),)
    _align_count_kernel[grid](ids, counts, numel, BLOCK=BLOCK)
    _align_offsets_kernel[(1,)](
        counts,
        cursor,
        expert_ids,
        num_tokens_post_pad,
        sorted_ids,
        num_experts,
        numel,
        max_padded,
        blocks,
        block_size,
        E_P2=triton.next_power_of_2(num_experts),
        CHUNK=32,
        FILL=1024,
        num_warps=4,
    )
    _align_scatter_kernel[grid](ids, cursor, sorted_ids, numel, BLOCK=BLOCK)
    return sorted_ids, expert_ids, num_tokens_post_pad


def moe_align_block_size_torch(
    topk_ids,
    block_size,
    num_experts,
    expert_map=None,
    pad_sorted_ids=False,
    ignore_invalid_experts=False,
):
    """moe_align_block_size in plain torch (a stable sort: within a segment
    the slots keep their order)."""
    if expert_map is not None:
        raise NotImplementedError("expert_map (expert parallelism) is not vendored")
    device = topk_ids.device
    numel = topk_ids.numel()
    max_padded = _max_padded(numel, block_size, num_experts, pad_sorted_ids)
    flat = topk_ids.reshape(-1).to(torch.int64)
    counts = torch.zeros(num_experts, dtype=torch.int64, device=device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block_size - 1) // block_size * block_size
    ends = torch.cumsum(padded, 0)
    starts = ends - padded
    order = torch.argsort(flat, stable=True)  # slots grouped by expert
    expert_of = flat[order]
    first = torch.cumsum(counts, 0) - counts  # first sorted slot of each expert
    pos = starts[expert_of] + torch.arange(numel, device=device) - first[expert_of]
    sorted_ids = torch.full((max_padded,), numel, dtype=torch.int32, device=device)
    sorted_ids.scatter_(0, pos, order.to(torch.int32))
    blocks = triton.cdiv(max_padded, block_size)
    block_start = torch.arange(blocks, device=device, dtype=torch.int64) * block_size
    expert_ids = torch.searchsorted(ends, block_start, right=True)
    expert_ids = expert_ids.clamp_(max=num_experts - 1).to(torch.int32)
    num_tokens_post_pad = ends[-1:].to(torch.int32)
    return sorted_ids, expert_ids, num_tokens_post_pad


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, d, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    gate = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + d + cols, mask=mask, other=0.0).to(tl.float32)
    y = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(out, x):
    """out [M, d] = silu(x[:, :d]) * x[:, d:] (vLLM's _C.silu_and_mul)."""
    M, d = out.shape
    assert x.shape == (M, 2 * d) and x.stride(1) == 1 and out.stride(1) == 1
    if M == 0:
        return out
    BLOCK = 1024
    _silu_and_mul_kernel[(M, triton.cdiv(d, BLOCK))](
        x, out, d, x.stride(0), out.stride(0), BLOCK=BLOCK, num_warps=4
    )
    return out


def moe_sum(x, out=None):
    """out [M, K] = x [M, top_k, K] summed over top_k (vLLM's _C.moe_sum)."""
    if out is None:
        return x.sum(dim=1)
    return torch.sum(x, dim=1, out=out)
