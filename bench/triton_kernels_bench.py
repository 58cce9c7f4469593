#!/usr/bin/env python3
"""Optional baseline: OpenAI's triton_kernels MoE layer (bf16) on the
benchmark's configurations, timed like bench/bench_moe.py.

  PYTHONPATH=bench-variants/tk python3 bench/triton_kernels_bench.py --out DIR \
      [--configs a,b] [--T 512,4096,16384] [--seconds 2] [--act tk|std] \
      [--w-layout nk|kn] [--swiglu-limit none|X] [--ref-rows 256]

triton_kernels is not part of this repository (nor of the H200's Python):
python/triton_kernels/triton_kernels of triton-lang/triton at tag v3.6.0
(commit 7c56a5e40f7fd928dfd5c72902d5def0097db73a, the triton 3.6.0 release
the H200 has), exported next to this script's PYTHONPATH, e.g.
  git --git-dir=<a mirror of triton with the v3.6.0 tag> archive v3.6.0 \
      python/triton_kernels | tar -x -C /tmp/tk
  mkdir -p bench-variants/tk && cp -r /tmp/tk/python/triton_kernels/triton_kernels \
      bench-variants/tk/
(the upstream mirror is too large for the session's fetch tool; the fork
yechenzhi/triton carries the tag and the release/3.6.x history), then carried
to the H200 with the run (bench-variants/ is git-ignored: name it in carry).
It needs only triton, torch and the standard library.

The layer (one CUDA graph, routing included), as bench/distributed.py's
single-GPU `routing` and bench_mlp.py of that commit build it:
  sm   = topk(logits, k, apply_softmax=True)      top-k of the bf16 logits, then
         softmax over the k picked logits (f32, stored bf16) == softmax, top-k,
         renormalise
  md   = sm.mask_metadata; dispatch = md.row_sorted_indx; combine = md.col_sorted_indx
  ragged = make_ragged_tensor_metadata(md.col_sum, T * k)
  rdata  = RoutingData(sm.vals.flatten()[combine], ragged.slice_sizes, E, k, ragged)
  h = matmul_ogs(x, w1, None, rdata, gather_indx=GatherIndx(combine, dispatch),
                 precision_config=PrecisionConfig(), fused_activation=act)     # [T k, I] bf16
  y = matmul_ogs(h, w2, None, rdata, scatter_indx=ScatterIndx(dispatch, combine),
                 precision_config=PrecisionConfig(), gammas=rdata.gate_scal)  # [T, H] bf16
  (matmul_ogs no longer applies gate_scal by itself: the routing weights are
  passed as `gammas`, which scale each expert-sorted row of the second GEMM
  before the k-way sum.)

w1 is [E, H, 2I] (logical), gate / linear interleaved along 2I (columns 0::2
gate, 1::2 linear); w2 is [E, I, H]. --w-layout nk (default) makes them
transposed views of [E, 2I, H] / [E, H, I] tensors (the nn.Linear layout; what
triton_kernels' own bench_mlp.py passes for bf16, and bit-identical to the
weights bench_moe.py makes for the same configuration); kn makes them
contiguous.

Activation (--act tk, default): triton_kernels.swiglu.swiglu_fn with
alpha = 1.0, limit = None (no clamp):
    h = g * sigmoid(alpha * g) * (u + 1),   g = a[:, 0::2], u = a[:, 1::2]
(the gpt-oss SwiGLU: note the + 1 on the linear half.) --act std instead
fuses a 5-line @triton.jit through the same FusedActivation / FnSpecs hook:
    h = g * sigmoid(g) * u                  (the usual SwiGLU, as moe.ffn)

Inputs as bench_moe.py (same generator keys, so the same numbers): x ~ randn
bf16; logits a random permutation of E distinct multiples of a power of two
per row (tie-free in bf16); weights randn * 0.02.

Check: a float32 torch reference of exactly that formula (f32 softmax over the
top-k logits, f32 GEMMs, h rounded to bf16 as triton_kernels stores it) on at
most --ref-rows random rows: ||y - ref|| / ||ref|| <= 1e-2 (NaN fails),
checked on the eager call, on a graph replay of a NaN-poisoned output, and
again after the timed replays.

Timing: warm-up calls on a side stream, capture into one CUDA graph, then per
run: zero a 256 MiB buffer (L2 flush), event, replay, event, synchronise; for
--seconds (at least --min-runs, at most --max-runs runs). Reports median,
min, the medians of the first and last 10% of runs, and energy per run (mJ)
from NVML's total-energy counter (None where unavailable). A failed capture
falls back to timing plain calls (mode "direct").

Writes DIR/tk.json (a list of cells), DIR/tk_meta.json (versions, GPU,
activation) and DIR/tk.md after every cell; prints the table at the end. Exit status 0 when every cell passed its check, 1 otherwise.
"""

