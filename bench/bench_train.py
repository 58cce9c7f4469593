#!/usr/bin/env python3
"""Issue 47's benchmark: forward + backward of the bench layers (the four
configs of bench_moe.py, softmax top-k renormalised, SwiGLU concat,
nn.Linear weights, bf16) at T = 4096 and 16384, and SonicMoE's "7B"
shape at T = 24576 (EXTRA: its published fwd + bwd time printed beside
ours for reference), ours against the torchtitan-style layer (torch
routing, argsort dispatch, two torch._grouped_mm with autograd) in the
same cell.

Build here (the compiler; OUT default bench-artifacts-train):
  python3 bench/bench_train.py --build OUT
Run there (torch, the GPU), from the repository root with OUT carried:
  python3 bench/bench_train.py --dir OUT --out "$OUT" [--configs ...] [--T ...]

Per cell: ours = moe_mlir_runtime.ffn_autograd of the layer's training
library (@ffn_train + @ffn_grad), torch = the grouped-mm layer; both
called eagerly (forward, then backward of sum(y * dy)), the median of
runs between CUDA events with L2 flushed before each (bench_moe.Timer);
TFLOP/s counts 3x the forward's GEMM FLOPs; the gradients of x, the
logits and both weights are compared between the two (rel. err, bf16;
torch's weight gradients in bf16, ours cast from f32). Writes
OUT/train.md and prints the table.

--gemms: the expert GEMMs alone, per layer and T (rows routed by a random
top-k): our forward grouped matmuls (up: [T k, H] x [E, 2I, H]^T, down)
and our weight gradients (moe.grouped_matmul_wgrad, f32 and bf16
results) against torch._grouped_mm's (the ragged-K form autograd uses,
bf16 results), in TFLOP/s; writes OUT/gemms.md."""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CONFIGS = ("qwen3-30b-a3b", "gpt-oss-120b", "mixtral-8x7b", "deepseek-v3", "sonicmoe-7b")
# Layers outside the presets, at their own T, with a published fwd + bwd
# time for reference (not a same-run baseline): SonicMoE's "7B" shape
# (arXiv 2512.14080, Fig. 6: H100, T = 24576, H = 1536, I = 256, E = 128,
# k = 8), SonicMoE 3.410 ms, ScatterMoE 6.223, DeepGEMM++ 5.073.
EXTRA = {
    "sonicmoe-7b": dict(
        base="qwen3-30b-a3b",
        shape=dict(hidden=1536, intermediate=256, experts=128, top_k=8),
        T=(24576,),
        published=("SonicMoE (paper, H100)", 3410.0),
    ),
}


def cell_ts(args, name):
    """The T of `name`'s cells: --T, or an EXTRA layer's own."""
    if name in EXTRA:
        return list(EXTRA[name]["T"])
    return [int(t) for t in args.T.split(",")]


def bench_config(name):
    """The bench's simplification of preset `name` (bench_moe.py's layers):
    softmax top-k renormalised, no routing bias or groups, SwiGLU concat,
    nn.Linear weights, no expert biases."""
    from moe_mlir import PRESETS

    extra = EXTRA.get(name)
    base = PRESETS[extra["base"]].replace(**extra["shape"]) if extra else PRESETS[name]
    return base.replace(
        scoring="softmax",
        normalize=True,
        n_group=1,
        topk_group=1,
        group_score="max",
        scaling=1.0,
        routing_bias=False,
        expert_bias=False,
        activation="silu",
        layout="concat",
        alpha=1.0,
        limit=None,
        up_bias=0.0,
        transpose_weights=True,
        logits_dtype=None,
    )


def build(out):
    sys.path.insert(0, os.path.join(REPO, "build", "python_packages"))
    import shutil

    from moe_mlir import gpu, training_from_config

    os.makedirs(out, exist_ok=True)
    shapes = {}
    for name in CONFIGS:
        cfg = bench_config(name)
        # bf16 weight gradients, as torch's layer returns them
        gpu.compile_gpu(
            training_from_config(cfg, weight_grads="weights"),
            os.path.join(out, name + ".train.so"),
        )
        shapes[name] = dict(H=cfg.hidden, I=cfg.intermediate, E=cfg.experts, k=cfg.top_k)
        print("built", name, flush=True)
    with open(os.path.join(out, "train_layers.json"), "w") as f:
        json.dump(shapes, f, indent=1)
    for name in CONFIGS:
        cfg = bench_config(name)
        gpu.compile_gpu(
            gemms_module(cfg.hidden, cfg.intermediate, cfg.experts),
            os.path.join(out, name + ".gemms.so"),
        )
        print("built", name, "gemms", flush=True)
    for f in ("bench_train.py", "bench_moe.py", "gen_layers.py", "torch_reference.py"):
        src = os.path.join(HERE, f)
        if os.path.exists(src):
            shutil.copy(src, out)
    sys.path.insert(0, os.path.join(REPO, "python", "runtime"))
    import ship  # the runtime package's own copier

    ship.copy_package(out)
    return 0


