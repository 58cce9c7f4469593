"""bench_moe.py --weight-format fp8_block / mxfp4: low-precision cells.

Not a script of its own: bench_moe.py imports it (from beside itself or
from --dir) after its usual setup and hands over its own module (BM: the
Timer, run_impl, inputs, routing, reference of the plain bench) and its
arguments:

  python3 bench_moe.py --weight-format fp8_block --dir ART --out "$OUT"
      [--vllm-fp8 DIR] [--configs deepseek-v3,qwen3-30b-a3b] [--T ...]
      [--skip-ours] [--skip-baselines] [--budget S] [...]
  python3 bench_moe.py --weight-format mxfp4 --dir ART --out "$OUT"
      [--triton-kernels TK] [--configs gpt-oss-120b] [--T ...] [...]

MXFP4 (gpt-oss-120b, MX_CONFIGS): ART holds gpt-oss-120b.mxfp4.so
(gen_layers.py's MXFP4 layer: packed e2m1 weights with E8M0 scales per 32
K, the checkpoint's clamped SwiGLU, alpha 1.702, limit 7, up + 1, and
bf16 expert biases) and its bf16 twin gpt-oss-120b.oss.so (the same layer
in bf16; LOWPREC=mxfp4 bash build_bench.sh ART); TK holds OpenAI's
triton_kernels package at v3.6.0 (see triton_kernels_bench.py). Per
configuration: the bench's bf16 weights (bench_moe.make_weights: randn *
0.02, interleaved gate/up, nn.Linear layout) and bf16 expert biases
(randn * 0.1), the weights quantized to MXFP4 per 32 K
(lowprec_baselines.quantize_mxfp4: scale 2^ceil(log2(amax / 6)), nearest
e2m1 magnitude). Per cell, the bench's inputs and, timed in this order
(L2 flushed, median, CUDA graph):

  tk_mxfp4    triton_kernels' matmul_ogs with MXFP4 weights (only with
              --triton-kernels): the same bf16 weights quantized by its own
              downcast_to_mxfp (ties to even: ~1% of the bytes differ from
              ours) and put into its Hopper value / scale layouts once,
              outside the timed region (its documented usage); its top-k
              routing, gate/up + bias with its fused gpt-oss SwiGLU
              (swiglu_fn), down + bias with the routing weights, the k-way
              sum (lowprec_baselines.make_tk_mxfp4_layer)
  ours        the compiled gpt-oss-120b.mxfp4 layer
  ours_bf16   the compiled gpt-oss-120b.oss layer on the bf16 weights
              before quantization

Correctness: ours against torch_reference.ffn (f32, intermediates rounded
to bf16 where the chain rounds) on the exactly dequantized MXFP4 weights
(code x 2^(s - 127)) with the biases and the checkpoint's GLU, tk_mxfp4
against the same reference of its own quantized weights (the same one when
the codes agree), ours_bf16 against that reference of the bf16 weights;
1e-2 passes; beside it every MXFP4 implementation's error against the bf16
layer's reference (q-err). Floor: max(bytes / 4.3 TB/s, 6 T k H I / 790
TFLOP/s: w4a16, the MMAs run in bf16), bytes = the experts hit x (3 H I / 2
bytes of codes + 3 H I / 32 of scales + (2 I + H) x 2 of biases) + x + out
+ logits. Writes <out>/<commit>.mxfp4.json and .mxfp4.md.

FP8 block weights:

ART holds <config>.fp8.so (gen_layers.py's FP8 block layer) and its bf16
twin <config>.concat.so (build them with LAYERS=... or gen_layers.py
--lowprec: see build_bench.sh); DIR is the vendored vLLM fused_moe
(bench/fetch_vllm_fused_moe.sh). Configurations: deepseek-v3 and
qwen3-30b-a3b (FP8_CONFIGS), T as usual.

Per configuration: the bench's bf16 weights (bench_moe.make_weights, randn
* 0.02, concat gate/up, nn.Linear layout [E, 2I, H] / [E, H, I]) quantized
per 128 x 128 block to e4m3 + f32 scales (the checkpoints' format). Per
cell, the bench's inputs (make_inputs: same x and tie-free logits as the
plain cells of that configuration) and, timed in this order like the plain
bench (L2 flushed, median, CUDA graph):

  vllm        vLLM's Triton fused_moe, block FP8 (only with --vllm-fp8)
  ours        the compiled <config>.fp8 layer
  ours_bf16   the compiled <config>.concat layer on the bf16 weights
              before quantization (our bf16 layer)
  sgmm        torch._scaled_grouped_mm rowwise: the block weights
              re-quantized per output channel, activations per row

Correctness (on the checked rows, as the plain bench): ours and vllm
against an f32 reference of the FP8 block computation (dequantized
weights, activations quantized per token per 128 as the format says,
intermediates rounded to bf16 where the chain rounds them), sgmm against
the same reference of its own rowwise scheme, ours_bf16 against the plain
bench's f32 reference (torch_reference.ffn); ||y - ref|| / ||ref|| <=
1e-2 passes. Beside it, every FP8 implementation's error against the
unquantized bf16 layer's reference (<key>_err_bf16, "q-err": what
quantization costs).

Floor: max(bytes / 4.3 TB/s, 6 T k H I / 1580 TFLOP/s) (the H200's copy
bandwidth and dense FP8 rate), bytes = the experts hit's weights at 1 byte
an element + their f32 scales (4 bytes per 128 x 128 block) + x + out +
logits. Writes <out>/<commit>.fp8.json and .fp8.md.
"""

import os
import time

import torch
import torch.nn.functional as F

import lowprec_baselines as LB

