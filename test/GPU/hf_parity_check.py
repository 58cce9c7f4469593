#!/usr/bin/env python3
"""Parity of the compiled presets with the Hugging Face `transformers` blocks.

Run on the GPU machine (torch, transformers 5.x), from the folder that
build_hf_parity.py filled (or with --dir):

  python3 hf_parity_check.py [--dir DIR] [--T 1,7,64,300,4096] [--out DIR]

For every library of cases.json (a preset at a scaled-down H / I, bf16 or
f32) the Hugging Face block of the real model is built from its own config
class with the real checkpoint's routing values (written below from the
published config.json files, not taken from our presets): Mixtral-8x7B
`MixtralSparseMoeBlock`, Qwen3-30B-A3B `Qwen3MoeSparseMoeBlock`,
DeepSeek-V3 `DeepseekV3MoE` (its shared expert's down projection zeroed:
only the routed part is compared) and gpt-oss-120b `GptOssMLP` (non-zero
expert biases). Its parameters get fresh random values (rounded to bf16 in
the bf16 cases, so both sides hold the same numbers) and the block runs in
float32. Our layer gets the same weights, x, and the block's own router
logits (f32; rounded to bf16 where the checkpoint's router runs in bf16,
i.e. everywhere but DeepSeek-V3, whose router runs in f32).

  route/<case>  our @route ids (as a set per token) against the block's
                router fed the very logits we got (the router module with
                an identity weight); DeepSeek-V3's logits are the block's
                own, so there this is "the same experts as the block".
                Every token must agree; weights within 1e-5.
  ffn/<case>    our @ffn against the whole block (its own f32 routing):
                ||y - y_hf|| / ||y_hf|| <= 2e-2 (bf16) / 1e-4 (f32) over the
                tokens for which we chose the block's own experts. The
                others are counted and reported: tokens the block routes
                differently on its f32 logits than on the bf16 rounding we
                were given (a property of the checkpoint's bf16 router) and
                exact ties, both of which route/ has checked.

Writes results.json, summary.txt into --out (default $OUT/hfparity).
Exit status: 0 all passed, 1 a check failed.
"""

import argparse
import copy
import json
import os
import sys
import time
import traceback
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
TOL = {"bf16": 2e-2, "f32": 1e-4}
WEIGHT_TOL = 1e-5

#: The real checkpoints' MoE config values (config.json of each model).
REAL = {
    "mixtral-8x7b": dict(experts=8, top_k=2),
    "qwen3-30b-a3b": dict(experts=128, top_k=8, norm_topk_prob=True),
    "deepseek-v3": dict(
        experts=256,
        top_k=8,
        n_group=8,
        topk_group=4,
        routed_scaling_factor=2.5,
        norm_topk_prob=True,
    ),
    "gpt-oss-120b": dict(experts=128, top_k=4),
}


def _import_local(d):
    src = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir, "python", "runtime"))
    for p in (d, HERE, src):
        if os.path.isfile(os.path.join(p, "moe_mlir_runtime", "__init__.py")):
            if p in sys.path:
                sys.path.remove(p)
            sys.path.insert(0, p)
            return


