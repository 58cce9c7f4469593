#!/usr/bin/env python3
"""The benchmark layers of issue 10, as MLIR.

Every layer is one `moe.ffn` in a public `@ffn` (bf16, dynamic T, C
interface), the issue's layer definition for all four configurations:
softmax over the E logits, top-k, renormalised (`scoring = softmax,
normalize = true`), SwiGLU (`activation = silu`), gate/up interleaved
(`layout = interleaved`: gate = column 2j, up = column 2j+1 of the first
GEMM) and the nn.Linear weight layout (`transpose_weights = true`:
w_up E x 2I x H, w_down E x H x I). This is the benchmark's layer, not the
checkpoints' exact routing (DeepSeek-V3's sigmoid / group routing and
gpt-oss's clamped SwiGLU are left out on purpose; the gpt-oss MXFP4 layer
below and its twin put the latter back).

Variants of Qwen3-30B-A3B exercise the other code paths:
  <config>.nt       transpose_weights = false (w_up E x H x 2I, w_down E x I x H)
  <config>.concat   layout = concat (gate = first I columns, up = last I)

Low-precision layers (bench_moe.py --weight-format fp8_block), written only
when named with --layers (or --lowprec):
  <config>.fp8      the checkpoints' FP8 block format: w_up E x 2I x H and
                    w_down E x H x I of e4m3 (concat gate/up, nn.Linear
                    layout) with f32 scales per 128 x 128 block
                    (w_up_scale E x ceil(2I/128) x ceil(H/128), w_down_scale
                    E x ceil(H/128) x ceil(I/128)), the same softmax top-k
                    routing; @ffn(x, logits, w_up, w_down, w_up_scale,
                    w_down_scale). Its bf16 twin is <config>.concat.
  <config>.mxfp4    (gpt-oss-120b; bench_moe.py --weight-format mxfp4) the
                    checkpoint's MXFP4 format: w_up E x 2I x H/2 and w_down
                    E x H x I/2 of i8, each byte two e2m1 codes along K (low
                    nibble = even K; interleaved gate/up, nn.Linear layout),
                    E8M0 scales per 32 K (w_up_scale E x 2I x H/32,
                    w_down_scale E x H x I/32, f8E8M0FNU), the checkpoint's
                    own layer: clamped SwiGLU (alpha 1.702, limit 7.0, up + 1)
                    and bf16 expert biases (w_up_bias E x 2I, w_down_bias
                    E x H); @ffn(x, logits, w_up, w_down, w_up_bias,
                    w_down_bias, w_up_scale, w_down_scale) (the order of the
                    moe_mlir preset gpt-oss-120b-mxfp4). Its bf16 twin is
                    <config>.oss.
  <config>.mxfp4h   the same with weight_format mxfp4_hopper: the codes of
                    each 32-K block in the Hopper kernels' order
                    (moe_mlir_runtime.mxfp4.repack_mxfp4_hopper of the
                    checkpoint's bytes, made once at load). Its bf16 twin is
  <config>.oss      that layer in bf16 (interleaved, nn.Linear layout,
                    clamped SwiGLU, expert biases): @ffn(x, logits, w_up,
                    w_down, w_up_bias, w_down_bias).

  python3 gen_layers.py OUT_DIR [--layers a,b] [--base-only]  # OUT_DIR/<name>.mlir
  python3 gen_layers.py OUT_DIR --lowprec [--lowprec-format fp8|mxfp4]
  python3 gen_layers.py --list                                 # names, one a line

Standard library only: bench_moe.py imports LAYERS from a copy of this file
next to the artifacts.
"""

import argparse
import os
import sys

# name: (title, H, I, E, k)
CONFIGS = {
    "qwen3-30b-a3b": ("Qwen3-30B-A3B", 2048, 768, 128, 8),
    "gpt-oss-120b": ("gpt-oss-120b", 2880, 2880, 128, 4),
    "mixtral-8x7b": ("Mixtral-8x7B", 4096, 14336, 8, 2),
    "deepseek-v3": ("DeepSeek-V3", 7168, 2048, 256, 8),
}