def setup(args):
    """There: torch, the runtime, the layers' shapes and bench_moe's timer."""
    sys.path.insert(0, args.dir)
    import torch

    import bench_moe as BM
    import moe_mlir_runtime as rt

    BM.torch = torch
    with open(os.path.join(args.dir, "train_layers.json")) as f:
        shapes = json.load(f)
    return torch, rt, shapes, BM.Timer(args)


def write_table(args, name, title, lines):
    """Prints the table and writes it to OUT/name under `title`."""
    text = "\n".join(lines)
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, name), "w") as f:
        f.write("# %s\n\n%s\n" % (title, text))


def gemms_module(H, I, E):
    """The layer's four expert GEMMs (bf16, nn.Linear weights) and the
    weight gradients with bf16 results, as MLIR text."""
    off = "tensor<%dxi32>" % (E + 1)

    def fwd(name, K, N):
        return (
            "func.func @%s(%%x: tensor<?x%dxbf16>, %%w: tensor<%dx%dx%dxbf16>, %%off: %s)"
            " -> tensor<?x%dxbf16> {\n"
            "  %%y = moe.grouped_matmul %%x, %%w offsets(%%off : %s) {transpose_rhs = true}"
            " : tensor<?x%dxbf16>, tensor<%dx%dx%dxbf16> -> tensor<?x%dxbf16>\n"
            "  return %%y : tensor<?x%dxbf16>\n}\n"
            % (name, K, E, N, K, off, N, off, K, E, N, K, N, N)
        )

    def wgrad(name, K, N, O):
        return (
            "func.func @%s(%%d: tensor<?x%dxbf16>, %%x: tensor<?x%dxbf16>, %%off: %s)"
            " -> tensor<%dx%dx%dx%s> {\n"
            "  %%g = moe.grouped_matmul_wgrad %%d, %%x offsets(%%off : %s)"
            " : tensor<?x%dxbf16>, tensor<?x%dxbf16> -> tensor<%dx%dx%dx%s>\n"
            "  return %%g : tensor<%dx%dx%dx%s>\n}\n"
            % (name, K, N, off, E, K, N, O, off, K, N, E, K, N, O, E, K, N, O)
        )

    return "".join(
        [
            fwd("fwd_up", H, 2 * I),
            fwd("fwd_down", I, H),
            wgrad("wgrad_up", 2 * I, H, "f32"),
            wgrad("wgrad_down", H, I, "f32"),
            wgrad("wgrad_up_bf16", 2 * I, H, "bf16"),
            wgrad("wgrad_down_bf16", H, I, "bf16"),
        ]
    )