def hf_block(preset, H, I):
    """(block, router attribute name) of the Hugging Face block."""
    r = REAL[preset]
    E, k = r["experts"], r["top_k"]
    if preset == "mixtral-8x7b":
        from transformers import MixtralConfig
        from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock as B

        conf = MixtralConfig(
            hidden_size=H,
            intermediate_size=I,
            num_local_experts=E,
            num_experts_per_tok=k,
            router_jitter_noise=0.0,
        )
        router = "gate"
    elif preset == "qwen3-30b-a3b":
        from transformers import Qwen3MoeConfig
        from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock as B

        conf = Qwen3MoeConfig(
            hidden_size=H,
            moe_intermediate_size=I,
            num_experts=E,
            num_experts_per_tok=k,
            norm_topk_prob=r["norm_topk_prob"],
        )
        router = "gate"
    elif preset == "deepseek-v3":
        from transformers import DeepseekV3Config
        from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE as B

        conf = DeepseekV3Config(
            hidden_size=H,
            moe_intermediate_size=I,
            n_routed_experts=E,
            num_experts_per_tok=k,
            n_group=r["n_group"],
            topk_group=r["topk_group"],
            routed_scaling_factor=r["routed_scaling_factor"],
            norm_topk_prob=r["norm_topk_prob"],
            n_shared_experts=1,
        )
        router = "gate"
    elif preset == "gpt-oss-120b":
        from transformers import GptOssConfig
        from transformers.models.gpt_oss.modeling_gpt_oss import GptOssMLP as B

        conf = GptOssConfig(
            hidden_size=H,
            intermediate_size=I,
            num_local_experts=E,
            num_experts_per_tok=k,
        )
        router = "router"
    else:
        raise KeyError(preset)
    try:  # the plain per-expert loop of the modeling file
        conf._experts_implementation = "eager"
    except Exception:  # noqa: BLE001
        pass
    return B(conf), router, conf


