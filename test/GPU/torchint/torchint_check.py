#!/usr/bin/env python3
"""The PyTorch-integration GPU check (issue 46), from the folder
build_torchint.py filled; needs torch and transformers, not the compiler:

  python3 torchint_check.py [--dir D]

  op/...       the Qwen3-30B-A3B preset as torch.ops.moe_mlir.* (torch_op):
               torch.compile(fullgraph=True, dynamic=True) bitwise equal to
               the Function call for T = 1, 7, 64, 300 with one compilation
               (T marked unbacked; backed: T = 2, 7, 64, 300);
               mode="reduce-overhead" (CUDA graphs) equal; manual
               torch.cuda.graph capture replayed with new inputs equal; bad
               calls (dtype, shape, non-contiguous, CPU tensor) raise
               ArgumentError under torch.compile before any launch
  hf/...       the small Hugging Face models (models.py) patched with
               moe_mlir_runtime.hf.patch_prebuilt from the carried cache:
               f32 greedy generate() gives the eager model's tokens; bf16
               logits within 3e-2 (relative, max-norm) of the eager model's
               on the positions before any routing tie / differing pick
  decode/...   greedy decode of 64 tokens, patched vs the eager
               transformers experts (ms per token, median of 3), bf16

Writes $OUT/torchint/summary.txt and results.json; exit 0 when nothing
failed.
"""