FP8_CONFIGS = ("deepseek-v3", "qwen3-30b-a3b")
FP8_TFLOPS = 1580  # H200 dense FP8 (2x the bf16 rate of bench_moe.BF16_TFLOPS)
KEYS = ("vllm", "ours", "ours_bf16", "sgmm")  # timing order
BASELINES = ("vllm", "sgmm")  # the FP8 baselines of ours/best
MX_CONFIGS = ("gpt-oss-120b",)
MX_KEYS = ("tk_mxfp4", "ours", "ours_gptoss", "ours_bf16")  # timing order
MX_BASELINES = ("tk_mxfp4",)
BIAS_SCALE = 0.1  # the expert biases: randn * this, bf16
# per --weight-format: the layers' suffix (and the files'), configurations,
# implementations in timing order
FORMATS = {
    "fp8_block": dict(suffix="fp8", configs=FP8_CONFIGS, keys=KEYS),
    "mxfp4": dict(suffix="mxfp4", configs=MX_CONFIGS, keys=MX_KEYS),
}
BM = None  # bench_moe (the caller's module), set in main()


def floor_fp8(layer, T, experts_hit):
    """(floor us, bytes, flops) of one call with FP8 block weights."""
    H, I, E, k = layer.H, layer.I, layer.E, layer.k
    (_, a, b), (_, c, d) = layer.scale_shapes
    per_expert = 3 * H * I + 4 * (a * b + c * d)
    nbytes = per_expert * experts_hit + 2 * T * H * 2 + T * E * 2
    flops = 6 * T * k * H * I
    floor_s = max(nbytes / (BM.COPY_TBPS * 1e12), flops / (FP8_TFLOPS * 1e12))
    return floor_s * 1e6, nbytes, flops


def floor_mxfp4(layer, T, experts_hit):
    """(floor us, bytes, flops) of one call with MXFP4 weights (w4a16: the
    compute bound is the bf16 rate)."""
    H, I, E, k = layer.H, layer.I, layer.E, layer.k
    per_expert = 3 * H * I // 2 + 3 * H * I // LB.MX_BLOCK + 2 * (2 * I + H)
    nbytes = per_expert * experts_hit + 2 * T * H * 2 + T * E * 2
    flops = 6 * T * k * H * I
    floor_s = max(nbytes / (BM.COPY_TBPS * 1e12), flops / (BM.BF16_TFLOPS * 1e12))
    return floor_s * 1e6, nbytes, flops


def make_biases(layer):
    """The expert biases of a layer's configuration: bf16 w_up_bias [E, 2I]
    and w_down_bias [E, H], randn * BIAS_SCALE (one set per configuration)."""
    g = BM.generator("biases/" + layer.config)
    (E, n1), (_, n2) = layer.bias_shapes
    b_up = torch.randn((E, n1), dtype=torch.bfloat16, device=BM.DEV, generator=g)
    b_down = torch.randn((E, n2), dtype=torch.bfloat16, device=BM.DEV, generator=g)
    return b_up.mul_(BIAS_SCALE), b_down.mul_(BIAS_SCALE)


class Rows(object):
    """The checked rows of a cell, as bench_moe.Check picks them."""

    def __init__(self, layer, T, ref_rows):
        self.rows = None
        if T > ref_rows:
            g = BM.generator("rows/%s/%d" % (layer.config, T))
            self.rows = torch.randperm(T, device=BM.DEV, generator=g)[:ref_rows].sort().values
        self.n_rows = T if self.rows is None else ref_rows


def glu_reference(layer, x, logits, rows, w_up, w_down, biases):
    """torch_reference.ffn (f32, intermediates rounded to bf16 as the chain
    rounds them) of a layer with the checkpoint's GLU and expert biases on
    `rows` (None: all); w_up / w_down bf16 tensors or LB.Mxfp4Experts (the
    exactly dequantized MXFP4 weights)."""
    ref, _ = BM.TR.ffn(
        x,
        logits,
        w_up,
        w_down,
        rows=rows,
        w_up_bias=biases[0],
        w_down_bias=biases[1],
        **layer.reference_kwargs(),
    )
    return ref


def quant_reference(
    layer, x, logits, rows, expert_weights, act_quant, bf16_glu=False, round_up=True
):
    """f32 reference of an FP8 layer on `rows` (None: all): expert_weights(e)
    -> (w_up f32 [2I, H], w_down f32 [H, I]) dequantized; act_quant(f32
    [M, K]) -> f32, the activations quantized and dequantized; the GEMM
    outputs and the SwiGLU rounded to bf16 as the chain rounds them (the
    SwiGLU in f32, rounded once; bf16_glu: silu and the product in bf16, as
    the torch baseline computes it: the quantization that follows turns a
    different rounding into a different e4m3 code, ~1e-2 of error), the
    routing weights and the k-way sum in f32. round_up=False: the SwiGLU
    reads the up GEMM's unrounded values, as our fused chain's GLU epilogue
    does (its f32 accumulators); only its output, the down GEMM's input, is
    bf16 (the place of that one rounding is ~1.5e-2 after requantization)."""
    if rows is not None:
        x, logits = x.index_select(0, rows), logits.index_select(0, rows)
    w, ids = BM.routing(logits, layer.k)
    y = torch.zeros((x.shape[0], layer.H), dtype=torch.float32, device=x.device)
    I = layer.I
    for e in torch.unique(ids).tolist():
        r, j = torch.nonzero(ids == e, as_tuple=True)
        w_up, w_down = expert_weights(e)
        up = act_quant(x.index_select(0, r).float()) @ w_up.t()
        if round_up:
            up = up.to(torch.bfloat16).float()
        if bf16_glu:
            up16 = up.to(torch.bfloat16)
            h = (F.silu(up16[:, :I]) * up16[:, I:]).float()
        else:
            h = (F.silu(up[:, :I]) * up[:, I:]).to(torch.bfloat16).float()
        down = (act_quant(h) @ w_down.t()).to(torch.bfloat16).float()
        y.index_add_(0, r, down * w[r, j].unsqueeze(1))
    return y