def run_gemms(args):
    """--gemms: see the module docstring."""
    torch, rt, shapes, timer = setup(args)
    rows = []
    for name in args.configs.split(","):
        s = shapes[name]
        H, I, E, k = s["H"], s["I"], s["E"], s["k"]
        art = rt.load(os.path.join(args.dir, name + ".gemms.so"))
        g = torch.Generator(device="cuda").manual_seed(48)
        bf16 = dict(dtype=torch.bfloat16, device="cuda")
        w_up = torch.randn(E, 2 * I, H, generator=g, **bf16) / H**0.5
        w_down = torch.randn(E, H, I, generator=g, **bf16) / I**0.5
        for T in cell_ts(args, name):
            M = T * k
            ids = torch.randn(T, E, generator=g, device="cuda").topk(k, dim=1).indices
            counts = torch.bincount(ids.reshape(-1), minlength=E)
            cum = torch.cumsum(counts, 0).to(torch.int32)
            off = torch.cat([torch.zeros(1, dtype=torch.int32, device="cuda"), cum])
            x = torch.randn(M, H, generator=g, **bf16)
            a = torch.randn(M, I, generator=g, **bf16)
            d_up = torch.randn(M, 2 * I, generator=g, **bf16)
            d_down = torch.randn(M, H, generator=g, **bf16)
            # The forward GEMMs' rows are not determined by their inputs'
            # shapes (the manifest's rule): their outputs are passed.
            y_up = torch.empty(M, 2 * I, **bf16)
            y_down = torch.empty(M, H, **bf16)
            cases = [
                (
                    "fwd_up",
                    lambda: art.fn("fwd_up")(x, w_up, off, y_up),
                    lambda: torch._grouped_mm(x, w_up.transpose(1, 2), offs=cum),
                    2 * I * H,
                ),
                (
                    "fwd_down",
                    lambda: art.fn("fwd_down")(a, w_down, off, y_down),
                    lambda: torch._grouped_mm(a, w_down.transpose(1, 2), offs=cum),
                    I * H,
                ),
                (
                    "wgrad_up",
                    lambda: art.fn("wgrad_up")(d_up, x, off),
                    lambda: torch._grouped_mm(d_up.t(), x, offs=cum),
                    2 * I * H,
                ),
                ("wgrad_up_bf16", lambda: art.fn("wgrad_up_bf16")(d_up, x, off), None, 2 * I * H),
                (
                    "wgrad_down",
                    lambda: art.fn("wgrad_down")(d_down, a, off),
                    lambda: torch._grouped_mm(d_down.t(), a, offs=cum),
                    I * H,
                ),
                ("wgrad_down_bf16", lambda: art.fn("wgrad_down_bf16")(d_down, a, off), None, I * H),
            ]
            for gemm, ours, ref, kn in cases:
                cell = dict(layer=name, T=T, gemm=gemm)
                flops = 2 * M * kn
                try:
                    got = ours()
                    torch.cuda.synchronize()
                    if ref is not None:
                        # on a slice (4 experts / 4096 rows): a whole f32
                        # DeepSeek-V3 gradient is 30 GB
                        cut = slice(0, 4 if got.dim() == 3 else 4096)
                        want = ref()[cut].float()
                        part = got[cut].float()
                        cell["rel_err"] = float(
                            (part - want).norm() / max(float(want.norm()), 1e-30)
                        )
                        del want, part
                        st = timer.measure(ref)
                        cell["torch_us"] = st["us"]
                        cell["torch_tflops"] = flops / st["us"] / 1e6
                    del got
                    st = timer.measure(ours)
                    cell["ours_us"] = st["us"]
                    cell["ours_tflops"] = flops / st["us"] / 1e6
                except Exception as ex:  # noqa: BLE001 - report and go on
                    cell["error"] = "%s: %s" % (type(ex).__name__, str(ex)[:200])
                rows.append(cell)
                print(json.dumps(cell), flush=True)
                torch.cuda.empty_cache()
    lines = [
        "| layer | T | GEMM | ours us | ours TFLOP/s | torch us | torch TFLOP/s | rel. err vs torch |",
        "|---|---|---|---|---|---|---|---|",
    ]
    fmt = lambda c, key, f: (f % c[key]) if key in c else "-"  # noqa: E731
    for c in rows:
        lines.append(
            "| %s | %d | %s | %s | %s | %s | %s | %s |"
            % (
                c["layer"],
                c["T"],
                c["gemm"],
                fmt(c, "ours_us", "%.0f") if "error" not in c else c["error"],
                fmt(c, "ours_tflops", "%.0f"),
                fmt(c, "torch_us", "%.0f"),
                fmt(c, "torch_tflops", "%.0f"),
                fmt(c, "rel_err", "%.1e"),
            )
        )
    write_table(
        args,
        "gemms.md",
        "expert GEMMs: forward and weight gradients, ours vs torch._grouped_mm",
        lines,
    )
    return 0