import argparse
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=HERE)
    ap.add_argument("--decode-tokens", type=int, default=64)
    args = ap.parse_args(argv)
    sys.path.insert(0, args.dir)
    import torch
    import models
    import moe_mlir_runtime as rt

    out = os.path.join(os.environ.get("OUT", os.getcwd()), "torchint")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(args.dir, "torchint.json")) as f:
        meta = json.load(f)
    cache = os.path.join(args.dir, "cache")
    rows, lines = [], []
    dev = torch.device("cuda:0")

    def record(status, name, detail):
        rows.append(dict(status=status, check=name, detail=detail))
        line = "%-5s %-28s %s" % (status, name, detail)
        print(line, flush=True)
        lines.append(line)

    def check(name, fn):
        try:
            ok, detail = fn()
            record("PASS" if ok else "FAIL", name, detail)
        except Exception as ex:  # noqa: BLE001
            traceback.print_exc()
            record("FAIL", name, "%s: %s" % (type(ex).__name__, str(ex)[:300]))

    # -- the custom op --------------------------------------------------------
    art = rt.load(os.path.join(args.dir, meta["preset_library"]))
    fn = art.fn("ffn")
    op = rt.torch_op(art, "ffn")
    H, E = fn.spec.args[0].shape[1], fn.spec.args[1].shape[1]
    g = torch.Generator(device=dev).manual_seed(0)
    weights = [
        torch.randn(a.shape, generator=g, device=dev, dtype=rt.torch_dtype(a.dtype)) * 0.02
        for a in fn.spec.args[2:]
    ]

    def inputs(T):
        return (
            torch.randn(T, H, generator=g, device=dev, dtype=torch.bfloat16),
            torch.randn(T, E, generator=g, device=dev, dtype=torch.bfloat16),
        )

    compiles = []

    def backend(gm, example_inputs):
        compiles.append(gm)
        return gm

    def model(x, logits, *w):
        return op(x, logits, *w) * 2

    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend=backend)

    def compile_equal():
        # T marked unbacked: one graph for every T, 1 included (dynamic=True
        # alone specialises T = 0 and 1, torch's 0/1 specialisation).
        worst = []
        for T in (1, 7, 64, 300):
            x, lg = inputs(T)
            want = fn(x, lg, *weights) * 2
            torch._dynamo.decorators.mark_unbacked(x, 0)
            torch._dynamo.decorators.mark_unbacked(lg, 0)
            got = compiled(x, lg, *weights)
            worst.append(bool(torch.equal(got, want)))
        return all(worst) and len(compiles) == 1, "bitwise %s, %d compilation(s)" % (
            worst,
            len(compiles),
        )

    check("op/compile-dynamic", compile_equal)

    def compile_backed():
        # dynamic=True with backed sizes: one graph for every T >= 2.
        compiles.clear()
        torch._dynamo.reset()
        c = torch.compile(model, fullgraph=True, dynamic=True, backend=backend)
        worst = []
        for T in (2, 7, 64, 300):
            x, lg = inputs(T)
            worst.append(bool(torch.equal(c(x, lg, *weights), fn(x, lg, *weights) * 2)))
        return all(worst) and len(compiles) == 1, "bitwise %s, %d compilation(s)" % (
            worst,
            len(compiles),
        )

    check("op/compile-dynamic-backed", compile_backed)

    def reduce_overhead():
        ro = torch.compile(model, fullgraph=True, mode="reduce-overhead")
        ok = []
        for _ in range(4):
            x, lg = inputs(64)
            want = fn(x, lg, *weights) * 2
            ok.append(bool(torch.equal(ro(x, lg, *weights).clone(), want)))
        return all(ok), "CUDA graphs (reduce-overhead) bitwise %s" % ok

    check("op/reduce-overhead", reduce_overhead)

    def manual_graph():
        x, lg = inputs(64)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            op(x, lg, *weights)  # warm up
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = op(x, lg, *weights)
        ok = []
        for _ in range(3):
            nx, nlg = inputs(64)
            x.copy_(nx)
            lg.copy_(nlg)
            graph.replay()
            torch.cuda.synchronize()
            ok.append(bool(torch.equal(y, fn(x, lg, *weights))))
        return all(ok), "captured once, replayed with new inputs: bitwise %s" % ok

    check("op/cuda-graph", manual_graph)

    def bad_calls():
        c = torch.compile(lambda *a: op(*a), fullgraph=True, backend="eager")
        x, lg = inputs(8)
        bad = {
            "dtype": (x.float(), lg),
            "shape": (x, lg[:4]),
            "non-contiguous": (x.t().contiguous().t(), lg),
            "device": (x.cpu(), lg),
        }
        caught = {}
        for what, (bx, blg) in bad.items():
            try:
                c(bx, blg, *weights)
                caught[what] = "no error"
            except Exception as ex:  # noqa: BLE001
                caught[what] = (
                    "ArgumentError"
                    if "ArgumentError" in repr(ex) or isinstance(ex, rt.ArgumentError)
                    else type(ex).__name__
                )
        return all(v == "ArgumentError" for v in caught.values()), str(caught)

    check("op/bad-calls", bad_calls)

    # -- Hugging Face models ------------------------------------------------
    for family in models.FAMILIES:

        def f32_tokens(family=family):
            model = models.build(family, torch.float32, dev)
            ids = torch.randint(0, model.config.vocab_size, (2, 8), device=dev)
            with torch.no_grad():
                want = model.generate(ids, max_new_tokens=16, do_sample=False)
                n = len(rt.hf.patch_prebuilt(model, cache))
                got = model.generate(ids, max_new_tokens=16, do_sample=False)
            return bool(torch.equal(got, want)), "%d blocks patched, tokens equal: %s" % (
                n,
                bool(torch.equal(got, want)),
            )

        def bf16_logits(family=family):
            # A position whose routing is decided by an exact tie, or picks
            # other experts in the two runs (bf16 hidden states differ in
            # the last bits, and near-ties flip), in some layer, may go to
            # other experts here than in torch (bf16 router logits tie
            # often; torch.topk's choice among equals is unspecified): the
            # logits are compared on each sequence's positions before its
            # first such one (attention carries a difference forward).
            model = models.build(family, torch.bfloat16, dev)
            B, S = 8, 16
            k = model.config.num_experts_per_tok
            ids = torch.randint(0, model.config.vocab_size, (B, S), device=dev)
            runs = ([], [])
            run = [0]
            hooks = [
                blk.register_forward_hook(
                    lambda mod, inp, out: runs[run[0]].append(
                        models.choices(family, mod, inp[0], k)
                    )
                )
                for blk in models.moe_blocks(model)
            ]
            with torch.no_grad():
                want = model(ids).logits.float()
                rt.hf.patch_prebuilt(model, cache)
                run[0] = 1
                got = model(ids).logits.float()
            for h in hooks:
                h.remove()
            near = torch.zeros(B * S, dtype=torch.bool, device=dev)
            for (ia, ta), (ib, tb) in zip(*runs):
                near |= ta | tb | (ia != ib).any(dim=-1)
            near = near.view(B, S)
            first = torch.where(near.any(dim=1), near.float().argmax(dim=1), S)
            keep = torch.arange(S, device=dev)[None, :] < first[:, None]
            n = int(keep.sum())
            if n == 0:
                return False, "every sequence starts with an ambiguous routing"
            err = float((got - want)[keep].abs().max() / want[keep].abs().max())
            whole = float((got - want).abs().max() / want.abs().max())
            ok = err <= 3e-2 and n >= B * S // 2
            return ok, (
                "logits rel err %.2e (max-norm) on %d of %d positions (%d with a tie or "
                "another pick; all positions: %.2e)" % (err, n, B * S, int(near.sum()), whole)
            )

        check("hf/%s/f32" % family, f32_tokens)
        check("hf/%s/bf16" % family, bf16_logits)

    # -- decode speed ---------------------------------------------------------
    for family in ("qwen3-moe", "mixtral"):

        def decode(family=family):
            model = models.build(family, torch.bfloat16, dev, size="decode")
            ids = torch.randint(0, model.config.vocab_size, (1, 16), device=dev)
            n = args.decode_tokens

            def per_token():
                ts = []
                for _ in range(3):
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    with torch.no_grad():
                        model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
                    torch.cuda.synchronize()
                    ts.append((time.perf_counter() - t0) * 1e3 / n)
                return sorted(ts)[1]

            eager = per_token()
            rt.hf.patch_prebuilt(model, cache)
            ours = per_token()
            return True, "ms/token eager %.3f, patched %.3f (%.2fx)" % (eager, ours, eager / ours)

        check("decode/%s" % family, decode)

    fails = sum(r["status"] == "FAIL" for r in rows)
    tail = "%d PASS, %d FAIL (%s, torch %s)" % (
        len(rows) - fails,
        fails,
        torch.cuda.get_device_name(0),
        torch.__version__,
    )
    print(tail)
    lines.append(tail)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(dict(meta=dict(commit=meta.get("commit")), rows=rows), f, indent=1)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