class Ref(object):
    """A reference on the rows of a bench_moe.Check (same error())."""

    def __init__(self, like, ref):
        self.rows, self.n_rows, self.ref = like.rows, like.n_rows, ref

    def error(self, y):
        return BM.Check.error(self, y)


class WithBf16Error(object):
    """Checks against `primary` (what run_impl records and passes) and
    remembers the error against the bf16 reference of the last check."""

    def __init__(self, primary, bf16):
        self.primary, self.bf16, self.err_bf16 = primary, bf16, None

    def error(self, y):
        self.err_bf16 = self.bf16.error(y)
        return self.primary.error(y)


def make_bench_class():
    class LowprecBench(BM.Bench):
        def __init__(self, args, meta):
            super().__init__(args, meta)
            commit = meta["commit"]
            self.format = args.weight_format
            suffix = FORMATS[self.format]["suffix"]
            self.json_path = os.path.join(args.out, "%s.%s.json" % (commit, suffix))
            self.md_path = os.path.join(args.out, "%s.%s.md" % (commit, suffix))
            self.fn16 = self.art16 = None
            self.ours16_missing = None
            self.vllm_layer = self.vllm_missing = None
            self.sgmm_layer = None
            self.sgmm_weights = None
            self.tk_weights = None  # the MXFP4 cells' triton_kernels weights

        def load(self, name):
            """(artifact, @ffn, None) of ART/<name>.so, or (None, None, why)."""
            so = os.path.join(self.args.dir, name + ".so")
            try:
                art = BM.rt.load(so)
                return art, art.fn("ffn"), None
            except Exception as ex:  # noqa: BLE001
                why = "loading %s: %s" % (os.path.basename(so), BM.short(ex))
                self.log("ERROR " + why)
                return None, None, why

        def run_layer(self, layer, Ts):
            if layer.weight_format == "mxfp4":
                return self.run_mxfp4_layer(layer, Ts)
            twin = BM.GL.LAYERS_BY_NAME[layer.twin]
            if self.fatal or self.elapsed() > self.args.budget:
                for T in Ts:
                    self.skip(layer, T, self.fatal or "time budget")
                return
            self.log(
                "--- %s: H=%d I=%d E=%d k=%d, FP8 block weights (bf16 twin %s)"
                % (layer.name, layer.H, layer.I, layer.E, layer.k, twin.name)
            )
            try:
                t0 = time.time()
                w_up, w_down = BM.make_weights(twin)  # bf16 [E, 2I, H], [E, H, I]
                q = LB.quantize_fp8_blocks(w_up) + LB.quantize_fp8_blocks(w_down)
                torch.cuda.synchronize()
                self.log("weights quantized (%.1fs)" % (time.time() - t0))
            except Exception as ex:  # noqa: BLE001
                for T in Ts:
                    self.skip(layer, T, "weights: " + BM.short(ex))
                self.recover("weights of " + layer.name)
                return
            self.art = self.fn = self.art16 = self.fn16 = None
            self.ours_missing = self.ours16_missing = None
            if not self.args.skip_ours:
                self.art, self.fn, self.ours_missing = self.load(layer.name)
                self.art16, self.fn16, self.ours16_missing = self.load(twin.name)
            self.vllm_layer = self.sgmm_layer = self.sgmm_weights = None
            self.vllm_missing = None
            if not self.args.skip_baselines:
                if LB.V is None:
                    self.vllm_missing = "no --vllm-fp8"
                else:
                    self.vllm_layer = LB.make_vllm_layer(
                        layer.E, layer.k, q[0], q[2], q[1], q[3], BM.routing
                    )
                try:
                    self.sgmm_weights = LB.requantize_per_channel(
                        q[0], q[1]
                    ) + LB.requantize_per_channel(q[2], q[3])
                    self.sgmm_layer = LB.make_scaled_grouped_mm_layer(
                        layer.E, layer.k, *self.sgmm_weights, BM.routing
                    )
                except Exception as ex:  # noqa: BLE001
                    self.log("ERROR sgmm weights: %s" % BM.short(ex))
                    self.recover("sgmm weights of " + layer.name)
            for T in Ts:
                if self.fatal or self.elapsed() > self.args.budget:
                    self.skip(layer, T, self.fatal or "time budget")
                    continue
                try:
                    self.run_fp8_cell(layer, twin, T, w_up, w_down, q)
                except Exception as ex:  # noqa: BLE001 - a bug of this script: keep going
                    self.fail(self.cells[-1], "cell", ex)
                BM.gc.collect()
                torch.cuda.empty_cache()
                self.write()
            del w_up, w_down, q
            self.fn = self.art = self.fn16 = self.art16 = None
            self.vllm_layer = self.sgmm_layer = self.sgmm_weights = None
            BM.gc.collect()
            torch.cuda.empty_cache()

        def run_fp8_cell(self, layer, twin, T, w_up, w_down, q):
            args = self.args
            cell = self.new_cell(layer, T)
            cell.update(weight_format="fp8_block", target_us=None, bf16_layer=twin.name)
            t0 = time.time()
            self.log("%s T=%d ..." % (layer.name, T))
            try:
                x, logits = BM.make_inputs(layer, T, args.routing)
                ids = torch.topk(logits.float(), layer.k, dim=1).indices
                hit = int(torch.unique(ids).numel())
                floor_us, nbytes, flops = floor_fp8(layer, T, hit)
                cell.update(experts_hit=hit, bytes=nbytes, flops=flops, floor_us=floor_us)
                cell["bf16_floor_us"] = BM.floor_of(layer, T, hit)[0]
            except Exception as ex:  # noqa: BLE001
                self.fail(cell, "inputs", ex)
                return
            check16 = check8 = check8f = check_rw = None
            try:
                check16 = BM.Check(twin, x, logits, w_up, w_down, args.ref_rows)
                cell["ref_rows"] = check16.n_rows

                # vLLM rounds the up GEMM's output to bf16 before the
                # SwiGLU (check8), our fused chain does not (check8f).
                def block_fp8(round_up):
                    return Ref(
                        check16,
                        quant_reference(
                            layer,
                            x,
                            logits,
                            check16.rows,
                            lambda e: (
                                LB.dequantize_fp8_block(q[0][e], q[1][e]),
                                LB.dequantize_fp8_block(q[2][e], q[3][e]),
                            ),
                            LB.fake_quant_groups,
                            round_up=round_up,
                        ),
                    )

                check8, check8f = block_fp8(True), block_fp8(False)
                if self.sgmm_weights is not None:
                    w1, s1, w2, s2 = self.sgmm_weights
                    check_rw = Ref(
                        check16,
                        quant_reference(
                            layer,
                            x,
                            logits,
                            check16.rows,
                            lambda e: (
                                w1[e].float() * s1[e, :, None],
                                w2[e].float() * s2[e, :, None],
                            ),
                            LB.fake_quant_rows,
                            bf16_glu=True,
                        ),
                    )
            except Exception as ex:  # noqa: BLE001
                self.fail(cell, "reference", ex)
            if self.fatal:
                return

            def timed(key, call, check, out=None, sync=None):
                both = WithBf16Error(check, check16) if check is not None else None
                try:
                    self.run_impl(cell, key, call, both, True, out, sync)
                    if both is not None:
                        cell[key + "_err_bf16"] = both.err_bf16
                except Exception as ex:  # noqa: BLE001
                    self.fail(cell, key, ex)

            # vLLM first (then ours): the card warms up under it, as the plain
            # bench does with triton_kernels
            if self.vllm_layer is not None:
                timed("vllm", lambda: self.vllm_layer(x, logits), check8)
                cell["vllm_config"] = "%s %s" % (
                    self.vllm_layer.used.get("source"),
                    self.vllm_layer.used.get("config"),
                )
            elif not args.skip_baselines:
                cell["vllm_na"] = self.vllm_missing
            if self.fatal:
                return
            if not args.skip_ours:
                if self.fn is not None:
                    y = torch.empty((T, layer.H), dtype=torch.bfloat16, device=BM.DEV)
                    ins = (x, logits, q[0], q[2], q[1], q[3])  # w_up, w_down, their scales
                    timed("ours", lambda: self.fn(*ins, y), check8f, y, self.art.synchronize)
                    if "ours_us" in cell:
                        cell["pct_of_floor"] = floor_us / cell["ours_us"] * 100
                    if self.wants_profile(layer, T):
                        try:
                            self.profile(layer, T, lambda: self.fn(*ins, y))
                        except Exception as ex:  # noqa: BLE001
                            self.fail(cell, "profile", ex)
                else:
                    cell["errors"]["ours"] = self.ours_missing
                if self.fatal:
                    return
                if self.fn16 is not None:
                    y16 = torch.empty((T, layer.H), dtype=torch.bfloat16, device=BM.DEV)
                    ins16 = (x, logits, w_up, w_down)
                    try:
                        self.run_impl(
                            cell,
                            "ours_bf16",
                            lambda: self.fn16(*ins16, y16),
                            check16,
                            True,
                            y16,
                            self.art16.synchronize,
                        )
                    except Exception as ex:  # noqa: BLE001
                        self.fail(cell, "ours_bf16", ex)
                else:
                    cell["errors"]["ours_bf16"] = self.ours16_missing
                if self.fatal:
                    return
            if self.sgmm_layer is not None:
                timed("sgmm", lambda: self.sgmm_layer(x, logits), check_rw)
            if cell.get("ours_pass"):
                best = [cell[k + "_us"] for k in BASELINES if cell.get(k + "_pass")]
                if best:
                    cell["best_baseline_us"] = min(best)
                    cell["ours_over_best"] = cell["ours_us"] / min(best)
                if cell.get("ours_bf16_pass"):
                    cell["ours_over_bf16"] = cell["ours_us"] / cell["ours_bf16_us"]
            cell["secs"] = round(time.time() - t0, 2)
            self.log(
                "%s T=%d: %s (%.1fs)" % (layer.name, T, cell_summary(cell, KEYS), cell["secs"])
            )

        # -- MXFP4 ------------------------------------------------------------

        def run_mxfp4_layer(self, layer, Ts):
            twin = BM.GL.LAYERS_BY_NAME[layer.twin]
            if self.fatal or self.elapsed() > self.args.budget:
                for T in Ts:
                    self.skip(layer, T, self.fatal or "time budget")
                return
            self.log(
                "--- %s: H=%d I=%d E=%d k=%d, MXFP4 weights (bf16 twin %s)"
                % (layer.name, layer.H, layer.I, layer.E, layer.k, twin.name)
            )
            try:
                t0 = time.time()
                w_up, w_down = BM.make_weights(twin)  # bf16 [E, 2I, H], [E, H, I]
                biases = make_biases(layer)
                # codes_up, scales_up, codes_down, scales_down
                q = LB.quantize_mxfp4(w_up) + LB.quantize_mxfp4(w_down)
                torch.cuda.synchronize()
                self.log("weights quantized (%.1fs)" % (time.time() - t0))
            except Exception as ex:  # noqa: BLE001
                for T in Ts:
                    self.skip(layer, T, "weights: " + BM.short(ex))
                self.recover("weights of " + layer.name)
                return
            self.art = self.fn = self.art16 = self.fn16 = self.artG = self.fnG = None
            self.ours_missing = self.ours16_missing = self.oursG_missing = None
            q_hopper = None
            if not self.args.skip_ours:
                # ours: the mxfp4_hopper layer on the codes repacked once
                # (timed here); ours_gptoss: the checkpoint-order layer
                self.art, self.fn, self.ours_missing = self.load(layer.config + ".mxfp4h")
                self.artG, self.fnG, self.oursG_missing = self.load(layer.name)
                self.art16, self.fn16, self.ours16_missing = self.load(twin.name)
                from moe_mlir_runtime.mxfp4 import repack_mxfp4_hopper

                torch.cuda.synchronize()
                t0 = time.time()
                q_hopper = (repack_mxfp4_hopper(q[0]), repack_mxfp4_hopper(q[2]))
                torch.cuda.synchronize()
                self.meta["mxfp4_repack_s"] = round(time.time() - t0, 3)
                self.log("codes repacked to mxfp4_hopper (%.2fs)" % (time.time() - t0))
            self.tk_layer = self.tk_weights = self.tk_missing = None
            tk_same = False
            if not self.args.skip_baselines:
                if BM.TKB is None:
                    self.tk_missing = "no --triton-kernels"
                else:
                    try:
                        t0 = time.time()
                        glu = layer.glu
                        assert glu["up_bias"] == 1.0, "triton_kernels' swiglu_fn adds 1 to up"
                        w1 = LB.tk_quantize_mxfp4(w_up)
                        w2 = LB.tk_quantize_mxfp4(w_down)
                        self.tk_weights = (w1, w2)
                        self.tk_layer = LB.make_tk_mxfp4_layer(
                            BM.TKB,
                            layer.E,
                            layer.k,
                            w1,
                            w2,
                            biases[0].float(),
                            biases[1].float(),
                            BM.TKB.make_activation("tk", glu["alpha"], glu["limit"]),
                        )
                        # where triton_kernels' rounding (ties to even) and
                        # ours (ties to the smaller magnitude) differ
                        diff = sum(
                            int((w["codes"] != q[i]).sum())
                            + int((w["e8m0"].view(torch.uint8) != q[i + 1].view(torch.uint8)).sum())
                            for i, w in ((0, w1), (2, w2))
                        )
                        tk_same = diff == 0
                        self.tk_bytes_differ = diff
                        torch.cuda.synchronize()
                        self.log(
                            "triton_kernels weights quantized and swizzled (%.1fs); %d bytes "
                            "differ from ours" % (time.time() - t0, diff)
                        )
                    except Exception as ex:  # noqa: BLE001
                        self.tk_layer = self.tk_weights = None
                        self.tk_missing = "triton_kernels weights: " + BM.short(ex)
                        self.log("ERROR " + self.tk_missing)
                        self.recover("triton_kernels weights of " + layer.name)
            for T in Ts:
                if self.fatal or self.elapsed() > self.args.budget:
                    self.skip(layer, T, self.fatal or "time budget")
                    continue
                try:
                    self.run_mxfp4_cell(layer, twin, T, w_up, w_down, biases, q, q_hopper, tk_same)
                except Exception as ex:  # noqa: BLE001 - a bug of this script: keep going
                    self.fail(self.cells[-1], "cell", ex)
                BM.gc.collect()
                torch.cuda.empty_cache()
                self.write()
            del w_up, w_down, biases, q, q_hopper
            self.fn = self.art = self.fn16 = self.art16 = self.fnG = self.artG = None
            self.tk_layer = self.tk_weights = None
            BM.gc.collect()
            torch.cuda.empty_cache()

        def run_mxfp4_cell(self, layer, twin, T, w_up, w_down, biases, q, q_hopper, tk_same):
            args = self.args
            cell = self.new_cell(layer, T)
            cell.update(weight_format="mxfp4", target_us=None, bf16_layer=twin.name)
            t0 = time.time()
            self.log("%s T=%d ..." % (layer.name, T))
            try:
                x, logits = BM.make_inputs(layer, T, args.routing)
                ids = torch.topk(logits.float(), layer.k, dim=1).indices
                hit = int(torch.unique(ids).numel())
                floor_us, nbytes, flops = floor_mxfp4(layer, T, hit)
                cell.update(experts_hit=hit, bytes=nbytes, flops=flops, floor_us=floor_us)
                cell["bf16_floor_us"] = BM.floor_of(layer, T, hit)[0]
            except Exception as ex:  # noqa: BLE001
                self.fail(cell, "inputs", ex)
                return
            check16 = check_mx = check_tk = None
            try:
                rows = Rows(layer, T, args.ref_rows)
                cell["ref_rows"] = rows.n_rows

                def ref(lay, w1, w2):
                    return Ref(rows, glu_reference(lay, x, logits, rows.rows, w1, w2, biases))

                check16 = ref(twin, w_up, w_down)
                check_mx = ref(layer, LB.Mxfp4Experts(q[0], q[1]), LB.Mxfp4Experts(q[2], q[3]))
                if self.tk_weights is not None:
                    if tk_same:
                        check_tk = check_mx
                    else:
                        w1, w2 = self.tk_weights
                        check_tk = ref(
                            layer,
                            LB.Mxfp4Experts(w1["codes"], w1["e8m0"]),
                            LB.Mxfp4Experts(w2["codes"], w2["e8m0"]),
                        )
            except Exception as ex:  # noqa: BLE001
                self.fail(cell, "reference", ex)
            if self.fatal:
                return

            def timed(key, call, check, out=None, sync=None):
                both = WithBf16Error(check, check16) if check is not None else None
                try:
                    self.run_impl(cell, key, call, both, True, out, sync)
                    if both is not None:
                        cell[key + "_err_bf16"] = both.err_bf16
                except Exception as ex:  # noqa: BLE001
                    self.fail(cell, key, ex)

            # triton_kernels first (then ours): the card warms up under it,
            # as the plain bench does
            if self.tk_layer is not None:
                del BM.TKB.FLAGS_LOG[:]
                timed("tk_mxfp4", lambda: self.tk_layer(x, logits), check_tk)
                # the tiles matmul_ogs picked for the two GEMMs (its first call's)
                cell["tk_mxfp4_flags"] = [BM.TKB.flags_str(f) for f in BM.TKB.FLAGS_LOG[:2]]
                cell["tk_mxfp4_num_warps"] = self.tk_layer.used.get("num_warps")
                cell["tk_mxfp4_bytes_differ"] = self.tk_bytes_differ
            elif not args.skip_baselines:
                cell["tk_mxfp4_na"] = self.tk_missing
            if self.fatal:
                return
            if not args.skip_ours:
                if self.fn is not None:
                    y = torch.empty((T, layer.H), dtype=torch.bfloat16, device=BM.DEV)
                    # w_up, w_down, their biases, their scales
                    ins = (x, logits, q_hopper[0], q_hopper[1], biases[0], biases[1], q[1], q[3])
                    timed("ours", lambda: self.fn(*ins, y), check_mx, y, self.art.synchronize)
                    if "ours_us" in cell:
                        cell["pct_of_floor"] = floor_us / cell["ours_us"] * 100
                    if self.wants_profile(layer, T):
                        try:
                            self.profile(layer, T, lambda: self.fn(*ins, y))
                        except Exception as ex:  # noqa: BLE001
                            self.fail(cell, "profile", ex)
                else:
                    cell["errors"]["ours"] = self.ours_missing
                if self.fatal:
                    return
                if self.fnG is not None:
                    yG = torch.empty((T, layer.H), dtype=torch.bfloat16, device=BM.DEV)
                    insG = (x, logits, q[0], q[2], biases[0], biases[1], q[1], q[3])
                    timed(
                        "ours_gptoss",
                        lambda: self.fnG(*insG, yG),
                        check_mx,
                        yG,
                        self.artG.synchronize,
                    )
                else:
                    cell["errors"]["ours_gptoss"] = self.oursG_missing
                if self.fatal:
                    return
                if self.fn16 is not None:
                    y16 = torch.empty((T, layer.H), dtype=torch.bfloat16, device=BM.DEV)
                    ins16 = (x, logits, w_up, w_down, biases[0], biases[1])
                    try:
                        self.run_impl(
                            cell,
                            "ours_bf16",
                            lambda: self.fn16(*ins16, y16),
                            check16,
                            True,
                            y16,
                            self.art16.synchronize,
                        )
                    except Exception as ex:  # noqa: BLE001
                        self.fail(cell, "ours_bf16", ex)
                else:
                    cell["errors"]["ours_bf16"] = self.ours16_missing
                if self.fatal:
                    return
            if cell.get("ours_pass"):
                best = [cell[k + "_us"] for k in MX_BASELINES if cell.get(k + "_pass")]
                if best:
                    cell["best_baseline_us"] = min(best)
                    cell["ours_over_best"] = cell["ours_us"] / min(best)
                if cell.get("ours_bf16_pass"):
                    cell["ours_over_bf16"] = cell["ours_us"] / cell["ours_bf16_us"]
            cell["secs"] = round(time.time() - t0, 2)
            self.log(
                "%s T=%d: %s (%.1fs)" % (layer.name, T, cell_summary(cell, MX_KEYS), cell["secs"])
            )

        def markdown(self):
            if self.format == "mxfp4":
                return self.markdown_mxfp4()
            m = self.meta
            bullets = [
                "- layer: softmax top-k renormalised, SwiGLU (concat gate/up), nn.Linear "
                "weights; FP8 block = e4m3 weights with f32 scales per 128 x 128 block, "
                "activations quantized per token per 128 channels at run time",
                "- ours: the compiled <config>.fp8 layer; bf16: our compiled <config>.concat "
                "layer on the weights before quantization; vllm: %s; sgmm: "
                "torch._scaled_grouped_mm rowwise (weights re-quantized per output channel, "
                "activations per row); all one CUDA graph replay"
                % (m.get("vllm_fp8") or "(not run: no --vllm-fp8)"),
                "- times: median us over N runs (at most %d runs and %g s per implementation "
                "and cell, the card idle %g s before each), L2 flushed before each; floor = "
                "max(bytes / %.1f TB/s, 6 T k H I / %d TFLOP/s), bytes = touched experts' "
                "FP8 weights and their f32 block scales + x + out + logits"
                % (
                    m["args"]["max_runs"],
                    m["args"]["max_seconds_per_cell"],
                    m["args"].get("rest_seconds", 0),
                    BM.COPY_TBPS,
                    FP8_TFLOPS,
                ),
                "- err: ||y - ref|| / ||ref|| against the f32 reference of the implementation's "
                "own computation (ours, vllm: the FP8 block format; sgmm: its rowwise scheme; "
                "bf16: torch_reference.ffn), tolerance %.0e; q-err: against the f32 reference "
                "of the unquantized bf16 layer (what quantization costs); ours/best: ours over "
                "the fastest checked FP8 baseline (vllm, sgmm); fp8/bf16: ours over our bf16 "
                "layer" % BM.TOL,
            ]
            vcfg = [c for c in self.cells if c.get("vllm_config")]
            extra = []
            if vcfg:
                extra += ["", "vLLM tile configs:", ""]
                extra += ["- %s T=%d: %s" % (c["layer"], c["T"], c["vllm_config"]) for c in vcfg]
            return self.report("FP8 block weights", "FP8", bullets, extra)

        def report(self, what, rate, bullets, extra):
            """The run's markdown: title, card, `bullets`, compile times, the
            not-the-target note (the floor's `rate`), the table, `extra`,
            errors and profiles."""
            m = self.meta
            lines = [
                "# moe.ffn benchmark, %s, at %s" % (what, m["commit"]),
                "",
                "- GPU: %s; torch %s (CUDA %s); %s" % (m["gpu"], m["torch"], m["cuda"], m["date"]),
            ]
            if BM.TARGET_GPU not in m["gpu"]:
                lines.append(
                    "- **not an %s**: the floor uses the %s's bandwidth / %s rate, so %%floor "
                    "does not describe this card; the same-run comparisons do"
                    % (BM.TARGET_GPU, BM.TARGET_GPU, rate)
                )
            lines += bullets
            lines.append(
                "- compile (moe-aot, s): %s"
                % ", ".join(
                    "%s %s" % (n, "?" if s is None else "%.2f" % s)
                    for n, s in m["compile_s"].items()
                )
            )
            lines.append("")
            lines += table(self.cells, markdown=True, weight_format=self.format)
            return lines + extra + self.errors_and_profiles()

        def markdown_mxfp4(self):
            m = self.meta
            bullets = [
                "- layer: gpt-oss's own: softmax top-k renormalised, clamped SwiGLU (%s; "
                "interleaved gate/up), bf16 expert biases (randn * %g), nn.Linear weights; "
                "MXFP4 = e2m1 weights, two a byte along K, with an E8M0 scale per 32 K; bf16 "
                "activations (w4a16)"
                % (
                    "; ".join(
                        "%s: alpha %g, limit %g, up + %g"
                        % (c, g["alpha"], g["limit"], g["up_bias"])
                        for c, g in m["glu"].items()
                    ),
                    BIAS_SCALE,
                ),
                "- ours: the compiled <config>.mxfp4h layer (weight_format mxfp4_hopper: the "
                "codes repacked once by moe_mlir_runtime.mxfp4.repack_mxfp4_hopper, %s s for "
                "both GEMMs' weights on the card); gpt-oss order: the <config>.mxfp4 layer on "
                "the checkpoint's bytes; bf16: our compiled <config>.oss "
                "layer (the same layer in bf16) on the weights before quantization; tk: OpenAI "
                "triton_kernels %s matmul_ogs with MXFP4 weights (its own downcast_to_mxfp of "
                "the same bf16 weights, its Hopper value / scale layouts made once outside the "
                "timed region, scale layout num_warps 4 up to T = 512, else 8, as its "
                "bench_mlp.py; its routing, gate/up + bias + fused SwiGLU, down + bias + "
                "routing weights); all one CUDA graph replay"
                % (
                    m.get("mxfp4_repack_s", "?"),
                    m.get("triton_kernels") or "(not run: no --triton-kernels)",
                ),
                "- times: median us over N runs (at most %d runs and %g s per implementation "
                "and cell, the card idle %g s before each), L2 flushed before each; floor = "
                "max(bytes / %.1f TB/s, 6 T k H I / %d TFLOP/s (bf16: the MMAs of w4a16)), "
                "bytes = touched experts' e2m1 codes (0.5 byte a weight), E8M0 scales and "
                "biases + x + out + logits"
                % (
                    m["args"]["max_runs"],
                    m["args"]["max_seconds_per_cell"],
                    m["args"].get("rest_seconds", 0),
                    BM.COPY_TBPS,
                    BM.BF16_TFLOPS,
                ),
                "- err: ||y - ref|| / ||ref|| against the f32 reference (torch_reference.ffn, "
                "intermediates rounded to bf16 as the chain rounds them) on the implementation's "
                "own exactly dequantized weights (ours: quantize_mxfp4's, ties to the smaller "
                "magnitude; tk: its downcast_to_mxfp's, ties to even; bf16: the unquantized "
                "weights), tolerance %.0e; q-err: against the reference of the unquantized "
                "bf16 layer (what quantization costs); ours/tk: ours over tk; mx/bf16: ours "
                "over our bf16 layer" % BM.TOL,
            ]
            flags = [c for c in self.cells if c.get("tk_mxfp4_flags")]
            extra = []
            if flags:
                extra += ["", "triton_kernels tiles (first GEMM ; second GEMM):", ""]
                extra += [
                    "- %s T=%d: %s (scale layout num_warps %s)"
                    % (c["layer"], c["T"], " ; ".join(c["tk_mxfp4_flags"]), c["tk_mxfp4_num_warps"])
                    for c in flags
                ]
            return self.report("MXFP4 weights", "bf16", bullets, extra)

        def errors_and_profiles(self):
            lines = []
            notes = BM.notes_of(self.cells)
            if notes or self.fatal:
                lines += ["", "## Errors", ""] + ["- " + n for n in notes]
                if self.fatal:
                    lines.append("- FATAL: " + self.fatal)
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
            return lines

    return LowprecBench