# variant suffix: (layout, transpose_weights); "" is the layer
VARIANTS = {
    "": ("interleaved", True),
    "nt": ("interleaved", False),
    "concat": ("concat", True),
}
VARIANT_CONFIGS = ("qwen3-30b-a3b",)  # configs that also get the variants

# low-precision variant suffix: (layout, transpose_weights, weight_format)
FORMAT_VARIANTS = {
    "fp8": ("concat", True, "fp8_block"),
    "mxfp4": ("interleaved", True, "mxfp4"),
    "mxfp4h": ("interleaved", True, "mxfp4_hopper"),
}
FP8_CONFIGS = ("deepseek-v3", "qwen3-30b-a3b")  # configs that get an .fp8 layer
MXFP4_CONFIGS = ("gpt-oss-120b",)  # configs that get an .mxfp4 layer
FORMAT_CONFIGS = {"fp8": FP8_CONFIGS, "mxfp4": MXFP4_CONFIGS, "mxfp4h": MXFP4_CONFIGS}
# the variants --lowprec-format selects
FORMAT_FAMILY = {"fp8": ("fp8",), "mxfp4": ("mxfp4", "mxfp4h")}
# the bf16 twin of each low-precision variant (bench_moe.py's ours_bf16)
TWIN_OF = {"fp8": "concat", "mxfp4": "oss", "mxfp4h": "oss"}
# The checkpoint's own GLU (moe.ffn alpha, limit, up_bias), which the
# .mxfp4 layer and its bf16 twin .oss (interleaved, nn.Linear layout) use
# together with the expert biases.
CHECKPOINT_GLU = {"gpt-oss-120b": dict(alpha=1.702, limit=7.0, up_bias=1.0)}
CHECKPOINT_VARIANTS = ("mxfp4", "mxfp4h", "oss")