import argparse
import gc
import json
import os
import sys
import time
import traceback

import torch
import triton
import triton.language as tl

# The benchmark's own inputs, timer and capture (bench_moe.py, gen_layers.py
# beside this script), so that both measure the same way on the same numbers.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_moe as B  # noqa: E402
import gen_layers as GL  # noqa: E402

B.torch = torch
CONFIGS = {name: c[1:] for name, c in GL.CONFIGS.items()}  # (H, I, E, k)
TK_COMMIT = "7c56a5e40f7fd928dfd5c72902d5def0097db73a"  # triton v3.6.0
DEV = B.DEV
TOL = B.TOL
short, generator, capture = B.short, B.generator, B.capture

tk = None  # namespace of the triton_kernels names, set in import_tk()
FLAGS_LOG = []  # OptFlags chosen by matmul_ogs, in call order


@triton.jit
def swiglu_std_fn(input, alpha):
    # silu(gate) * up of the interleaved [.., 2n] tile (--act std)
    gate, up = tl.split(tl.reshape(input, (input.shape[0], input.shape[1] // 2, 2)))
    gate = gate.to(tl.float32)
    up = up.to(tl.float32)
    return gate / (1 + tl.exp(-alpha * gate)) * up


class _NS:
    pass


def import_tk():
    global tk
    import triton_kernels.matmul_ogs as mo
    import triton_kernels.swiglu as sw
    from triton_kernels.matmul_ogs import (
        FnSpecs,
        FusedActivation,
        GatherIndx,
        PrecisionConfig,
        RoutingData,
        ScatterIndx,
        matmul_ogs,
    )
    from triton_kernels.tensor import make_ragged_tensor_metadata
    from triton_kernels.topk import topk

    ns = _NS()
    ns.mo, ns.swiglu_fn = mo, sw.swiglu_fn
    ns.FnSpecs, ns.FusedActivation, ns.PrecisionConfig = FnSpecs, FusedActivation, PrecisionConfig
    ns.GatherIndx, ns.ScatterIndx, ns.RoutingData = GatherIndx, ScatterIndx, RoutingData
    ns.matmul_ogs, ns.topk, ns.make_ragged_tensor_metadata = (
        matmul_ogs,
        topk,
        make_ragged_tensor_metadata,
    )
    # record the block sizes etc. that matmul_ogs picks (diagnostic only)
    orig = mo.make_opt_flags

    def logged(*a, **kw):
        f = orig(*a, **kw)
        FLAGS_LOG.append(f)
        return f

    mo.make_opt_flags = logged
    tk = ns


def flags_str(f):
    try:
        return "bm%d bn%d bk%d w%d s%d sk%d %s sub%s" % (
            f.block_m,
            f.block_n,
            f.block_k,
            f.num_warps,
            f.num_stages,
            f.split_k,
            "persistent" if f.is_persistent else "plain",
            f.epilogue_subtile,
        )
    except Exception:  # noqa: BLE001
        return str(f)


# ----------------------------------------------------------------------------
# Inputs (as bench/bench_moe.py make_weights / make_inputs, routing "random")
# ----------------------------------------------------------------------------


def make_weights(config, layout):
    """(w1 [E, H, 2I], w2 [E, I, H]) as matmul_ogs wants them (logical
    shapes): bench_moe.py's weights of the configuration (nn.Linear layout),
    transposed views, or (layout kn) contiguous copies."""
    w_up, w_down = B.make_weights(GL.Layer(config, ""))
    w1, w2 = w_up.transpose(1, 2), w_down.transpose(1, 2)  # K-major views
    if layout == "kn":
        w1, w2 = w1.contiguous(), w2.contiguous()
        del w_up, w_down
    return w1, w2


def make_inputs(config, T):
    return B.make_inputs(GL.Layer(config, ""), T)


# ----------------------------------------------------------------------------
# The triton_kernels layer
# ----------------------------------------------------------------------------


def make_activation(act, alpha, limit):
    if act == "tk":
        specs = tk.FnSpecs("swiglu", tk.swiglu_fn, ("alpha", "limit"), reduction_n=2)
        return tk.FusedActivation(specs, (alpha, limit))
    specs = tk.FnSpecs("swiglu_std", swiglu_std_fn, ("alpha",), reduction_n=2)
    return tk.FusedActivation(specs, (alpha,))


def tk_routing(logits, E, k):
    """bench/distributed.py `routing` (single GPU) of the same commit."""
    sm = tk.topk(logits, k, apply_softmax=True)
    md = sm.mask_metadata
    dispatch = md.row_sorted_indx  # token-major slot -> expert-sorted row
    combine = md.col_sorted_indx  # expert-sorted row -> token-major slot
    ragged = tk.make_ragged_tensor_metadata(md.col_sum, dispatch.shape[0])
    gate = sm.vals.flatten()[combine]
    rdata = tk.RoutingData(gate, ragged.slice_sizes, E, k, ragged)
    return rdata, tk.GatherIndx(combine, dispatch), tk.ScatterIndx(dispatch, combine)


def make_layer(E, k, w1, w2, activation):
    pc1, pc2 = tk.PrecisionConfig(), tk.PrecisionConfig()

    def layer(x, logits):
        rdata, gi, si = tk_routing(logits, E, k)
        h = tk.matmul_ogs(
            x, w1, None, rdata, gather_indx=gi, precision_config=pc1, fused_activation=activation
        )
        return tk.matmul_ogs(
            h, w2, None, rdata, scatter_indx=si, precision_config=pc2, gammas=rdata.gate_scal
        )

    return layer


# ----------------------------------------------------------------------------
# Reference and check
# ----------------------------------------------------------------------------


def reference(x, logits, w1, w2, k, act, alpha, limit):
    """float32 y of exactly triton_kernels' formula on the given rows."""
    xs, ls = x.float(), logits.float()
    top = torch.topk(ls, k, dim=1)
    gates = torch.softmax(top.values, dim=1)  # softmax over the k picked logits
    ids = top.indices
    y = torch.zeros((x.shape[0], w2.shape[-1]), dtype=torch.float32, device=x.device)
    for e in torch.unique(ids).tolist():
        r, j = (ids == e).nonzero(as_tuple=True)
        a = xs[r] @ w1[e].float()
        g, u = a[:, 0::2], a[:, 1::2]
        if act == "tk":
            if limit is not None:
                g = g.clamp(max=limit)
                u = u.clamp(min=-limit, max=limit)
            h = g * torch.sigmoid(alpha * g) * (u + 1)
        else:
            h = g * torch.sigmoid(alpha * g) * u
        h = h.to(torch.bfloat16).float()  # triton_kernels stores h in bf16
        y.index_add_(0, r, gates[r, j].unsqueeze(1) * (h @ w2[e].float()))
    return y


class Check:
    def __init__(self, config, x, logits, w1, w2, k, ref_rows, act, alpha, limit):
        T = x.shape[0]
        self.rows = None
        if T > ref_rows:
            g = generator("rows/%s/%d" % (config, T))
            self.rows = torch.randperm(T, device=DEV, generator=g)[:ref_rows].sort().values
        xs = x if self.rows is None else x.index_select(0, self.rows)
        ls = logits if self.rows is None else logits.index_select(0, self.rows)
        self.ref = reference(xs, ls, w1, w2, k, act, alpha, limit).double()

    def error(self, y):
        got = (y if self.rows is None else y.index_select(0, self.rows)).double()
        if got.shape != self.ref.shape:
            raise RuntimeError(
                "output shape %s, expected %s rows of %d"
                % (tuple(y.shape), self.ref.shape[0], self.ref.shape[1])
            )
        if not bool(torch.isfinite(got).all()):
            return float("inf")
        num = float(torch.linalg.vector_norm(got - self.ref))
        den = float(torch.linalg.vector_norm(self.ref))
        return num / den if den else (0.0 if num == 0.0 else float("inf"))


# Timing: bench_moe.py's Timer (L2 flush, median, first / last 10%, NVML
# energy, nvidia-smi clock and power) and capture.


# ----------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------


def fmt(v, spec="%.1f"):
    if v is None:
        return "-"
    if isinstance(v, float):
        return spec % v
    return str(v)


def write(args, meta, cells):
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tk.json"), "w") as f:
        json.dump(cells, f, indent=1)
    with open(os.path.join(args.out, "tk_meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    lines = [
        "# triton_kernels MoE baseline (triton %s, torch %s, %s)"
        % (meta["triton"], meta["torch"], meta["gpu"]),
        "",
        "triton_kernels at %s; activation: %s; weights %s; bf16; one CUDA graph per call "
        "(routing included), L2 flushed before each run; err = ||y-ref||/||ref|| on <= %d rows."
        % (meta["tk_commit"], meta["activation"], meta["w_layout"], args.ref_rows),
        "",
        "| config | T | us | min us | first 10% us | last 10% us | runs | mJ/run | err | ok | mode | note |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for c in cells:
        note = c.get("error") or c.get("capture_error") or ""
        lines.append(
            "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |"
            % (
                c["config"],
                c["T"],
                fmt(c.get("us")),
                fmt(c.get("min_us")),
                fmt(c.get("first_us")),
                fmt(c.get("last_us")),
                fmt(c.get("runs")),
                fmt(c.get("energy_mj"), "%.2f"),
                fmt(c.get("err"), "%.2e"),
                "yes" if c.get("ok") else "NO",
                c.get("mode") or "-",
                note.replace("|", "/")[:160],
            )
        )
    lines.append("")
    lines.append("Block sizes matmul_ogs picked (first GEMM ; second GEMM):")
    lines.append("")
    for c in cells:
        if c.get("opt_flags"):
            lines.append("- %s T=%d: %s" % (c["config"], c["T"], " ; ".join(c["opt_flags"])))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "tk.md"), "w") as f:
        f.write(text)
    return text


def cell_of(config, T, **fields):
    """A result cell: the config's shape and T, then `fields`."""
    H, I, E, k = CONFIGS[config]
    return dict(config=config, H=H, I=I, E=E, k=k, T=T, **fields)


def run_cell(args, timer, config, T, w1, w2, activation, limit):
    _, _, E, k = CONFIGS[config]
    cell = cell_of(
        config,
        T,
        us=None,
        min_us=None,
        first_us=None,
        last_us=None,
        runs=None,
        energy_mj=None,
        err=None,
        ok=False,
        error=None,
        mode=None,
    )
    graph = out = y0 = None
    try:
        x, logits = make_inputs(config, T)
        layer = make_layer(E, k, w1, w2, activation)
        call = lambda: layer(x, logits)  # noqa: E731
        # eager call: compiles the kernels; its error is checked too
        del FLAGS_LOG[:]
        t0 = time.time()
        y0 = call()
        torch.cuda.synchronize()
        cell["first_call_s"] = round(time.time() - t0, 2)
        cell["opt_flags"] = [flags_str(f) for f in FLAGS_LOG]
        check = Check(config, x, logits, w1, w2, k, args.ref_rows, args.act, 1.0, limit)
        cell["err_eager"] = check.error(y0)
        del y0
        y0 = None
        # one CUDA graph of the whole layer
        try:
            graph, out = capture(call)
            cell["mode"] = "graph"
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            cell["err_replay"] = check.error(out)
            run = graph.replay
        except Exception as ex:  # noqa: BLE001
            cell["capture_error"] = short(ex)
            print("  capture failed, timing plain calls: %s" % short(ex), flush=True)
            torch.cuda.synchronize()
            graph = None
            cell["mode"] = "direct"
            run = call
        cell.update(timer.measure(run))
        if graph is not None:
            cell["err"] = check.error(out)  # after the timed replays
        else:
            out = call()
            torch.cuda.synchronize()
            cell["err"] = check.error(out)
        errs = [cell.get("err_eager"), cell.get("err_replay"), cell.get("err")]
        errs = [e for e in errs if e is not None]
        cell["ok"] = all(e <= TOL for e in errs)  # inf / nan fail
        cell["err"] = max(errs)
        if not cell["ok"]:
            cell["error"] = "error %.3e > %.0e (eager %s, replay %s)" % (
                cell["err"],
                TOL,
                cell.get("err_eager"),
                cell.get("err_replay"),
            )
    except Exception as ex:  # noqa: BLE001
        cell["error"] = short(ex)
        cell["ok"] = False
        print("".join(traceback.format_exc().splitlines(True)[-8:]), end="", flush=True)
    finally:
        del graph, out, y0
        gc.collect()
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - a sticky device error: later cells record it
            pass
    return cell


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--T", default="512,4096,16384")
    ap.add_argument("--seconds", type=float, default=2.0, help="timed seconds per cell")
    ap.add_argument("--min-runs", type=int, default=5)
    ap.add_argument("--max-runs", type=int, default=3000)
    ap.add_argument("--ref-rows", type=int, default=256)
    ap.add_argument(
        "--act",
        choices=("tk", "std"),
        default="tk",
        help="tk: triton_kernels.swiglu.swiglu_fn, g*sigmoid(g)*(u+1); std: g*sigmoid(g)*u",
    )
    ap.add_argument(
        "--swiglu-limit", default="none", help="--act tk clamp limit: none (default) or a number"
    )
    ap.add_argument(
        "--w-layout",
        choices=("nk", "kn"),
        default="nk",
        help="nk: K-contiguous weights (nn.Linear layout, default); kn: N-contiguous",
    )
    args = ap.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        ap.error("unknown config(s) %s (known: %s)" % (", ".join(unknown), ", ".join(CONFIGS)))
    Ts = [int(t) for t in args.T.split(",") if t]
    limit = None if args.swiglu_limit.lower() == "none" else float(args.swiglu_limit)

    torch.backends.cuda.matmul.allow_tf32 = False  # the f32 reference
    torch.backends.cudnn.allow_tf32 = False
    import_tk()
    if args.act == "tk":
        act_text = (
            "triton_kernels swiglu_fn(alpha=1.0, limit=%s): g*sigmoid(g)*(u+1)%s, g=a[:,0::2], u=a[:,1::2]"
            % (limit, "" if limit is None else " with g<=limit, |u|<=limit")
        )
    else:
        act_text = "custom fused g*sigmoid(g)*u, g=a[:,0::2], u=a[:,1::2]"
    activation = make_activation(args.act, 1.0, limit)
    meta = dict(
        tk_commit=TK_COMMIT,
        tk_path=os.path.dirname(sys.modules["triton_kernels"].__file__),
        triton=triton.__version__,
        torch=torch.__version__,
        gpu=torch.cuda.get_device_name(0),
        activation=act_text,
        w_layout=args.w_layout,
        argv=sys.argv[1:],
    )
    print(
        "triton_kernels @ %s | triton %s | torch %s | %s"
        % (TK_COMMIT[:12], meta["triton"], meta["torch"], meta["gpu"]),
        flush=True,
    )
    print("triton_kernels from %s" % meta["tk_path"], flush=True)
    print("activation: %s" % act_text, flush=True)
    args.max_seconds_per_cell = args.seconds
    timer = B.Timer(args)
    cells = []
    t_start = time.time()
    with torch.no_grad():
        for config in configs:
            w1 = w2 = None
            try:
                w1, w2 = make_weights(config, args.w_layout)
            except Exception as ex:  # noqa: BLE001
                for T in Ts:
                    cells.append(cell_of(config, T, ok=False, error="weights: " + short(ex)))
                write(args, meta, cells)
                continue
            for T in Ts:
                print("[%6.1fs] %s T=%d ..." % (time.time() - t_start, config, T), flush=True)
                cell = run_cell(args, timer, config, T, w1, w2, activation, limit)
                cells.append(cell)
                print(
                    "  us=%s min=%s runs=%s mJ=%s err=%s ok=%s %s %s"
                    % (
                        fmt(cell.get("us")),
                        fmt(cell.get("min_us")),
                        cell.get("runs"),
                        cell.get("energy_mj"),
                        fmt(cell.get("err"), "%.2e"),
                        cell.get("ok"),
                        cell.get("opt_flags") or "",
                        cell.get("error") or "",
                    ),
                    flush=True,
                )
                write(args, meta, cells)
            del w1, w2
            gc.collect()
            torch.cuda.empty_cache()
    text = write(args, meta, cells)
    print()
    print(text)
    print("total %.1fs" % (time.time() - t_start))
    return 0 if cells and all(c.get("ok") for c in cells) else 1


if __name__ == "__main__":
    sys.exit(main())