def cell_summary(c, keys):
    parts = ["floor %s" % BM.fmt_us(c.get("floor_us"))]
    for key in keys:
        if key + "_us" in c:
            err = c.get(key + "_err")
            parts.append(
                "%s %s%s%s"
                % (
                    key,
                    BM.fmt_us(c[key + "_us"]),
                    "" if err is None else " err %s" % BM.fmt_err(err),
                    " FAIL" if c.get(key + "_pass") is False else "",
                )
            )
        elif key in c["errors"]:
            parts.append("%s ERROR" % key)
    return ", ".join(parts)


# The table of each format: the ours / bf16 ratio's label, the same-run
# baselines (column label, cell key) and the label of ours over the best.
TABLES = {
    "fp8_block": ("fp8/bf16", (("vllm", "vllm"), ("sgmm", "sgmm")), "ours/best", KEYS),
    "mxfp4": (
        "mx/bf16",
        (("tk", "tk_mxfp4"), ("gpt-oss order", "ours_gptoss")),
        "ours/tk",
        MX_KEYS,
    ),
}


def columns_of(weight_format):
    ratio, baselines, best, _ = TABLES[weight_format]
    labels = [b for b, _ in baselines]
    return (
        ["layer", "T", "hit", "ours us", "floor us", "%floor", "bf16 us", ratio]
        + ["%s us" % b for b in labels]
        + [best, "err ours"]
        + ["err %s" % b for b in labels]
        + ["err bf16", "q-err ours"]
        + ["q-err %s" % b for b in labels]
        + ["ok"]
    )