class Layer:
    """One benchmark layer: a configuration in one weight layout / GLU layout."""

    def __init__(self, config, variant):
        self.config = config
        self.variant = variant
        self.name = config + ("." + variant if variant else "")
        self.title, self.H, self.I, self.E, self.k = CONFIGS[config]
        if variant in FORMAT_VARIANTS:
            self.layout, self.transpose_weights, self.weight_format = FORMAT_VARIANTS[variant]
        elif variant == "oss":
            self.layout, self.transpose_weights = "interleaved", True
            self.weight_format = "plain"
        else:
            self.layout, self.transpose_weights = VARIANTS[variant]
            self.weight_format = "plain"
        # the checkpoint's GLU (alpha, limit, up_bias) and expert biases, or
        # None / False (the benchmark's plain SwiGLU, no biases)
        self.glu = dict(CHECKPOINT_GLU[config]) if variant in CHECKPOINT_VARIANTS else None
        self.expert_bias = self.glu is not None

    @property
    def twin(self):
        """Name of the bf16 twin of a low-precision layer (None otherwise)."""
        v = TWIN_OF.get(self.variant)
        return None if v is None else self.config + "." + v

    @property
    def w_up_shape(self):
        E, H, I = self.E, self.H, self.I
        return (E, 2 * I, H) if self.transpose_weights else (E, H, 2 * I)

    @property
    def w_down_shape(self):
        E, H, I = self.E, self.H, self.I
        return (E, H, I) if self.transpose_weights else (E, I, H)

    def reference_kwargs(self):
        """torch_reference.ffn keyword arguments of this layer (the expert
        biases, w_up_bias / w_down_bias, are the caller's)."""
        kw = dict(
            k=self.k,
            scoring="softmax",
            normalize=True,
            activation="silu",
            layout=self.layout,
            transpose_weights=self.transpose_weights,
        )
        if self.glu:
            kw.update(self.glu)
        return kw

    @property
    def scale_shapes(self):
        """w_up_scale and w_down_scale shapes (fp8_block: one f32 per 128 x
        128; mxfp4: one E8M0 per 32 K of each row)."""
        E, H, I = self.E, self.H, self.I
        if self.weight_format.startswith("mxfp4"):
            return (E, 2 * I, H // 32), (E, H, I // 32)
        b = lambda n: -(-n // 128)  # noqa: E731
        return (E, b(2 * I), b(H)), (E, b(H), b(I))

    @property
    def bias_shapes(self):
        """w_up_bias and w_down_bias shapes (the expert biases)."""
        return (self.E, 2 * self.I), (self.E, self.H)

    def glu_attrs(self):
        """The checkpoint GLU's attributes of the moe.ffn attribute dict ("" if none)."""
        if not self.glu:
            return ""
        return "alpha = %r : f32, limit = %r : f32, up_bias = %r : f32, " % (
            self.glu["alpha"],
            self.glu["limit"],
            self.glu["up_bias"],
        )

    # The header comment's lines after the first: per weight format.
    HEADERS = {
        "plain": "// softmax top-k renormalised, %(glu)s, layout = %(layout)s, transpose_weights = %(tw)s.\n",
        "fp8_block": (
            "// FP8 block weights (e4m3, f32 scales per 128 x 128 block, activations\n"
            "// quantized per token per 128 channels at run time).\n"
            "// softmax top-k renormalised, SwiGLU, layout = %(layout)s, transpose_weights = %(tw)s.\n"
        ),
        "mxfp4": (
            "// MXFP4 weights (two e2m1 codes a byte along K, low nibble = even K; E8M0\n"
            "// scales per 32 K), bf16 expert biases.\n"
            "// softmax top-k renormalised, %(glu)s,\n"
            "// layout = %(layout)s, transpose_weights = %(tw)s.\n"
        ),
        "mxfp4_hopper": (
            "// MXFP4 weights in mxfp4_hopper order (each 32-K block's e2m1 codes as the\n"
            "// Hopper kernels' fragments want them; E8M0 scales per 32 K), bf16 expert biases.\n"
            "// softmax top-k renormalised, %(glu)s,\n"
            "// layout = %(layout)s, transpose_weights = %(tw)s.\n"
        ),
    }

    def mlir(self):
        """The layer's moe.ffn (bf16 activations, dynamic T): weights in its
        format, then the expert biases and the scales when it has them."""
        fmt = self.weight_format

        def t(shape, dtype="bf16"):
            return "tensor<%sx%s>" % ("x".join("?" if d is None else str(d) for d in shape), dtype)

        E, H, I = self.E, self.H, self.I
        x, logits, y = t((None, H)), t((None, E)), t((None, H))
        if fmt.startswith("mxfp4"):  # bytes of two e2m1 codes along K
            w_up, w_down = t((E, 2 * I, H // 2), "i8"), t((E, H, I // 2), "i8")
        else:
            wdt = "f8E4M3FN" if fmt == "fp8_block" else "bf16"
            w_up, w_down = t(self.w_up_shape, wdt), t(self.w_down_shape, wdt)
        tw = "true" if self.transpose_weights else "false"
        args = [
            "%%x: %s" % x,
            "%%logits: %s" % logits,
            "%%w_up: %s" % w_up,
            "%%w_down: %s" % w_down,
        ]
        operands, attrs = "", ""
        if self.expert_bias:
            b_up, b_down = (t(sh) for sh in self.bias_shapes)
            args += ["%%w_up_bias: %s" % b_up, "%%w_down_bias: %s" % b_down]
            operands += " expert_bias(%%w_up_bias, %%w_down_bias : %s, %s)" % (b_up, b_down)
        if fmt != "plain":
            sdt = "f8E8M0FNU" if fmt.startswith("mxfp4") else "f32"
            s_up, s_down = (t(sh, sdt) for sh in self.scale_shapes)
            args += ["%%w_up_scale: %s" % s_up, "%%w_down_scale: %s" % s_down]
            operands += " scales(%%w_up_scale, %%w_down_scale : %s, %s)" % (s_up, s_down)
            attrs = ", weight_format = #moe.weight_format<%s>" % fmt
        glu = "SwiGLU"
        if self.glu:
            glu = (
                "clamped SwiGLU (alpha %(alpha)g, limit %(limit)g, up_bias %(up_bias)g)" % self.glu
            )
            if fmt == "plain":
                glu += "\n// with expert biases"
        header = "// %s (%s) benchmark layer: H=%d I=%d E=%d k=%d, bf16%s, dynamic T%s\n" % (
            self.name,
            self.title,
            H,
            I,
            E,
            self.k,
            "" if fmt == "plain" else " activations",
            "." if fmt == "plain" else ",",
        ) + self.HEADERS[fmt] % dict(glu=glu, layout=self.layout, tw=tw)
        return (
            "// GENERATED by bench/gen_layers.py: do not edit by hand.\n//\n%s\n"
            "func.func @ffn(%s) -> %s attributes {llvm.emit_c_interface} {\n"
            "  %%y = moe.ffn %%x, %%logits, %%w_up, %%w_down%s k = %d scoring = softmax"
            " activation = silu layout = %s {%snormalize = true, transpose_weights = %s%s}"
            " : %s, %s, %s, %s -> %s\n"
            "  return %%y : %s\n"
            "}\n"
            % (
                header,
                ", ".join(args),
                y,
                operands,
                self.k,
                self.layout,
                self.glu_attrs(),
                tw,
                attrs,
                x,
                logits,
                w_up,
                w_down,
                y,
                y,
            )
        )


LAYERS = [Layer(c, "") for c in CONFIGS] + [
    Layer(c, v) for c in VARIANT_CONFIGS for v in VARIANTS if v
]
# Every config in every variant: built only when named (--layers), e.g.
# deepseek-v3.nt for a comparison of the weight layouts.
ALL_LAYERS = LAYERS + [
    Layer(c, v) for c in CONFIGS for v in VARIANTS if v and c not in VARIANT_CONFIGS
]
# The low-precision layers (bench_moe.py --weight-format) and the bf16 twins
# that only they use (.oss): built only when named.
LOWPREC_LAYERS = [Layer(c, v) for v in FORMAT_VARIANTS for c in FORMAT_CONFIGS[v]]
TWIN_LAYERS = [Layer(c, "oss") for c in MXFP4_CONFIGS]
LAYERS_BY_NAME = {layer.name: layer for layer in ALL_LAYERS + LOWPREC_LAYERS + TWIN_LAYERS}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", help="folder to write <name>.mlir into")
    ap.add_argument("--layers", default="", help="comma-separated names (default: all)")
    ap.add_argument("--base-only", action="store_true", help="leave the variants out")
    ap.add_argument(
        "--lowprec",
        action="store_true",
        help="(without --layers) the low-precision layers and their bf16 twins "
        "(<config>.fp8 and <config>.concat, gpt-oss-120b.mxfp4 and gpt-oss-120b.oss) "
        "instead of the default layers",
    )
    ap.add_argument(
        "--lowprec-format",
        choices=("all",) + tuple(FORMAT_FAMILY),
        default="all",
        help="with --lowprec: only the layers of this format (fp8, mxfp4) and their twins",
    )
    ap.add_argument("--list", action="store_true", help="print the layer names")
    args = ap.parse_args(argv)
    names = [n for n in args.layers.split(",") if n]
    unknown = [n for n in names if n not in LAYERS_BY_NAME]
    if unknown:
        ap.error(
            "unknown layer(s) %s (known: %s)" % (", ".join(unknown), ", ".join(LAYERS_BY_NAME))
        )
    if names:
        layers = [LAYERS_BY_NAME[n] for n in names]
    elif args.lowprec:
        layers = [
            lp
            for lp in LOWPREC_LAYERS
            if args.lowprec_format == "all" or lp.variant in FORMAT_FAMILY[args.lowprec_format]
        ]
        # (the twins once each: .mxfp4 and .mxfp4h share theirs)
        layers += [LAYERS_BY_NAME[t] for t in dict.fromkeys(lp.twin for lp in layers)]
    else:
        layers = [layer for layer in LAYERS if not (args.base_only and layer.variant)]
    if args.list:
        print("\n".join(layer.name for layer in layers))
        return 0
    if not args.out:
        ap.error("give an output folder (or --list)")
    os.makedirs(args.out, exist_ok=True)
    for layer in layers:
        path = os.path.join(args.out, layer.name + ".mlir")
        with open(path, "w") as f:
            f.write(layer.mlir())
        print("wrote %s" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
