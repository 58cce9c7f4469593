#!/usr/bin/env python3
"""Builds the artifacts of the Hugging Face parity check (hf_parity_check.py).

Runs here (LLVM, the moe_mlir package). For each of the four presets at a
scaled-down hidden / intermediate size (its routing and GLU attributes, E
and k as in the real model) and for bf16 and f32, builds one module with
two public functions

    ffn(x, logits, w_up, w_down[, bias][, w_up_bias, w_down_bias]) -> y
    route(logits[, bias]) -> (weights T x k f32, ids T x k i32)

(`ffn` from `moe_mlir.ffn_from_config`, `route` one `moe.route` with the
preset's routing attributes, T dynamic), compiles it with
`moe_mlir.gpu.compile_gpu` (fused, sm_90a) to OUT/<preset>.<dtype>.so and
copies what the GPU machine needs next to them: the runtime package
(python/runtime/ship.py), hf_parity_check.py and cases.json (sizes, the
preset's attributes, the Hugging Face block to compare with).

  python3 test/GPU/build_hf_parity.py [OUT] [--presets a,b] [--hidden H]
                                      [--intermediate I] [--dtypes bf16,f32]

OUT defaults to <repo>/gpu-artifacts/hfparity. Exit status: 0 built, 1 a
build failed, 3 the moe_mlir package is not importable.
"""

import argparse
import dataclasses
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import build_python_flow as BPF  # noqa: E402  (package discovery, commit)

#: preset -> the transformers 5.x block it is compared with
HF_BLOCKS = {
    "mixtral-8x7b": "MixtralSparseMoeBlock",
    "qwen3-30b-a3b": "Qwen3MoeSparseMoeBlock",
    "deepseek-v3": "DeepseekV3MoE",
    "gpt-oss-120b": "GptOssMLP",
}


def route_module(pkg, cfg, dtype, module):
    """Adds @route (the preset's moe.route alone) to `module`."""
    ir = pkg.ir
    E = cfg.experts
    types = [ir.TensorType([None, E], cfg.logits_dtype or dtype)]
    if cfg.routing_bias:
        types.append(ir.TensorType([E], "f32"))
    with ir.FunctionBuilder(module, "route", types) as f:
        a = cfg.ffn_attributes()
        w, ids = f.route(
            f.args[0],
            f.args[1] if cfg.routing_bias else None,
            k=a["k"],
            scoring=a["scoring"],
            normalize=a["normalize"],
            n_group=a["n_group"],
            topk_group=a["topk_group"],
            group_score=a["group_score"],
            scaling=a["scaling"],
        )
        f.ret(w, ids)
    return module


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default=os.path.join(REPO, "gpu-artifacts", "hfparity"))
    ap.add_argument("--presets", default=",".join(HF_BLOCKS))
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--intermediate", type=int, default=256)
    ap.add_argument("--dtypes", default="bf16,f32")
    args = ap.parse_args(argv)

    pkg, gpu, why = BPF.import_package(True)
    if pkg is None:
        print("build_hf_parity: cannot import moe_mlir: %s" % why, file=sys.stderr)
        return 3
    rt = gpu._rt
    out = BPF.clean_output(args.out)

    status, cases, t_all = 0, [], time.time()
    for name in [n for n in args.presets.split(",") if n]:
        if name not in HF_BLOCKS or name not in pkg.PRESETS:
            print("FAIL %-16s no such preset / no Hugging Face block for it" % name)
            status = 1
            continue
        cfg = pkg.PRESETS[name].replace(hidden=args.hidden, intermediate=args.intermediate)
        for dtype in [d for d in args.dtypes.split(",") if d]:
            so = os.path.join(out, "%s.%s.so" % (name, dtype))
            t0 = time.time()
            try:
                module = pkg.ffn_from_config(cfg, T=None, dtype=dtype)
                route_module(pkg, cfg, dtype, module)
                module.verify()
                gpu.compile_gpu(module, so, chip="sm_90a", fuse=True)
                manifest = rt.Manifest.read(rt.manifest_path(so))
                cases.append(
                    dict(
                        name="%s.%s" % (name, dtype),
                        preset=name,
                        dtype=dtype,
                        library=os.path.basename(so),
                        hf_block=HF_BLOCKS[name],
                        config={
                            k: v
                            for k, v in dataclasses.asdict(cfg).items()
                            if isinstance(v, (int, float, str, bool)) or v is None
                        },
                        signatures={
                            fn: manifest.functions[fn].signature() for fn in ("ffn", "route")
                        },
                    )
                )
                print(
                    "ok   %-22s %5.1fs %6d KiB  %s"
                    % (
                        cases[-1]["name"],
                        time.time() - t0,
                        os.path.getsize(so) // 1024,
                        cases[-1]["signatures"]["ffn"],
                    )
                )
            except Exception as ex:  # noqa: BLE001
                status = 1
                print("FAIL %-22s %s: %s" % ("%s.%s" % (name, dtype), type(ex).__name__, ex))

    if not BPF.ship_runtime(out, ("hf_parity_check.py",)):
        status = 1
    meta = dict(
        commit=BPF.commit(),
        built=BPF.now(),
        hidden=args.hidden,
        intermediate=args.intermediate,
    )
    BPF.write_listing(out, meta, "cases", cases, status)
    print("--- %s: %d libraries in %.1fs" % (out, len(cases), time.time() - t_all))
    return status if cases else 1


if __name__ == "__main__":
    sys.exit(main())