def row_of(c, weight_format):
    _, baselines, _, keys = TABLES[weight_format]
    if c.get("skipped"):
        return [c["layer"], str(c["T"])] + ["-"] * (len(columns_of(weight_format)) - 3) + ["skip"]
    bad = [k for k in keys if c.get(k + "_pass") is False]
    bad += ["%s error" % k for k in c["errors"]]
    ratio = lambda key: "-" if key not in c else "%.2fx" % c[key]  # noqa: E731
    return (
        [
            c["layer"],
            str(c["T"]),
            str(c.get("experts_hit", "-")),
            BM.fmt_us(c.get("ours_us")),
            BM.fmt_us(c.get("floor_us")),
            "-" if "pct_of_floor" not in c else "%.1f" % c["pct_of_floor"],
            BM.fmt_us(c.get("ours_bf16_us")),
            ratio("ours_over_bf16"),
        ]
        + ["n/a" if k + "_na" in c else BM.fmt_us(c.get(k + "_us")) for _, k in baselines]
        + [ratio("ours_over_best"), BM.fmt_err(c.get("ours_err"))]
        + [BM.fmt_err(c.get(k + "_err")) for _, k in baselines]
        + [BM.fmt_err(c.get("ours_bf16_err")), BM.fmt_err(c.get("ours_err_bf16"))]
        + [BM.fmt_err(c.get(k + "_err_bf16")) for _, k in baselines]
        + ["; ".join(bad) or "ok"]
    )


