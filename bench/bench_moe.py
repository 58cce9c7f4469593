#!/usr/bin/env python3
"""The issue-10 benchmark: compiled moe.ffn layers against torch baselines.

Runs on the GPU machine with the folder that bench/build_bench.sh made
(torch and that folder's moe_mlir_runtime package, torch_reference.py and
gen_layers.py; no LLVM):

  python3 bench_moe.py --dir bench-artifacts --out "$OUT" [--configs a,b]
      [--T 1,64] [--variants] [--max-seconds-per-cell S] [--skip-ours]
      [--skip-baselines] [--profile [LAYER:T,...]] [--budget S]
      [--triton-kernels DIR] [--rest-seconds S]
      [--weight-format fp8_block [--vllm-fp8 DIR]]
      [--weight-format mxfp4 [--triton-kernels DIR]]

Cells: every layer of gen_layers.py (the four configurations; --variants
adds the qwen3-30b-a3b .nt / .concat variants) at every T. Per cell, fresh
inputs: x ~ randn; logits a random permutation of E distinct multiples of a
power of two per row (exact in bf16, so top-k has no ties); per layer
weights ~ randn * 0.02 (the variants get the same logical weights).

  ours        the compiled layer through moe_mlir_runtime (output preallocated),
              captured once in a CUDA graph and replayed
  grouped_mm  torch routing (f32 softmax, topk, renormalise), a stable
              argsort of the expert ids, gathered rows, torch._grouped_mm
              for gate/up and for down (offs: int32 cumulative counts),
              SwiGLU, routing weight and the k-way sum in torch; one CUDA
              graph
  triton_kernels  (only with --triton-kernels DIR: DIR holds OpenAI's
              triton_kernels package, see triton_kernels_bench.py for the
              version and how to export it) the issue's best-today layer:
              triton_kernels' top-k routing and two matmul_ogs calls with
              the SwiGLU fused into the first, in one CUDA graph; built by
              triton_kernels_bench.py (beside this script), timed and
              checked here like the others, so that ours and it run in the
              same process, cell and power regime. Interleaved gate/up only
              (what its fused SwiGLU takes; either weight layout): the
              .concat variant records n/a
  eager       the classic Hugging Face loop over the experts that got
              tokens (index rows, two matmuls, index_add_). It syncs with
              the host (nonzero / where), so it cannot be captured: timed
              as eager calls, host gaps included

Timing: every run flushes L2 (zero_ of a 256 MiB buffer), then CUDA events
around one graph replay (one call for eager); median over N runs, N
adaptive: at least --min-runs, then more while under --max-seconds-per-cell
(cap on each implementation's timed runs in a cell) and --max-runs. A
capture that fails is recorded and that implementation is timed as plain
calls (mode "direct"). --rest-seconds S idles the card S seconds before
each implementation's timed runs: the large cells run at the board's power
cap, whose controller steps the clock down over the first ~0.1-1 s of
load, so without a rest an implementation timed right after another (or
after the previous cell) starts from a hotter state than one timed first
(bench/NOTES.md, results at 51af224 and of the twenty-ninth session).

Correctness: every timed output against torch_reference.ffn (the contract's
chain in float32, intermediates rounded to bf16 where the unfused chain
rounds them) on at most --ref-rows rows (a random subset above that):
||y - ref|| / ||ref|| <= 1e-2, NaN fails. Ours is poisoned (NaN) before
the checked replay and checked again after the timed replays; grouped_mm
likewise. Eager's error is recorded for information only (its bf16
index_add_ accumulation is the Hugging Face code's own precision).

Floor per cell: max(bytes / 4.3 TB/s, 6 T k H I / 790 TFLOP/s), bytes =
3 H I * 2 * (distinct experts the routing hits) + x + out + logits. These
are the H200's figures (the issue's definition), and so are the targets:
on another card (an H100: 3.35 TB/s HBM) the %floor and ours/tgt columns
keep the H200's yardstick, the .md says so, and the comparison that holds
is the one with the baselines timed in the same run (the ours/best column:
ours over the fastest checked baseline of the cell).

--weight-format fp8_block runs the FP8 block-weight cells instead
(deepseek-v3 and qwen3-30b-a3b: the compiled <config>.fp8 layer, our bf16
<config>.concat layer, vLLM's Triton fused_moe in its block-FP8 mode with
--vllm-fp8 DIR, torch._scaled_grouped_mm rowwise; FP8 byte floor): see
bench_lowprec.py (beside this script), which writes <commit>.fp8.json /
.fp8.md. --weight-format mxfp4 runs the MXFP4 cells (gpt-oss-120b: the
compiled gpt-oss-120b.mxfp4 layer, packed e2m1 weights with E8M0 scales
per 32 K, gpt-oss's clamped SwiGLU and expert biases; our bf16
gpt-oss-120b.oss layer, the same layer in bf16; with --triton-kernels DIR,
OpenAI triton_kernels' matmul_ogs with MXFP4 weights in its Hopper layout;
MXFP4 byte floor), also in bench_lowprec.py, which writes
<commit>.mxfp4.json / .mxfp4.md. The default, plain, is everything else
this text describes.

Writes <out>/<commit>.json and <out>/<commit>.md (rewritten after every
cell; --profile appends per-kernel times of one call of ours to the .md)
and prints a compact table at the end. Every exception of a cell is caught
and recorded; --budget stops starting cells (they are recorded as skipped).
Exit status 0 when every check that ran passed, 1 otherwise.

While it runs, nvidia-smi samples the SM clock and board power every 50 ms
(SmiLog; BENCH_NO_SMI=1 leaves it out): each timed cell records the medians
of the samples taken during its runs and the share of them with the power
cap active (<key>_sm_mhz, <key>_power_w, <key>_power_capped in the JSON, a
"Clock and power while timing" table in the .md), since the large cells
run at the card's power limit (bench/NOTES.md v49). Each timed cell also
records the board energy per run from NVML's total-energy counter
(<key>_energy_mj; it includes the L2 flush before each run; absent when
NVML is not there; the counter advances in coarse steps, so the figure is
only meaningful when the cell's runs span about a second or more) and the median of its first and of its last 10% of runs
(<key>_first_us, <key>_last_us): the power / thermal controller slows
the large cells down in steps while they run (bench/NOTES.md, results at
51af224), so the median is the stepped-down state.
BENCH_DUMP_TIMES=1 also records every run's time (<key>_times).
"""

import argparse
import atexit
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
import traceback
import zlib