class Case:
    def __init__(self, torch, rt, case, art_dir):
        self.torch, self.rt, self.case = torch, rt, case
        self.name, self.preset, self.dtype = case["name"], case["preset"], case["dtype"]
        c = case["config"]
        self.H, self.I = c["hidden"], c["intermediate"]
        self.dev = torch.device("cuda:0")
        self.tdt = torch.bfloat16 if self.dtype == "bf16" else torch.float32
        self.logits_dt = torch.float32 if (c.get("logits_dtype") == "f32") else self.tdt
        self.art = rt.load(os.path.join(art_dir, case["library"]))
        self.ffn = self.art.fn("ffn")
        self.route = self.art.fn("route")
        block, rname, conf = hf_block(self.preset, self.H, self.I)
        self.impl = getattr(conf, "_experts_implementation", None)
        self.block = block.to(self.dev).float().eval()
        self.router = getattr(self.block, rname)
        self.E = REAL[self.preset]["experts"]
        self.set_weights()
        self.weights = self.our_weights()  # once, not per call
        # the same router fed logits directly: weight = identity, no bias
        r2 = copy.deepcopy(self.router)
        r2.hidden_dim = self.E
        r2.weight = torch.nn.Parameter(torch.eye(self.E, device=self.dev))
        if getattr(r2, "bias", None) is not None:
            r2.bias = torch.nn.Parameter(torch.zeros(self.E, device=self.dev))
        self.router_on_logits = r2

    def gen(self, key, shape, scale):
        torch = self.torch
        g = torch.Generator(device=self.dev)
        g.manual_seed(zlib.crc32(("hf/%s/%s" % (self.name, key)).encode()))
        t = torch.randn(shape, dtype=torch.float32, device=self.dev, generator=g) * scale
        return t.to(self.tdt).float()  # both sides hold the same (rounded) values

    def set_weights(self):
        torch, H, I, E = self.torch, self.H, self.I, self.E
        ex = self.block.experts
        with torch.no_grad():
            # gpt-oss: larger gate/up so that the clamp at 7 takes effect
            up_scale = (4.0 if self.preset == "gpt-oss-120b" else 1.0) / H**0.5
            ex.gate_up_proj.copy_(self.gen("gate_up_proj", ex.gate_up_proj.shape, up_scale))
            ex.down_proj.copy_(self.gen("down_proj", ex.down_proj.shape, 1.0 / I**0.5))
            if hasattr(ex, "gate_up_proj_bias"):
                ex.gate_up_proj_bias.copy_(self.gen("gate_up_bias", (E, 2 * I), 0.5))
                ex.down_proj_bias.copy_(self.gen("down_bias", (E, H), 0.1))
            self.router.weight.copy_(self.gen("router", (E, H), 2.0 / H**0.5))
            if getattr(self.router, "bias", None) is not None:
                self.router.bias.copy_(self.gen("router_bias", (E,), 0.5))
            if hasattr(self.router, "e_score_correction_bias"):
                g = torch.Generator(device=self.dev)
                g.manual_seed(zlib.crc32(("hf/%s/e_bias" % self.name).encode()))
                self.router.e_score_correction_bias.copy_(
                    torch.randn(E, device=self.dev, generator=g) * 0.05
                )
            if hasattr(self.block, "shared_experts"):  # routed part only
                self.block.shared_experts.down_proj.weight.zero_()

    def our_weights(self):
        ex = self.block.experts
        ws = [ex.gate_up_proj.to(self.tdt), ex.down_proj.to(self.tdt)]
        if hasattr(self.router, "e_score_correction_bias"):
            ws.append(self.router.e_score_correction_bias.float().contiguous())
        if hasattr(ex, "gate_up_proj_bias"):
            ws += [ex.gate_up_proj_bias.to(self.tdt), ex.down_proj_bias.to(self.tdt)]
        return [w.contiguous() for w in ws]

    def run(self, T):
        """dict of results for T tokens."""
        torch = self.torch
        g = torch.Generator(device=self.dev)
        g.manual_seed(zlib.crc32(("hf/%s/x/%d" % (self.name, T)).encode()))
        x = torch.randn(T, self.H, device=self.dev, generator=g).to(self.tdt)
        xf = x.float()
        with torch.no_grad():
            logits_hf, _, ids_hf = self.router(xf)  # the block's own routing (f32)
            y_hf = self.block(xf.view(1, T, self.H))
            if isinstance(y_hf, tuple):
                y_hf = y_hf[0]
            y_hf = y_hf.reshape(T, self.H)
            logits = logits_hf.to(self.logits_dt)  # what our layer is given
            _, w_ref, ids_ref = self.router_on_logits(logits.float())
        bias = (
            [self.router.e_score_correction_bias.float().contiguous()]
            if hasattr(self.router, "e_score_correction_bias")
            else []
        )
        w_our, ids_our = self.route(logits.contiguous(), *bias)
        y = self.ffn(x.contiguous(), logits.contiguous(), *self.weights)
        torch.cuda.synchronize()

        def as_sets(ids):
            return torch.sort(ids.long(), dim=1).values

        same = (as_sets(ids_our) == as_sets(ids_ref)).all(dim=1)
        # exact ties at the k-th place (bf16 logits have many): any choice
        # among the tied experts is right (ours takes the lower index)
        k = ids_ref.shape[1]
        ties = torch.zeros_like(same)
        if self.preset != "deepseek-v3" and self.E > k:
            top = torch.topk(logits.float(), k + 1, dim=1).values
            ties = (top[:, k - 1] - top[:, k]).abs() <= 1e-6 * top[:, k - 1].abs()
        tie_rows = int((~same & ties).sum())

        # weights per (token, expert), in the order of the sorted ids
        def by_id(ids, w):
            o = torch.argsort(ids.long(), dim=1)
            return torch.gather(w.float(), 1, o)

        werr = (
            float((by_id(ids_our, w_our) - by_id(ids_ref, w_ref))[same].abs().max())
            if bool(same.any())
            else 0.0
        )
        # rows the block routes differently on its f32 logits than on the
        # (bf16) logits we were given
        moved = ~(as_sets(ids_hf) == as_sets(ids_ref)).all(dim=1)
        # the layer is compared where we chose the block's own experts
        keep = (as_sets(ids_our) == as_sets(ids_hf)).all(dim=1)
        yf = y.float()
        finite = bool(torch.isfinite(yf).all())

        def rel(a, b):
            num = float(torch.linalg.vector_norm((a.double() - b.double()).reshape(-1)))
            den = float(torch.linalg.vector_norm(b.double().reshape(-1)))
            return num / den if den else (0.0 if num == 0 else float("inf"))

        err_all = rel(yf, y_hf) if finite else float("inf")
        err = rel(yf[keep], y_hf[keep]) if finite and bool(keep.any()) else err_all
        mismatch = int((~same & ~ties).sum())
        return dict(
            T=T,
            route_mismatch=mismatch,
            tie_rows=tie_rows,
            weight_err=werr,
            moved_by_bf16_logits=int(moved.sum()),
            ffn_rows_left_out=int((~keep).sum()),
            ffn_err=err,
            ffn_err_all_rows=err_all,
            route_ok=mismatch == 0 and werr <= WEIGHT_TOL,
            ffn_ok=finite and err <= TOL[self.dtype],
        )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=HERE)
    ap.add_argument("--T", default="1,7,64,300,4096")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    art_dir = os.path.abspath(args.dir)
    _import_local(art_dir)
    import torch
    import transformers
    import moe_mlir_runtime as rt

    m = torch.backends.cuda.matmul
    try:
        m.fp32_precision = "ieee"
    except Exception:  # noqa: BLE001
        m.allow_tf32 = False
    out = args.out or os.path.join(os.environ.get("OUT", os.getcwd()), "hfparity")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(art_dir, "cases.json")) as f:
        cases = json.load(f)
    meta = dict(
        cases.get("meta", {}),
        torch=torch.__version__,
        transformers=transformers.__version__,
        gpu=torch.cuda.get_device_name(0),
    )
    print(
        "=== HF parity: commit %s, transformers %s, torch %s, %s"
        % (meta.get("commit"), meta["transformers"], meta["torch"], meta["gpu"]),
        flush=True,
    )
    Ts = [int(t) for t in args.T.split(",") if t]
    rows, lines, failed = [], [], 0
    for case in cases["cases"]:
        t0 = time.time()
        try:
            c = Case(torch, rt, case, art_dir)
        except Exception as ex:  # noqa: BLE001
            traceback.print_exc()
            failed += 1
            rows.append(
                dict(case=case["name"], status="FAIL", error="%s: %s" % (type(ex).__name__, ex))
            )
            lines.append(
                "FAIL %-22s load: %s: %s" % (case["name"], type(ex).__name__, str(ex)[:300])
            )
            continue
        for T in Ts:
            try:
                r = c.run(T)
                r.update(case=case["name"], block=case["hf_block"], experts_impl=c.impl)
                ok = r["route_ok"] and r["ffn_ok"]
                r["status"] = "PASS" if ok else "FAIL"
                failed += not ok
                rows.append(r)
                lines.append(
                    "%s %-22s T=%-5d route: %d mismatches, %d ties, w err %.1e;"
                    " ffn err %.2e (all rows %.2e; %d rows left out, %d routed"
                    " differently by the block on f32 logits)"
                    % (
                        r["status"],
                        case["name"],
                        T,
                        r["route_mismatch"],
                        r["tie_rows"],
                        r["weight_err"],
                        r["ffn_err"],
                        r["ffn_err_all_rows"],
                        r["ffn_rows_left_out"],
                        r["moved_by_bf16_logits"],
                    )
                )
            except Exception as ex:  # noqa: BLE001
                traceback.print_exc()
                failed += 1
                rows.append(
                    dict(
                        case=case["name"],
                        T=T,
                        status="FAIL",
                        error="%s: %s" % (type(ex).__name__, ex),
                    )
                )
                lines.append(
                    "FAIL %-22s T=%-5d %s: %s" % (case["name"], T, type(ex).__name__, str(ex)[:300])
                )
            print(lines[-1], flush=True)
        print(
            "    %s: %.1fs (experts implementation %r)" % (case["name"], time.time() - t0, c.impl),
            flush=True,
        )
        del c
        torch.cuda.empty_cache()
    n = len([r for r in rows if "T" in r])
    lines.append("%d checks, %d failed" % (n, failed))
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(dict(meta=meta, results=rows), f, indent=1)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(lines[-1])
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