def torch_layer(torch, F, k):
    """The torchtitan-style layer: y = sum_j w_j * down(silu(gate) * up)."""

    def layer(x, logits, w_up, w_down):
        T = x.shape[0]
        probs = torch.softmax(logits.float(), dim=1)
        w, ids = torch.topk(probs, k, dim=1)
        w = w / w.sum(dim=1, keepdim=True)
        flat = ids.reshape(-1)
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=w_up.shape[0]).to(torch.int32)
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        rows = x.index_select(0, order // k)
        gu = torch._grouped_mm(rows, w_up.transpose(1, 2), offs=offs)
        n = gu.shape[1] // 2
        a = F.silu(gu[:, :n]) * gu[:, n:]
        d = torch._grouped_mm(a, w_down.transpose(1, 2), offs=offs)
        d = d * w.reshape(-1)[order].to(d.dtype).unsqueeze(1)
        inv = torch.empty_like(order).index_copy_(
            0, order, torch.arange(order.numel(), device=x.device)
        )
        return d.index_select(0, inv).view(T, k, -1).sum(dim=1, dtype=torch.float32).to(x.dtype)

    return layer


def profile_step(torch, call):
    """Kernels of one call (after a warm one), in launch order: [name, us]."""
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    return [
        [e.name[:60], round(e.device_time, 1)]
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
    ]


def run(args):
    torch, rt, shapes, timer = setup(args)
    import torch.nn.functional as F

    rows = []
    for name in args.configs.split(","):
        s = shapes[name]
        H, I, E, k = s["H"], s["I"], s["E"], s["k"]
        ours = rt.ffn_autograd(rt.load(os.path.join(args.dir, name + ".train.so")))
        ref = torch_layer(torch, F, k)
        g = torch.Generator(device="cuda").manual_seed(47)
        bf16 = dict(dtype=torch.bfloat16, device="cuda")
        w_up = (torch.randn(E, 2 * I, H, generator=g, **bf16) / H**0.5).requires_grad_(True)
        w_down = (torch.randn(E, H, I, generator=g, **bf16) / I**0.5).requires_grad_(True)
        for T in cell_ts(args, name):
            x = torch.randn(T, H, generator=g, **bf16).requires_grad_(True)
            logits = torch.randn(T, E, generator=g, **bf16).requires_grad_(True)
            dy = torch.randn(T, H, generator=g, **bf16)
            leaves = (x, logits, w_up, w_down)

            def step(layer):
                for t in leaves:
                    t.grad = None
                layer(*leaves).backward(dy)

            flops = 3 * 2 * T * k * (H * 2 * I + I * H)
            cell = dict(layer=name, T=T)
            grads = {}
            for key, layer in (("torch", ref), ("ours", ours)):
                try:
                    step(layer)
                    torch.cuda.synchronize()
                    # The weight gradients on 4 experts' slices: whole f32
                    # copies of DeepSeek-V3's (45 GB) do not fit the card
                    # beside the weights and their gradients.
                    grads[key] = [
                        (t.grad[:4] if t.grad.dim() == 3 else t.grad).float().clone()
                        for t in leaves
                    ]
                    stats = timer.measure(lambda layer=layer: step(layer))
                    cell[key + "_us"] = stats["us"]
                    cell[key + "_tflops"] = flops / stats["us"] / 1e6
                except Exception as ex:  # noqa: BLE001 - report and go on
                    cell[key + "_error"] = "%s: %s" % (type(ex).__name__, str(ex)[:200])
            if args.profile and "ours_us" in cell:
                cell["kernels"] = profile_step(torch, lambda: step(ours))
            if "torch" in grads and "ours" in grads:
                cell["rel_err"] = max(
                    float((a - b).norm() / max(float(b.norm()), 1e-30))
                    for a, b in zip(grads["ours"], grads["torch"])
                )
            if "ours_us" in cell and "torch_us" in cell:
                cell["speedup"] = cell["torch_us"] / cell["ours_us"]
            if name in EXTRA:
                cell["published"] = EXTRA[name]["published"]
            rows.append(cell)
            print(json.dumps(cell), flush=True)
            torch.cuda.empty_cache()
    lines = [
        "| layer | T | ours us | torch us | ours/torch | ours TFLOP/s | torch TFLOP/s | grad rel. err |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in rows:
        lines.append(
            "| %s | %d | %s | %s | %s | %s | %s | %s |"
            % (
                c["layer"],
                c["T"],
                "%.0f" % c["ours_us"] if "ours_us" in c else c.get("ours_error", "-"),
                "%.0f" % c["torch_us"] if "torch_us" in c else c.get("torch_error", "-"),
                "%.2fx" % c["speedup"] if "speedup" in c else "-",
                "%.0f" % c["ours_tflops"] if "ours_tflops" in c else "-",
                "%.0f" % c["torch_tflops"] if "torch_tflops" in c else "-",
                "%.1e" % c["rel_err"] if "rel_err" in c else "-",
            )
        )
    published = [c for c in rows if "published" in c]
    if published:
        lines += ["", "Published fwd + bwd times of the same shapes (reference, not this run):", ""]
        for c in published:
            who, us = c["published"]
            lines.append(
                "- %s T=%d: %s %.0f us (ours %s)"
                % (c["layer"], c["T"], who, us, "%.0f us" % c["ours_us"] if "ours_us" in c else "-")
            )
    write_table(
        args,
        "train.md",
        "forward + backward, ours (ffn_autograd) vs torch._grouped_mm autograd",
        lines,
    )
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=None, help="build the libraries into this folder (here)")
    ap.add_argument("--dir", default=HERE)
    ap.add_argument("--out", default=os.environ.get("OUT") or "bench-results")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--T", default="4096,16384")
    ap.add_argument("--gemms", action="store_true", help="the expert GEMMs alone (gemms.md)")
    ap.add_argument(
        "--profile", action="store_true", help="per-kernel times of one step of ours (the json)"
    )
    ap.add_argument("--min-runs", type=int, default=3)
    ap.add_argument("--max-runs", type=int, default=20)
    ap.add_argument("--max-seconds-per-cell", type=float, default=2.0)
    args = ap.parse_args()
    if args.build:
        return build(args.build)
    return run_gemms(args) if args.gemms else run(args)


if __name__ == "__main__":
    sys.exit(main())