TOL = 1e-2
COPY_TBPS = 4.3  # H200 device copy, bytes read + written (KINDS.md)
BF16_TFLOPS = 790  # H200 bf16 dense matmul (KINDS.md)
FLUSH_BYTES = 256 << 20
DEV = "cuda:0"  # the runtime's device
WEIGHT_SCALE = 0.02
DEFAULT_T = (1, 8, 64, 512, 4096, 16384)
BOLD_T = (512, 4096, 16384)  # the issue's cells (the smaller T are issue 11's)

# The targets (us) per configuration at T = 1, 8, 64, 512, 4096, 16384.
TARGET_T = (1, 8, 64, 512, 4096, 16384)
TARGET_US = {
    "qwen3-30b-a3b": (111, 169, 325, 345, 684, 2085),
    "gpt-oss-120b": (167, 405, 1246, 1537, 2232, 5736),
    "mixtral-8x7b": (376, 696, 708, 941, 4593, 17339),
    "deepseek-v3": (353, 1281, 4466, 5324, 7293, 20817),
}

IMPLS = ("ours", "grouped_mm", "triton_kernels", "eager")
# must pass; eager's error is recorded for information
CHECKED = ("ours", "grouped_mm", "triton_kernels")
BASELINES = ("grouped_mm", "triton_kernels")  # the best-today implementations
TARGET_GPU = "H200"  # the card of the targets and of the floor's figures

torch = F = rt = TR = GL = None  # imported in main() from --dir
TKB = None  # triton_kernels_bench, imported in main() with --triton-kernels


def short(ex):
    text = " ".join(str(ex).split())
    return "%s: %s" % (type(ex).__name__, text[:400])


def generator(key):
    g = torch.Generator(device=DEV)
    g.manual_seed(zlib.crc32(key.encode()))
    return g


# ----------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------


def make_weights(layer):
    """w_up, w_down of `layer` in its layout; one set of logical weights per
    configuration (generated in the nn.Linear layout, transposed for .nt)."""
    g = generator("weights/" + layer.config)
    E, H, I = layer.E, layer.H, layer.I
    w_up = torch.randn((E, 2 * I, H), dtype=torch.bfloat16, device=DEV, generator=g)
    w_down = torch.randn((E, H, I), dtype=torch.bfloat16, device=DEV, generator=g)
    w_up.mul_(WEIGHT_SCALE)
    w_down.mul_(WEIGHT_SCALE)
    if not layer.transpose_weights:
        w_up = w_up.transpose(1, 2).contiguous()
        w_down = w_down.transpose(1, 2).contiguous()
    return w_up, w_down