def table(cells, markdown, weight_format="fp8_block"):
    rows = [row_of(c, weight_format) for c in cells]
    return BM.render(columns_of(weight_format), rows, markdown)


def main(bm, args):
    """The low-precision run (args.weight_format: fp8_block or mxfp4); `bm`
    is bench_moe (its torch, runtime, reference and gen_layers already
    imported from --dir), `args` its parsed arguments."""
    global BM
    BM = bm
    fmt = FORMATS[args.weight_format]
    keys = fmt["keys"]
    configs = [c for c in args.configs.split(",") if c] or list(fmt["configs"])
    unknown = [c for c in configs if c not in fmt["configs"]]
    if unknown:
        raise SystemExit(
            "bench_moe: --weight-format %s has the configs %s, not %s"
            % (args.weight_format, ", ".join(fmt["configs"]), ", ".join(unknown))
        )
    Ts = [int(t) for t in args.T.split(",") if t]
    layers = [BM.GL.LAYERS_BY_NAME[c + "." + fmt["suffix"]] for c in configs]
    if not torch.cuda.is_available():
        raise SystemExit("bench_moe: torch sees no CUDA device")
    BM.TR.configure_precision()
    vllm_version = tk_version = None
    if args.vllm_fp8 and args.weight_format == "fp8_block":
        vllm_version = LB.import_vllm_fp8(os.path.abspath(args.vllm_fp8))
    if args.triton_kernels and args.weight_format == "mxfp4":
        tk_version = BM.import_triton_kernels(os.path.abspath(args.triton_kernels), args.dir)

    commit = "unknown"
    commit_file = os.path.join(args.dir, "COMMIT")
    if os.path.isfile(commit_file):
        with open(commit_file) as f:
            commit = f.read().strip()
    compile_s = {}
    for layer in layers:
        for name in (layer.name, layer.twin):
            path = os.path.join(args.dir, name + ".manifest.json")
            compile_s[name] = None
            if os.path.isfile(path):
                with open(path) as f:
                    compile_s[name] = BM.json.load(f).get("compile_s")
    meta = dict(
        commit=commit,
        gpu=torch.cuda.get_device_name(0),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        python=BM.sys.version.split()[0],
        date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        args=vars(args),
        tolerance=BM.TOL,
        copy_tbps=BM.COPY_TBPS,
        compile_s=compile_s,
        weight_format=args.weight_format,
    )
    if args.weight_format == "mxfp4":
        meta.update(
            bf16_tflops=BM.BF16_TFLOPS,
            triton_kernels=tk_version,
            tk_num_warps="4 for T <= 512, else 8 (bench_mlp.py)",
            bias_scale=BIAS_SCALE,
            glu={layer.config: layer.glu for layer in layers},
        )
    else:
        meta.update(fp8_tflops=FP8_TFLOPS, vllm_fp8=vllm_version, sgmm_align=LB.SGMM_ALIGN)
    bench = make_bench_class()(args, meta)
    bench.log(
        "bench_moe --weight-format %s: %s, torch %s, commit %s; %s x T=%s -> %s"
        % (
            args.weight_format,
            meta["gpu"],
            meta["torch"],
            commit,
            ",".join(layer.name for layer in layers),
            args.T,
            bench.json_path,
        )
    )
    for layer in layers:
        bench.run_layer(layer, Ts)
    bench.timer.smi.stop()
    bench.write()

    notes = BM.notes_of(bench.cells)
    if notes:
        print("\nerrors / skipped:")
        for n in notes:
            print("  " + n[:300])
    print(
        "\n%s (%s, %.0fs): %s weights; us, median; err vs the f32 reference of each "
        "implementation's computation, tolerance %.0e; q-err vs the unquantized bf16 layer"
        % (
            commit,
            meta["gpu"],
            bench.elapsed(),
            "MXFP4" if args.weight_format == "mxfp4" else "FP8 block",
            BM.TOL,
        )
    )
    print("\n".join(table(bench.cells, markdown=False, weight_format=args.weight_format)))
    failed = [
        c
        for c in bench.cells
        if c["errors"] or c.get("skipped") or any(c.get(k + "_pass") is False for k in keys)
    ]
    print(
        "%d cells, %d with a failure, error or skip; %s"
        % (len(bench.cells), len(failed), bench.md_path)
    )
    return 1 if failed or bench.fatal else 0