def routed_counts(layer, T, routing):
    """Rows per expert that --routing asks for (None: random logits).
    'balanced': T k / E each (the remainder one more on the first experts);
    'split:D': the balanced counts + D on even experts and - D on odd ones
    (an expert's last row tile then has D rows or is D rows short: the
    price of short last tiles at the same total rows)."""
    if routing == "random":
        return None
    E, slots = layer.E, T * layer.k
    counts = [slots // E + (1 if e < slots % E else 0) for e in range(E)]
    if routing.startswith("split:"):
        d = int(routing.split(":", 1)[1])
        for e in range(0, E - 1, 2):
            d_e = min(d, counts[e + 1])
            counts[e] += d_e
            counts[e + 1] -= d_e
    elif routing != "balanced":
        raise ValueError("unknown --routing %r (random, balanced, split:D)" % routing)
    if max(counts) > T:
        raise ValueError(
            "--routing %s: an expert would need %d of %d tokens" % (routing, max(counts), T)
        )
    return counts


def make_inputs(layer, T, routing="random"):
    """x [T, H] and tie-free logits [T, E] (bf16). Each row of the logits is
    a random permutation of (-E/2 .. E/2-1) * 2^m: integers of at most 8
    bits times a power of two are exact in bf16, and adjacent values stay
    2^m apart (a spread of about 8 over the row). With a --routing other
    than random, the permutation is rearranged so that the top k of token
    t are the experts at slots t, t + T, ... of the expert-sorted slot list
    (distinct, as no expert has more than T rows): each expert gets exactly
    routed_counts' rows."""
    g = generator("inputs/%s/%d" % (layer.config, T))
    x = torch.randn((T, layer.H), dtype=torch.bfloat16, device=DEV, generator=g)
    perm = torch.argsort(torch.rand((T, layer.E), device=DEV, generator=g), dim=1)
    counts = routed_counts(layer, T, routing)
    if counts is not None:
        E, k = layer.E, layer.k
        experts = (
            torch.repeat_interleave(torch.arange(E, device=DEV), torch.tensor(counts, device=DEV))
            .view(k, T)
            .t()
        )  # [T, k]: the experts token t must pick
        # perm[t, e] is expert e's rank in row t (0 lowest); the chosen
        # experts take ranks E - 1 .. E - k in a random order, the others
        # keep their relative order below.
        rank_of_pick = torch.argsort(torch.rand((T, k), device=DEV, generator=g), dim=1)
        chosen = torch.zeros((T, E), dtype=torch.bool, device=DEV)
        chosen.scatter_(1, experts, True)
        key = perm.float().masked_fill(chosen, -1.0)  # the others first, by perm
        order = torch.argsort(key, dim=1, descending=True)  # others by perm, picks last
        perm = torch.empty_like(perm)
        others = order[:, : E - k]
        perm.scatter_(1, others, torch.arange(E - 1, k - 1, -1, device=DEV).expand(T, E - k) - k)
        perm.scatter_(1, experts, E - 1 - rank_of_pick)
    scale = 2.0 ** round(math.log2(8.0 / layer.E))
    logits = ((perm - layer.E // 2).float() * scale).to(torch.bfloat16)
    return x, logits


def floor_of(layer, T, experts_hit):
    """(floor us, bytes, flops) of one call."""
    H, I, E, k = layer.H, layer.I, layer.E, layer.k
    nbytes = 3 * H * I * 2 * experts_hit + 2 * T * H * 2 + T * E * 2
    flops = 6 * T * k * H * I
    floor_s = max(nbytes / (COPY_TBPS * 1e12), flops / (BF16_TFLOPS * 1e12))
    return floor_s * 1e6, nbytes, flops


# ----------------------------------------------------------------------------
# Baselines
# ----------------------------------------------------------------------------


def swiglu(gu, layout):
    """silu(gate) * up of the first GEMM's [M, 2I] output."""
    if layout == "interleaved":
        gate, up = gu[:, 0::2], gu[:, 1::2]
    else:
        n = gu.shape[1] // 2
        gate, up = gu[:, :n], gu[:, n:]
    return F.silu(gate) * up


def routing(logits, k):
    """f32 softmax over the E logits, top-k, renormalised: (weights, ids)."""
    probs = torch.softmax(logits.float(), dim=1)
    w, ids = torch.topk(probs, k, dim=1)
    return w / w.sum(dim=1, keepdim=True), ids


def right_operands(layer, w_up, w_down):
    """w_up [E, H, 2I] and w_down [E, I, H] as the right operands of x @ w
    (views of the nn.Linear layout), what torch._grouped_mm and matmul_ogs
    take."""
    if not layer.transpose_weights:
        return w_up, w_down
    return w_up.transpose(1, 2), w_down.transpose(1, 2)


def grouped_mm_layer(layer, x, logits, w_up_b, w_down_b):
    """The layer with torch._grouped_mm; w_up_b [E, H, 2I] and w_down_b
    [E, I, H] are the weights as grouped_mm's 3-D right operand (views of
    the nn.Linear layout). No host synchronisation: graph-capturable."""
    T, k = x.shape[0], layer.k
    w, ids = routing(logits, k)
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)  # slots grouped by expert
    counts = torch.zeros(layer.E, dtype=torch.int32, device=x.device)
    counts.scatter_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
    offs = torch.cumsum(counts, 0, dtype=torch.int32)  # group ends
    gu = torch._grouped_mm(x.index_select(0, order // k), w_up_b, offs=offs)
    d = torch._grouped_mm(swiglu(gu, layer.layout), w_down_b, offs=offs)
    d.mul_(w.reshape(-1)[order].to(d.dtype).unsqueeze(1))
    slots = torch.empty_like(d).index_copy_(0, order, d)  # back to (token, slot)
    return slots.view(T, k, -1).sum(dim=1, dtype=torch.float32).to(x.dtype)


def eager_layer(layer, x, logits, w_up, w_down):
    """The Hugging Face Mixtral-style loop over the experts that got tokens
    (host syncs in nonzero / where)."""
    w, ids = routing(logits, layer.k)
    w = w.to(x.dtype)
    y = torch.zeros_like(x)
    mask = F.one_hot(ids, num_classes=layer.E).permute(2, 1, 0)  # [E, k, T]
    hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero().flatten().tolist()

    def linear(a, weight):
        return a @ weight.t() if layer.transpose_weights else a @ weight

    for e in hit:
        slot, tok = torch.where(mask[e])
        h = swiglu(linear(x[tok], w_up[e]), layer.layout)
        d = linear(h, w_down[e]) * w[tok, slot, None]
        y.index_add_(0, tok, d.to(x.dtype))
    return y


# ----------------------------------------------------------------------------
# Timing and checking
# ----------------------------------------------------------------------------


class SmiLog:
    """SM clock (MHz), board power (W) and whether the software power cap
    holds the clock down, sampled by nvidia-smi every 50 ms for the whole
    run, so that each timed cell records the power state it ran in (the
    T=16384 cells hit the 700 W limit: bench/NOTES.md v49). The power is
    power.draw.instant where the driver has it (power.draw is a 1-second
    average, longer than a cell's timed runs), the cap
    clocks_event_reasons.sw_power_cap (older drivers: clocks_throttle_
    reasons). Empty when nvidia-smi is missing or BENCH_NO_SMI is set."""

    POWER_FIELDS = ("power.draw.instant", "power.draw")
    CAP_FIELDS = ("clocks_event_reasons.sw_power_cap", "clocks_throttle_reasons.sw_power_cap")

    def __init__(self):
        self.samples = []  # (time.time(), MHz, W, capped or None)
        self.proc = None
        if os.environ.get("BENCH_NO_SMI"):
            return
        gpu = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0]
        fields = ["clocks.sm", self._first(gpu, self.POWER_FIELDS) or "power.draw"]
        cap = self._first(gpu, self.CAP_FIELDS)
        if cap:
            fields.append(cap)
        self.fields = fields
        try:
            self.proc = subprocess.Popen(
                [
                    "nvidia-smi",
                    "-i",
                    gpu,
                    "--query-gpu=" + ",".join(fields),
                    "--format=csv,noheader,nounits",
                    "-lms",
                    "50",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        except OSError:
            return
        threading.Thread(target=self._read, daemon=True).start()
        atexit.register(self.stop)

    @staticmethod
    def _first(gpu, candidates):
        """The first of `candidates` this nvidia-smi can query, or None."""
        for field in candidates:
            try:
                r = subprocess.run(
                    [
                        "nvidia-smi",
                        "-i",
                        gpu,
                        "--query-gpu=" + field,
                        "--format=csv,noheader,nounits",
                    ],
                    capture_output=True,
                    text=True,
                    timeout=10,
                )
            except (OSError, subprocess.SubprocessError):
                return None
            out = r.stdout.strip()
            if (
                r.returncode == 0
                and out
                and "not a valid field" not in out.lower()
                and "[n/a]" not in out.lower()
            ):
                return field
        return None

    def _read(self):
        for line in self.proc.stdout:
            parts = [x.strip() for x in line.split(",")]
            try:
                mhz, watts = float(parts[0]), float(parts[1])
            except (ValueError, IndexError):
                continue
            capped = None
            if len(parts) > 2:
                capped = parts[2].lower() == "active"
            self.samples.append((time.time(), mhz, watts, capped))

    def window(self, t0, t1):
        """{sm_mhz, power_w, power_capped, smi_samples}: medians of the
        samples in [t0, t1], and the fraction with the power cap active."""
        inside = [(m, w, c) for t, m, w, c in list(self.samples) if t0 <= t <= t1]
        if not inside:
            return {}
        out = dict(
            sm_mhz=statistics.median(m for m, _, _ in inside),
            power_w=round(statistics.median(w for _, w, _ in inside), 1),
            smi_samples=len(inside),
        )
        caps = [c for _, _, c in inside if c is not None]
        if caps:
            out["power_capped"] = round(sum(caps) / len(caps), 2)
        return out

    def stop(self):
        if self.proc is not None:
            self.proc.terminate()


class Energy:
    """NVML's total energy counter of the device (mJ since the driver
    loaded), through ctypes; read() is None where NVML or the counter is
    missing (BENCH_NO_SMI=1 also leaves it out)."""

    def __init__(self):
        self.lib = self.handle = None
        if os.environ.get("BENCH_NO_SMI"):
            return
        try:
            import ctypes

            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return
            handle = ctypes.c_void_p()
            gpu = int((os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0])
            if lib.nvmlDeviceGetHandleByIndex_v2(gpu, ctypes.byref(handle)) != 0:
                return
            self.ctypes, self.lib, self.handle = ctypes, lib, handle
            if self.read() is None:
                self.lib = None
        except (OSError, AttributeError, ValueError):
            self.lib = None

    def read(self):
        if self.lib is None:
            return None
        mj = self.ctypes.c_ulonglong()
        if self.lib.nvmlDeviceGetTotalEnergyConsumption(self.handle, self.ctypes.byref(mj)) != 0:
            return None
        return mj.value


class Timer:
    def __init__(self, args):
        self.flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=DEV)
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.min_runs = args.min_runs
        self.max_runs = max(args.max_runs, args.min_runs)
        self.max_seconds = args.max_seconds_per_cell
        self.rest = getattr(args, "rest_seconds", 0.0)
        self.smi = SmiLog()
        self.energy = Energy()

    def measure(self, run):
        """{us: median, min_us, runs} of `run()` between events, L2 flushed first."""
        if self.rest > 0:
            # every implementation starts from a rested card (see --rest-seconds)
            torch.cuda.synchronize()
            time.sleep(self.rest)
        times = []
        t0 = time.time()
        e0 = self.energy.read()
        while len(times) < self.max_runs and (
            len(times) < self.min_runs or time.time() - t0 < self.max_seconds
        ):
            self.flush.zero_()
            self.start.record()
            run()
            self.end.record()
            self.end.synchronize()
            times.append(self.start.elapsed_time(self.end) * 1e3)
        e1 = self.energy.read()
        tenth = max(1, len(times) // 10)
        stats = dict(
            us=statistics.median(times),
            min_us=min(times),
            runs=len(times),
            first_us=statistics.median(times[:tenth]),
            last_us=statistics.median(times[-tenth:]),
        )
        if e0 is not None and e1 is not None and e1 >= e0:
            stats["energy_mj"] = round((e1 - e0) / len(times), 2)
        stats.update(self.smi.window(t0, time.time()))
        if os.environ.get("BENCH_DUMP_TIMES"):
            stats["times"] = [round(t, 1) for t in times]
        return stats


def capture(call, warmup=2):
    """Warm-up calls on a side stream, then `call` captured into a CUDA graph:
    (graph, the call's output). The capture stream is left however the
    capture ends (torch.cuda.graph would stay on it if capture_end raised)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            call()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        g.capture_begin()
        try:
            out = call()
        except BaseException:
            try:
                g.capture_end()
            except Exception:  # noqa: BLE001 - the call's error is the one to report
                pass
            raise
        g.capture_end()
    torch.cuda.synchronize()
    return g, out


class Check:
    """The float32 reference of a cell on its checked rows."""

    def __init__(self, layer, x, logits, w_up, w_down, ref_rows):
        T = x.shape[0]
        self.rows = None
        if T > ref_rows:
            g = generator("rows/%s/%d" % (layer.config, T))
            self.rows = torch.randperm(T, device=DEV, generator=g)[:ref_rows].sort().values
        self.ref, _ = TR.ffn(x, logits, w_up, w_down, rows=self.rows, **layer.reference_kwargs())
        self.n_rows = T if self.rows is None else ref_rows

    def error(self, y):
        """||y - ref|| / ||ref|| on the checked rows (inf when not finite)."""
        got = (y if self.rows is None else y.index_select(0, self.rows)).double()
        if not bool(torch.isfinite(got).all()):
            return float("inf")
        ref = self.ref.double()
        num = float(torch.linalg.vector_norm(got - ref))
        den = float(torch.linalg.vector_norm(ref))
        return num / den if den else (0.0 if num == 0.0 else float("inf"))


# ----------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------


class Bench:
    def __init__(self, args, meta):
        self.args = args
        self.meta = meta
        self.cells = []
        self.profiles = []
        self.start = time.time()
        self.fatal = None
        self.timer = Timer(args)
        self.art = self.fn = None  # the current layer's compiled artifact / @ffn
        self.ours_missing = None  # why there is none
        self.tk_layer = self.tk_missing = None  # the current layer's triton_kernels layer
        self.tk_activation = None  # its fused SwiGLU (set in main)
        commit = meta["commit"]
        os.makedirs(args.out, exist_ok=True)
        self.json_path = os.path.join(args.out, commit + ".json")
        self.md_path = os.path.join(args.out, commit + ".md")

    def elapsed(self):
        return time.time() - self.start

    def log(self, text):
        print("[%6.1fs] %s" % (self.elapsed(), text), flush=True)

    def recover(self, where):
        """After an exception: a device that no longer synchronises (sticky
        CUDA error) ends the run; otherwise free what the failure left."""
        try:
            torch.cuda.synchronize()
        except Exception as ex:  # noqa: BLE001
            self.fatal = "device unusable after %s: %s" % (where, short(ex))
            self.log("FATAL " + self.fatal)
            return
        gc.collect()
        torch.cuda.empty_cache()

    def fail(self, cell, key, ex):
        cell["errors"][key] = short(ex)
        self.log("ERROR %s T=%d %s: %s" % (cell["layer"], cell["T"], key, short(ex)))
        print("".join(traceback.format_exc().splitlines(True)[-6:]), end="", flush=True)
        self.recover("%s T=%d %s" % (cell["layer"], cell["T"], key))

    # -- one implementation of one cell ---------------------------------------

    def run_impl(self, cell, key, call, check, graph, out=None, sync=None):
        """Times `call()` (returns the layer output) and checks its output.
        graph: capture and replay (`out`, when given, is the preallocated
        output the call writes: poisoned before the checked run). sync:
        waits for the device and raises the implementation's errors."""
        sync = sync or torch.cuda.synchronize
        g = None
        mode = "eager"
        if graph:
            try:
                g, out = capture(call)
                mode = "graph"
            except Exception as ex:  # noqa: BLE001
                self.fail(cell, key + "_capture", ex)
                if self.fatal:
                    raise RuntimeError(self.fatal) from ex
                try:
                    sync()  # clears what the failed capture left recorded
                except Exception:  # noqa: BLE001 - already reported above
                    pass
                mode = "direct"
        result = [out]

        def run():
            if g is not None:
                g.replay()
            else:
                result[0] = call()

        if result[0] is not None:
            result[0].fill_(float("nan"))
        run()
        sync()
        errs = [check.error(result[0]) if check is not None else None]
        stats = self.timer.measure(run)
        sync()
        errs.append(check.error(result[0]) if check is not None else None)
        cell[key + "_us"] = stats["us"]
        cell[key + "_min_us"] = stats["min_us"]
        cell[key + "_runs"] = stats["runs"]
        cell[key + "_mode"] = mode
        if "times" in stats:
            cell[key + "_times"] = stats["times"]
        for name in (
            "sm_mhz",
            "power_w",
            "power_capped",
            "smi_samples",
            "energy_mj",
            "first_us",
            "last_us",
        ):
            if name in stats:
                cell[key + "_" + name] = stats[name]
        if check is not None:
            err = max(errs)
            cell[key + "_err"] = err
            cell[key + "_pass"] = err <= TOL

    # -- cells ------------------------------------------------------------------

    def new_cell(self, layer, T):
        target = TARGET_US.get(layer.config)
        target_us = target[TARGET_T.index(T)] if target and T in TARGET_T else None
        cell = dict(
            config=layer.config,
            variant=layer.variant or "base",
            layer=layer.name,
            H=layer.H,
            I=layer.I,
            E=layer.E,
            k=layer.k,
            T=T,
            layout=layer.layout,
            transpose_weights=layer.transpose_weights,
            target_us=target_us,
            errors={},
        )
        self.cells.append(cell)
        return cell

    def skip(self, layer, T, why):
        cell = self.new_cell(layer, T)
        cell["skipped"] = why

    def run_cell(self, layer, T, w_up, w_down):
        args = self.args
        cell = self.new_cell(layer, T)
        t0 = time.time()
        self.log("%s T=%d ..." % (layer.name, T))
        try:
            x, logits = make_inputs(layer, T, args.routing)
            ids = torch.topk(logits.float(), layer.k, dim=1).indices
            hit = int(torch.unique(ids).numel())
            floor_us, nbytes, flops = floor_of(layer, T, hit)
            cell.update(experts_hit=hit, bytes=nbytes, flops=flops, floor_us=floor_us)
        except Exception as ex:  # noqa: BLE001
            self.fail(cell, "inputs", ex)
            return
        check = None
        try:
            check = Check(layer, x, logits, w_up, w_down, args.ref_rows)
            cell["ref_rows"] = check.n_rows
        except Exception as ex:  # noqa: BLE001
            self.fail(cell, "reference", ex)
        if self.fatal:
            return

        # triton_kernels first (then ours): the card warms up under it, so
        # the order does not favour ours
        if TKB is not None:
            self.run_triton_kernels(cell, layer, x, logits, check)
            if self.fatal:
                return

        if not args.skip_ours and self.fn is not None:
            try:
                y = torch.empty((T, layer.H), dtype=torch.bfloat16, device=DEV)
                ins = (x, logits, w_up, w_down)
                self.run_impl(
                    cell, "ours", lambda: self.fn(*ins, y), check, True, y, self.art.synchronize
                )
                cell["pct_of_floor"] = floor_us / cell["ours_us"] * 100
                if cell["target_us"]:
                    cell["ours_over_target"] = cell["ours_us"] / cell["target_us"]
                if self.wants_profile(layer, T):
                    try:
                        self.profile(layer, T, lambda: self.fn(*ins, y))
                    except Exception as ex:  # noqa: BLE001
                        self.fail(cell, "profile", ex)
            except Exception as ex:  # noqa: BLE001
                self.fail(cell, "ours", ex)
        elif not args.skip_ours:
            cell["errors"]["ours"] = self.ours_missing
        if self.fatal:
            return

        if not args.skip_baselines:
            try:
                w_up_b, w_down_b = right_operands(layer, w_up, w_down)
                self.run_impl(
                    cell,
                    "grouped_mm",
                    lambda: grouped_mm_layer(layer, x, logits, w_up_b, w_down_b),
                    check,
                    True,
                )
            except Exception as ex:  # noqa: BLE001
                self.fail(cell, "grouped_mm", ex)
            if self.fatal:
                return
            try:
                self.run_impl(
                    cell, "eager", lambda: eager_layer(layer, x, logits, w_up, w_down), check, False
                )
            except Exception as ex:  # noqa: BLE001
                self.fail(cell, "eager", ex)
        best = [cell[k + "_us"] for k in BASELINES if cell.get(k + "_pass")]
        if best and cell.get("ours_pass"):
            cell["best_baseline_us"] = min(best)
            cell["ours_over_best"] = cell["ours_us"] / min(best)
        cell["secs"] = round(time.time() - t0, 2)
        self.log("%s T=%d: %s (%.1fs)" % (layer.name, T, self.cell_summary(cell), cell["secs"]))

    def run_triton_kernels(self, cell, layer, x, logits, check):
        """The triton_kernels layer of this cell (--triton-kernels)."""
        if self.tk_layer is None:
            cell["triton_kernels_na"] = self.tk_missing
            return
        del TKB.FLAGS_LOG[:]
        try:
            self.run_impl(cell, "triton_kernels", lambda: self.tk_layer(x, logits), check, True)
        except Exception as ex:  # noqa: BLE001
            self.fail(cell, "triton_kernels", ex)
        # the tiles matmul_ogs picked for the two GEMMs (its first call's)
        cell["triton_kernels_flags"] = [TKB.flags_str(f) for f in TKB.FLAGS_LOG[:2]]

    @staticmethod
    def cell_summary(c):
        parts = ["floor %s" % fmt_us(c.get("floor_us"))]
        for key in IMPLS:
            if key + "_us" in c:
                err = c.get(key + "_err")
                parts.append(
                    "%s %s%s%s"
                    % (
                        key,
                        fmt_us(c[key + "_us"]),
                        "" if err is None else " err %s" % fmt_err(err),
                        " FAIL" if key in CHECKED and c.get(key + "_pass") is False else "",
                    )
                )
            elif key in c["errors"]:
                parts.append("%s ERROR" % key)
        return ", ".join(parts)

    # -- profile ---------------------------------------------------------------

    def wants_profile(self, layer, T):
        spec = self.args.profile
        return spec == "all" or (spec is not None and "%s:%d" % (layer.name, T) in spec.split(","))

    def profile(self, layer, T, call):
        """Kernels of one (non-graph) call of ours, in launch order."""
        from torch.profiler import ProfilerActivity, profile

        call()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        kernels = [
            (e.name, e.device_time)
            for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA
        ]
        self.profiles.append(dict(layer=layer.name, T=T, kernels=kernels))

    # -- layers ----------------------------------------------------------------

    def load_ours(self, layer):
        self.art = self.fn = None
        self.ours_missing = None
        if self.args.skip_ours:
            return
        so = os.path.join(self.args.dir, layer.name + ".so")
        try:
            self.art = rt.load(so)
            self.fn = self.art.fn("ffn")
        except Exception as ex:  # noqa: BLE001
            self.ours_missing = "loading %s: %s" % (os.path.basename(so), short(ex))
            self.log("ERROR " + self.ours_missing)

    def run_layer(self, layer, Ts):
        if self.fatal or self.elapsed() > self.args.budget:
            for T in Ts:
                self.skip(layer, T, self.fatal or "time budget")
            return
        self.log(
            "--- %s: H=%d I=%d E=%d k=%d layout=%s transpose_weights=%s"
            % (
                layer.name,
                layer.H,
                layer.I,
                layer.E,
                layer.k,
                layer.layout,
                layer.transpose_weights,
            )
        )
        try:
            w_up, w_down = make_weights(layer)
        except Exception as ex:  # noqa: BLE001
            for T in Ts:
                self.skip(layer, T, "weights: " + short(ex))
            self.recover("weights of " + layer.name)
            return
        self.load_ours(layer)
        self.tk_layer = self.tk_missing = None
        if TKB is not None:
            if layer.layout != "interleaved":
                self.tk_missing = "triton_kernels fuses the interleaved gate/up only"
            else:
                w1, w2 = right_operands(layer, w_up, w_down)
                self.tk_layer = TKB.make_layer(layer.E, layer.k, w1, w2, self.tk_activation)
        for T in Ts:
            if self.fatal or self.elapsed() > self.args.budget:
                self.skip(layer, T, self.fatal or "time budget")
                continue
            try:
                self.run_cell(layer, T, w_up, w_down)
            except Exception as ex:  # noqa: BLE001 - a bug of this script: keep going
                self.fail(self.cells[-1], "cell", ex)
            gc.collect()  # the cell's inputs, graphs and their pools
            torch.cuda.empty_cache()
            self.write()
        del w_up, w_down
        self.fn = self.art = self.tk_layer = None
        gc.collect()
        torch.cuda.empty_cache()

    # -- output ----------------------------------------------------------------

    def write(self):
        data = dict(
            meta=dict(self.meta, elapsed_s=round(self.elapsed(), 1), fatal=self.fatal),
            cells=self.cells,
            profiles=self.profiles,
        )
        with open(self.json_path + ".tmp", "w") as f:
            json.dump(json_safe(data), f, indent=1)
        os.replace(self.json_path + ".tmp", self.json_path)
        with open(self.md_path, "w") as f:
            f.write("\n".join(self.markdown()) + "\n")

    def markdown(self):
        m = self.meta
        lines = [
            "# moe.ffn benchmark (issue 10) at %s" % m["commit"],
            "",
            "- GPU: %s; torch %s (CUDA %s); %s" % (m["gpu"], m["torch"], m["cuda"], m["date"]),
            "- layer: softmax top-k renormalised, SwiGLU, bf16; base = interleaved gate/up, "
            "nn.Linear weights (.nt: plain layout, .concat: concat gate/up)",
            "- ours: the compiled layer, one CUDA graph replay; grouped_mm: torch routing + "
            "torch._grouped_mm, one CUDA graph; eager: Hugging Face per-expert loop, eager "
            "calls (host syncs, not capturable)",
            "- times: median us over N runs (at most %d runs and %g s per implementation and "
            "cell, the card idle %g s before each), L2 flushed before each; floor = max(bytes / "
            "%.1f TB/s, 6 T k H I / %d TFLOP/s), bytes = touched experts' weights + x + out "
            "+ logits"
            % (
                m["args"]["max_runs"],
                m["args"]["max_seconds_per_cell"],
                m["args"].get("rest_seconds", 0),
                COPY_TBPS,
                BF16_TFLOPS,
            ),
            "- tk: OpenAI triton_kernels %s (top-k routing + two matmul_ogs, SwiGLU fused, "
            "one CUDA graph), timed in the same cell just before ours; ours/best: ours over "
            "the fastest checked baseline of the cell (gmm, tk)"
            % (m.get("triton_kernels") or "(not run: no --triton-kernels)"),
            "- err: ||y - ref|| / ||ref|| against the float32 reference (torch_reference.ffn), "
            "tolerance %.0e" % TOL,
            "- compile (moe-aot, s): %s"
            % ", ".join(
                "%s %s" % (n, "?" if s is None else "%.2f" % s) for n, s in m["compile_s"].items()
            ),
            "",
        ]
        if TARGET_GPU not in m["gpu"]:
            lines[3:3] = [
                "- **not an %s**: the target column holds the issue's %s figures and the floor "
                "its %s bandwidth / rate, so ours/tgt and %%floor do not describe this card; "
                "the same-run baselines (gmm, tk, ours/best) do" % ((TARGET_GPU,) * 3)
            ]
        lines += table(self.cells, markdown=True)
        lines += summary_of(self.cells)
        notes = notes_of(self.cells)
        if notes or self.fatal:
            lines += ["", "## Errors", ""] + ["- " + n for n in notes]
            if self.fatal:
                lines.append("- FATAL: " + self.fatal)
        power = [c for c in self.cells if any(k + "_sm_mhz" in c for k in IMPLS)]
        if power:
            lines += [
                "",
                "## Clock and power while timing",
                "",
                "Median SM clock (MHz) and board power (W) of the nvidia-smi samples "
                "(every 50 ms) taken while each cell's runs were timed, and the share "
                "of them with the software power cap holding the clock down; board "
                "energy per run (mJ, NVML, the L2 flush included) and the medians of "
                "the first and the last 10% of the runs (us).",
                "",
                "| layer | T | ours MHz | ours W | ours capped | ours mJ | ours first us "
                "| ours last us | gmm MHz | gmm W | gmm capped | gmm mJ | tk MHz | tk capped "
                "| tk mJ | tk first us | tk last us |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            for c in power:
                lines.append(
                    "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s "
                    "| %s | %s |"
                    % (
                        c["layer"],
                        c["T"],
                        *(
                            "-" if c.get(k) is None else "%.5g" % c[k]
                            for k in (
                                "ours_sm_mhz",
                                "ours_power_w",
                                "ours_power_capped",
                                "ours_energy_mj",
                                "ours_first_us",
                                "ours_last_us",
                                "grouped_mm_sm_mhz",
                                "grouped_mm_power_w",
                                "grouped_mm_power_capped",
                                "grouped_mm_energy_mj",
                                "triton_kernels_sm_mhz",
                                "triton_kernels_power_capped",
                                "triton_kernels_energy_mj",
                                "triton_kernels_first_us",
                                "triton_kernels_last_us",
                            )
                        ),
                    )
                )
        for p in self.profiles:
            total = sum(t for _, t in p["kernels"])
            lines += [
                "",
                "## Profile: %s T=%d, %d kernels, %.1f us of GPU time (one call)"
                % (p["layer"], p["T"], len(p["kernels"]), total),
                "",
                "```",
            ]
            lines += [
                "%3d  %-60s %10.1f us" % (i, name[:60], t)
                for i, (name, t) in enumerate(p["kernels"])
            ]
            lines.append("```")
            if any(name.endswith("__pdl") for name, _ in p["kernels"]):
                lines += [
                    "",
                    "(`__pdl` kernels are launched programmatically: they start "
                    "while the kernel before them runs and their time includes "
                    "the wait for it, so the times overlap and their sum can "
                    "exceed the call.)",
                ]
        return lines


def fmt_us(v):
    if v is None:
        return "-"
    return "%.1f" % v if v < 1000 else "%.0f" % v


def fmt_err(v):
    return "-" if v is None else ("%.1e" % v if math.isfinite(v) else "inf")


COLUMNS = (
    "layer",
    "T",
    "hit",
    "ours us",
    "floor us",
    "%floor",
    "target us",
    "ours/tgt",
    "gmm us",
    "tk us",
    "ours/best",
    "eager us",
    "err ours",
    "err gmm",
    "err tk",
    "ok",
)


def row_of(c):
    if c.get("skipped"):
        return [c["layer"], str(c["T"])] + ["-"] * (len(COLUMNS) - 3) + ["skip"]
    bad = [k for k in CHECKED if c.get(k + "_pass") is False]
    bad += ["%s error" % k for k in c["errors"]]
    return [
        c["layer"],
        str(c["T"]),
        str(c.get("experts_hit", "-")),
        fmt_us(c.get("ours_us")),
        fmt_us(c.get("floor_us")),
        "-" if "pct_of_floor" not in c else "%.1f" % c["pct_of_floor"],
        "-" if c.get("target_us") is None else str(c["target_us"]),
        "-" if "ours_over_target" not in c else "%.2fx" % c["ours_over_target"],
        fmt_us(c.get("grouped_mm_us")),
        "n/a" if "triton_kernels_na" in c else fmt_us(c.get("triton_kernels_us")),
        "-" if "ours_over_best" not in c else "%.2fx" % c["ours_over_best"],
        fmt_us(c.get("eager_us")),
        fmt_err(c.get("ours_err")),
        fmt_err(c.get("grouped_mm_err")),
        fmt_err(c.get("triton_kernels_err")),
        "; ".join(bad) or "ok",
    ]


def render(columns, rows, markdown):
    """Table lines: markdown, or aligned text (first column left)."""
    if markdown:
        out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        return out + ["| " + " | ".join(r) + " |" for r in rows]
    widths = [max(len(x) for x in col) for col in zip(columns, *rows)]
    return [
        "  ".join(x.rjust(w) if i else x.ljust(w) for i, (x, w) in enumerate(zip(r, widths)))
        for r in [list(columns)] + rows
    ]


def table(cells, markdown):
    return render(COLUMNS, [row_of(c) for c in cells], markdown)


def summary_of(cells):
    """The issue's bold cells (base layers, T = 512, 4096, 16384) against the
    targets and against the same-run baselines."""
    bold = [c for c in cells if c.get("variant", "base") == "base" and c["T"] in BOLD_T]
    if not bold:
        return []
    timed = [c for c in bold if c.get("ours_pass")]
    under = [c for c in timed if c.get("ours_over_target", 2) < 1]
    vs_best = [c for c in timed if "ours_over_best" in c]
    faster = [c for c in vs_best if c["ours_over_best"] < 1]
    return [
        "",
        "Bold cells (T = %s): %d of %d timed and correct; under the target in %d; "
        "faster than every checked same-run baseline in %d of the %d that have one."
        % (
            ", ".join(map(str, BOLD_T)),
            len(timed),
            len(bold),
            len(under),
            len(faster),
            len(vs_best),
        ),
    ]


def notes_of(cells):
    notes = []
    for c in cells:
        for key, msg in c["errors"].items():
            notes.append("%s T=%d %s: %s" % (c["layer"], c["T"], key, msg))
        if c.get("skipped"):
            notes.append("%s T=%d skipped: %s" % (c["layer"], c["T"], c["skipped"]))
    return notes


def json_safe(v):
    """Non-finite floats as strings (JSON has no inf / nan)."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, dict):
        return {k: json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    return v


def import_from(d):
    """torch, moe_mlir_runtime, torch_reference.py, gen_layers.py (the copies
    in the artifacts folder `d`)."""
    global torch, F, rt, TR, GL
    for name in ("moe_mlir_runtime/__init__.py", "torch_reference.py", "gen_layers.py"):
        if not os.path.isfile(os.path.join(d, name)):
            sys.exit(
                "bench_moe: no %s in %s (build the folder with bench/build_bench.sh)" % (name, d)
            )
    sys.path.insert(0, d)
    import torch as torch_
    import torch.nn.functional as F_
    import moe_mlir_runtime as rt_
    import torch_reference as TR_
    import gen_layers as GL_

    torch, F, rt, TR, GL = torch_, F_, rt_, TR_, GL_


def import_triton_kernels(tk_dir, art_dir):
    """triton_kernels (from tk_dir) through triton_kernels_bench.py (beside
    this script or in the artifacts folder): sets TKB; returns the version
    text for the report."""
    global TKB
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (here, art_dir):
        if os.path.isfile(os.path.join(d, "triton_kernels_bench.py")):
            break
    else:
        sys.exit("bench_moe: --triton-kernels needs triton_kernels_bench.py beside bench_moe.py")
    if not os.path.isdir(os.path.join(tk_dir, "triton_kernels")):
        sys.exit("bench_moe: no triton_kernels package in %s" % tk_dir)
    for p in (tk_dir, d):
        if p not in sys.path:
            sys.path.insert(0, p)
    import triton_kernels_bench as tkb

    tkb.import_tk()
    TKB = tkb
    import triton

    return "@ %s (triton %s)" % (tkb.TK_COMMIT[:12], triton.__version__)


def import_lowprec(art_dir):
    """bench_lowprec.py (beside this script or in the artifacts folder), with
    lowprec_baselines.py next to it."""
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (here, art_dir):
        if os.path.isfile(os.path.join(d, "bench_lowprec.py")):
            break
    else:
        sys.exit("bench_moe: --weight-format needs bench_lowprec.py beside bench_moe.py")
    if d not in sys.path:
        sys.path.insert(0, d)
    import bench_lowprec

    return bench_lowprec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--dir",
        default=os.path.dirname(os.path.abspath(__file__)),
        help="the artifacts folder (default: this script's folder)",
    )
    ap.add_argument("--out", default=os.environ.get("OUT") or "bench-results")
    ap.add_argument("--configs", default="", help="comma-separated (default: all four)")
    ap.add_argument("--T", default=",".join(map(str, DEFAULT_T)))
    ap.add_argument(
        "--variants",
        action="store_true",
        help="also the .nt / .concat variants of the configs that have them",
    )
    ap.add_argument(
        "--only-built",
        action="store_true",
        help="only the layers whose library is in --dir (bench/ab_run.sh; "
        "with --variants also every config's variants built there)",
    )
    ap.add_argument(
        "--max-seconds-per-cell",
        type=float,
        default=2.0,
        help="cap on each implementation's timed runs in a cell (s)",
    )
    ap.add_argument("--min-runs", type=int, default=5)
    ap.add_argument("--max-runs", type=int, default=50)
    ap.add_argument(
        "--rest-seconds",
        type=float,
        default=0.0,
        help="idle the card this long before each implementation's timed runs, so that "
        "each starts from the same power state (default 0: back to back)",
    )
    ap.add_argument(
        "--ref-rows",
        type=int,
        default=4096,
        help="rows checked against the f32 reference (a random subset above)",
    )
    ap.add_argument(
        "--routing",
        default="random",
        help="random (the issue's cells), balanced (T k / E rows per expert) "
        "or split:D (balanced +- D rows): probes of the short-last-tile cost",
    )
    ap.add_argument(
        "--triton-kernels",
        metavar="DIR",
        default=None,
        help="also time OpenAI's triton_kernels layer (DIR holds the triton_kernels "
        "package; triton_kernels_bench.py must be beside this script or in --dir); with "
        "--weight-format mxfp4 its MXFP4 layer (tk_mxfp4)",
    )
    ap.add_argument(
        "--weight-format",
        choices=("plain", "fp8_block", "mxfp4"),
        default="plain",
        help="plain: the bf16 cells above; fp8_block: the FP8 block-weight cells of "
        "bench_lowprec.py (deepseek-v3, qwen3-30b-a3b: ours, our bf16 twin, vLLM with "
        "--vllm-fp8, torch._scaled_grouped_mm); mxfp4: its MXFP4 cells (gpt-oss-120b "
        "with gpt-oss's clamped SwiGLU and expert biases: ours, our bf16 twin, "
        "triton_kernels' matmul_ogs with MXFP4 weights with --triton-kernels)",
    )
    ap.add_argument(
        "--vllm-fp8",
        metavar="DIR",
        default=None,
        help="with --weight-format fp8_block: also time vLLM's Triton fused_moe (DIR: "
        "the folder bench/fetch_vllm_fused_moe.sh makes)",
    )
    ap.add_argument("--skip-ours", action="store_true")
    ap.add_argument("--skip-baselines", action="store_true")
    ap.add_argument(
        "--profile",
        nargs="?",
        const="all",
        default=None,
        help="per-kernel times of ours: 'all' (the default of a bare "
        "--profile) or LAYER:T,... (e.g. mixtral-8x7b:4096)",
    )
    ap.add_argument(
        "--budget", type=float, default=540.0, help="seconds after which no new cell starts"
    )
    args = ap.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)
    args.dir = os.path.abspath(args.dir)
    import_from(args.dir)
    if args.weight_format != "plain":
        return import_lowprec(args.dir).main(sys.modules[__name__], args)
    del args.weight_format, args.vllm_fp8  # plain: the meta's args as before

    configs = [c for c in args.configs.split(",") if c] or list(GL.CONFIGS)
    unknown = [c for c in configs if c not in GL.CONFIGS]
    if unknown:
        ap.error("unknown config(s) %s (known: %s)" % (", ".join(unknown), ", ".join(GL.CONFIGS)))
    Ts = [int(t) for t in args.T.split(",") if t]

    def built(layer):
        return os.path.isfile(os.path.join(args.dir, layer.name + ".so"))

    # --only-built: what the folder holds (variants of any config too);
    # else the default layers, a missing library being a failed cell.
    pool = GL.ALL_LAYERS if args.only_built else GL.LAYERS
    layers = [
        layer
        for layer in pool
        if layer.config in configs
        and (args.variants or not layer.variant)
        and (built(layer) or not args.only_built)
    ]
    if not torch.cuda.is_available():
        sys.exit("bench_moe: torch sees no CUDA device")
    TR.configure_precision()
    tk_version = None
    if args.triton_kernels:
        tk_version = import_triton_kernels(os.path.abspath(args.triton_kernels), args.dir)

    commit_file = os.path.join(args.dir, "COMMIT")
    commit = "unknown"
    if os.path.isfile(commit_file):
        with open(commit_file) as f:
            commit = f.read().strip()
    compile_s = {}
    for layer in layers:
        path = os.path.join(args.dir, layer.name + ".manifest.json")
        compile_s[layer.name] = None
        if os.path.isfile(path):
            with open(path) as f:
                compile_s[layer.name] = json.load(f).get("compile_s")
    meta = dict(
        commit=commit,
        gpu=torch.cuda.get_device_name(0),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        python=sys.version.split()[0],
        date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        args=vars(args),
        tolerance=TOL,
        copy_tbps=COPY_TBPS,
        bf16_tflops=BF16_TFLOPS,
        compile_s=compile_s,
        triton_kernels=tk_version,
    )
    bench = Bench(args, meta)
    if TKB is not None:
        bench.tk_activation = TKB.make_activation("std", 1.0, None)
    bench.log(
        "bench_moe: %s, torch %s, commit %s; %d layers x T=%s -> %s"
        % (meta["gpu"], meta["torch"], commit, len(layers), args.T, bench.json_path)
    )
    for layer in layers:
        bench.run_layer(layer, Ts)
    bench.timer.smi.stop()
    bench.write()

    notes = notes_of(bench.cells)
    if notes:
        print("\nerrors / skipped:")
        for n in notes:
            print("  " + n[:300])
    print(
        "\n%s (%s, %.0fs): us, median; err vs f32 reference, tolerance %.0e"
        % (commit, meta["gpu"], bench.elapsed(), TOL)
    )
    print("\n".join(table(bench.cells, markdown=False)))
    failed = [
        c
        for c in bench.cells
        if c["errors"] or c.get("skipped") or any(c.get(k + "_pass") is False for k in CHECKED)
    ]
    print(
        "%d cells, %d with a failure, error or skip; %s"
        % (len(bench.cells), len(failed), bench.md_path)
    )
    return 1 if failed or bench.fatal else 0


if __name__ == "__main__":
    sys.exit(main())
