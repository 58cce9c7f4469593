#!/usr/bin/env python3
"""The low-precision GPU check (artifacts from build_lowprec.py).

For each case (cases.json) and token count: fresh random inputs, weights
made the way checkpoints are (bf16 weights quantized per 128 x 128 block to
e4m3 with f32 scales; MXFP4: per 32 K to e2m1 with E8M0 scales), the
output poisoned (NaN) before the call; the compiled layer's output
compared with
  - small layers: the float64 numpy reference of the format
    (test/Differential/reference.py: exact decoding, the activations
    quantized as the spec says), elementwise within its tolerance model,
    and the relative error ||got - want|| / ||want||;
  - fp8_block layers: the same computation in numpy float64 with the
    roundings of the compiled chain (np_chain: fused, the GLU epilogue
    reads the up GEMM's unrounded values; unfused, bf16 up values as the
    decomposition), relative error <= 1e-2 (model sizes: on a sample of
    rows, each row depending on its own routing only). FP8's requantization
    of the GLU output turns the place of that one bf16 rounding into
    ~1.5e-2 of relative difference, so the decomposition's reference is the
    elementwise tolerance check and its relative error is reported as
    "spec";
and, beside it, the error against the unquantized bf16 layer (the same
bf16 weights before quantization, float64): what quantization costs.
Model-size cases are also timed against their bf16 twin (the same weights
before quantization) with CUDA events, L2 flushed, median of the runs.

  python3 lowprec_check.py [--dir D] [--T 1,8,...] [--only a,b] [--time-T ...]
Writes $OUT/lowprec/summary.txt and results.json. Exit 0 when every check
passed.
"""

import argparse
import json
import math
import os
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=HERE)
    ap.add_argument("--T", default="0,1,7,64,300,2048")
    ap.add_argument("--model-T", default="1,64,512,4096")
    ap.add_argument("--time-T", default="1,8,64,512,4096,16384")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--sample", type=int, default=32, help="rows checked per model-size call")
    ap.add_argument(
        "--no-edge", dest="edge", action="store_false", help="leave out the edge-case inputs"
    )
    ap.add_argument("--only", default="")
    ap.add_argument("--budget", type=float, default=400.0)
    args = ap.parse_args(argv)
    sys.path.insert(0, args.dir)
    import numpy as np
    import torch
    import moe_mlir_runtime as rt
    import reference as R

    start = time.time()
    out_dir = os.path.join(os.environ.get("OUT", os.getcwd()), "lowprec")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(args.dir, "cases.json")) as f:
        meta = json.load(f)
    dev = torch.device("cuda:0")
    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)
    lines, results = [], []
    gpu = torch.cuda.get_device_name(0)
    head = "commit %s, %s, torch %s" % (meta["commit"], gpu, torch.__version__)
    print(head, flush=True)
    lines.append(head)

    def gen(key, shape, dtype=torch.float32, scale=1.0):
        g = torch.Generator(device=dev)
        g.manual_seed(zlib.crc32(key.encode()))
        t = torch.randn(shape, dtype=dtype, device=dev, generator=g)
        return t.mul_(scale) if scale != 1.0 else t

    # -- weights as the checkpoints ship them ---------------------------------

    def quantize_fp8_blocks(w):
        """bf16 [E, N, K] -> (e4m3 codes, f32 scale_inv [E, N/128, K/128])."""
        E, N, K = w.shape
        nb, kb = -(-N // 128), -(-K // 128)
        codes = torch.empty(E, N, K, dtype=torch.float8_e4m3fn, device=dev)
        scales = torch.empty(E, nb, kb, dtype=torch.float32, device=dev)
        for e in range(E):
            we = torch.nn.functional.pad(w[e].float(), (0, kb * 128 - K, 0, nb * 128 - N))
            blk = we.reshape(nb, 128, kb, 128)
            amax = blk.abs().amax(dim=(1, 3)).clamp(min=1e-12)
            s = amax / torch.tensor(448.0, device=amax.device)  # IEEE division
            q = (blk / s[:, None, :, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
            codes[e] = q.reshape(nb * 128, kb * 128)[:N, :K]
            scales[e] = s
        return codes, scales

    E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=torch.float32, device=dev)

    def quantize_mxfp4(w):
        """bf16 [E, N, K] -> (packed e2m1 bytes [E, N, K/2] i8, E8M0 [E, N, K/32]),
        an expert at a time (the model sizes' temporaries)."""
        if w.shape[0] > 1:
            parts = [quantize_mxfp4(w[e : e + 1]) for e in range(w.shape[0])]
            scales = torch.cat([p[1].view(torch.uint8) for p in parts])
            return torch.cat([p[0] for p in parts]), scales.view(torch.float8_e8m0fnu)
        E, N, K = w.shape
        blk = w.float().reshape(E, N, K // 32, 32)
        amax = blk.abs().amax(dim=3).clamp(min=2.0**-120)
        exp = torch.ceil(torch.log2(amax / 6.0)).clamp(-127, 127)
        v = blk / torch.exp2(exp)[..., None]
        mag = v.abs().clamp(max=6.0)
        code = (mag[..., None] - E2M1).abs().argmin(dim=-1)  # nearest magnitude
        code = code | ((v < 0).to(torch.int64) << 3)
        code = code.reshape(E, N, K)
        packed = (code[..., 0::2] | (code[..., 1::2] << 4)).to(torch.uint8).view(torch.int8)
        scales = (exp + 127).to(torch.uint8).view(torch.float8_e8m0fnu)
        return packed, scales

    # -- float64 numpy reference of the compiled chain -------------------------

    def np_chain(
        cfg, x, ids, weights, w_up, w_down, s_up, s_down, round_up, quantized=True, biases=()
    ):
        """y (float64 [T, H], numpy) of the fp8_block layer (quantized: the
        spec's activation quantization, the weights decoded exactly from
        their bits by reference.py) or of the plain bf16 layer (w_* bf16),
        the experts' weights taken from the (GPU) tensors one at a time.
        `round_up` False: the GLU reads the up GEMM's unrounded values (the
        fused chain's GLU epilogue reads its f32 accumulators; only its
        output is bf16). With round_up it equals reference.ffn."""
        ue8m0 = cfg["scale_fmt"] == "ue8m0"
        # (mxfp4_hopper: the reference reads the checkpoint-order codes.)
        fmt = "mxfp4" if cfg["weight_format"] == "mxfp4_hopper" else cfg["weight_format"]
        bf = lambda a: R.round_to(a, "bf16")  # noqa: E731

        def fq(a):
            # (mxfp4 is w4a16: the activations are not quantized.)
            if not quantized or fmt != "fp8_block":
                return a
            q, sc = R.quantize_rows_fp8(a, ue8m0)
            return q * R.expand_groups(sc, a.shape[1])

        def weight(w, sc, e):
            if not quantized:
                return w[e].double().cpu().numpy()
            bits = w[e : e + 1].view(torch.uint8).cpu().numpy()
            sc = sc[e : e + 1]
            sc = sc.cpu().numpy() if fmt == "fp8_block" else sc.view(torch.uint8).cpu().numpy()
            return R.dequantize_weights(bits, fmt, sc)[0]

        T, H = x.shape
        I = cfg["intermediate"]
        y = np.zeros((T, H))
        for e in np.unique(ids):
            t, j = np.nonzero(ids == e)
            up = fq(x[t]) @ weight(w_up, s_up, e).T
            if biases:
                up = up + biases[0][e].double().cpu().numpy()
            if round_up:
                up = bf(up)
            if cfg["layout"] == "concat":
                g, u = up[:, :I], up[:, I:]
            else:
                g, u = up[:, 0::2], up[:, 1::2]
            if cfg.get("limit") is not None:
                g = np.minimum(g, cfg["limit"])
                u = np.clip(u, -cfg["limit"], cfg["limit"])
            act = bf(g / (1.0 + np.exp(-cfg["alpha"] * g)) * (u + cfg["up_bias"]))
            down = fq(act) @ weight(w_down, s_down, e).T
            if biases:
                down = down + biases[1][e].double().cpu().numpy()
            down = bf(down)
            np.add.at(y, t, down * weights[t, j][:, None])
        return y

    def rel(got, want):
        if got.numel() == 0:
            return 0.0
        if not torch.isfinite(got).all():
            return float("inf")
        num = float(torch.linalg.vector_norm((got.double() - want.double()).reshape(-1)))
        den = float(torch.linalg.vector_norm(want.double().reshape(-1)))
        return num / den if den else (0.0 if num == 0 else float("inf"))

    def record(name, T, status, err, vs_bf16, detail, spec_err=None):
        row = dict(
            case=name,
            T=T,
            status=status,
            rel_err=err,
            rel_err_spec=spec_err,
            rel_err_vs_bf16=vs_bf16,
            detail=detail,
        )
        results.append(row)
        f = lambda v: "%.3e" % v if v is not None else "-"  # noqa: E731
        line = "%-5s %-22s T=%-6s rel err %-10s spec %-10s vs bf16 layer %-10s %s" % (
            status,
            name,
            T,
            f(err),
            f(spec_err),
            f(vs_bf16),
            detail,
        )
        print(line, flush=True)
        lines.append(line)

    only = [s for s in args.only.split(",") if s]
    cases = {c["name"]: c for c in meta["cases"]}
    loaded = {}

    def load(case):
        if case["name"] not in loaded:
            art = rt.load(os.path.join(args.dir, case["library"]))
            loaded[case["name"]] = art.fn("ffn")
        return loaded[case["name"]]

    for case in meta["cases"]:
        name, cfg = case["name"], case["config"]
        if only and name not in only:
            continue
        if case["reference"] is None:
            continue
        if time.time() - start > args.budget:
            record(name, "-", "SKIP", None, None, "time budget")
            continue
        fn = load(case)
        spec = fn.spec
        H, I, E, k = cfg["hidden"], cfg["intermediate"], cfg["experts"], cfg["top_k"]
        # mxfp4_hopper: quantized as mxfp4 (the reference's codes), the
        # kernel gets them repacked (moe_mlir_runtime.mxfp4).
        hopper = cfg["weight_format"] == "mxfp4_hopper"
        fmt = "mxfp4" if hopper else cfg["weight_format"]
        # bf16 weights, then the checkpoint format.
        t0 = time.time()
        wu16 = gen("%s/wu" % name, (E, 2 * I, H), torch.bfloat16, 1.0 / math.sqrt(H))
        wd16 = gen("%s/wd" % name, (E, H, I), torch.bfloat16, 1.0 / math.sqrt(I))
        if fmt == "fp8_block":
            wu, su = quantize_fp8_blocks(wu16)
            wd, sd = quantize_fp8_blocks(wd16)
        else:
            wu, su = quantize_mxfp4(wu16)
            wd, sd = quantize_mxfp4(wd16)
        extra = []
        rbias = None
        if cfg["routing_bias"]:
            rbias = gen("%s/rbias" % name, (E,), torch.float32, 0.05)
            extra.append(rbias)
        ebias = []
        if cfg["expert_bias"]:
            ebias = [
                gen("%s/bu" % name, (E, 2 * I), torch.bfloat16, 0.1),
                gen("%s/bd" % name, (E, H), torch.bfloat16, 0.1),
            ]
            extra += ebias
        torch.cuda.synchronize()
        print("--- %s: %s (weights %.1fs)" % (name, spec.signature(), time.time() - t0), flush=True)
        Ts = [
            int(t)
            for t in (args.T if case["reference"] == "numpy" else args.model_T).split(",")
            if t
        ]
        lg_dtype = rt.torch_dtype(spec.args[1].dtype)
        if case["reference"] == "numpy" and args.edge:
            Ts = Ts + ["edge"]
        for T in Ts:
            edge = T == "edge"
            wu_c, wd_c, su_c, sd_c = wu, wd, su, sd
            lg = None
            if edge and fmt == "mxfp4":
                # Weight edge cases, one token routed first to each of
                # experts 0..5: E8M0 extremes (0: 2^-127, subnormal in
                # bf16; 1; 255: NaN; 254: 2^127 on an all-zero block, as
                # any nonzero code times it overflows f32 where the float64
                # reference does not), an all-zero block.
                T = 6
                x = gen("%s/x/edge" % name, (T, H), torch.bfloat16)
                su_c, sd_c = su.clone(), sd.clone()
                wu_c = wu.clone()
                u8 = lambda t: t.view(torch.uint8)  # noqa: E731
                u8(su_c)[0] = 0
                u8(sd_c)[0, :, 0] = 1
                u8(su_c)[1, :, 0] = 1
                u8(su_c)[2, 3, 1] = 254
                wu_c[2, 3, 16:32] = 0
                u8(sd_c)[3, 5, 0] = 255
                wu_c[4, :, 0:16] = 0
                u8(su_c)[5, :, -1] = 0
                # E8M0 of 128 and above (2^(s - 1) is no bf16: the
                # register-A kernels' two-step multiply) on experts 0 / 1
                u8(su_c)[0, 0:4, :] = 128
                u8(su_c)[1, 2, 0:2] = 140
                u8(sd_c)[0, 1, 1] = 129
                lg = gen("%s/lg/edge" % name, (T, E), lg_dtype, 2.0)
                lg[torch.arange(T), torch.arange(T)] += 20
            elif edge:
                # Quantization edge cases, one token each: an all-zero row,
                # a row under the amax clamp (1e-4), a large row, a NaN and
                # an inf activation (their groups' scales are NaN / inf:
                # the whole output row is NaN), a plain row.
                T = 6
                x = gen("%s/x/edge" % name, (T, H), torch.float32)
                x[0] = 0
                x[1] *= 1e-6
                x[2] *= 1e4
                x[3, 5] = float("nan")
                x[4, H - 1] = float("inf")
                x = x.to(torch.bfloat16)
            else:
                x = gen("%s/x/%d" % (name, T), (T, H), torch.bfloat16)
            if lg is None:
                lg = gen("%s/lg/%s" % (name, T), (T, E), lg_dtype, 2.0)
            try:
                # The output poisoned: every element must be written.
                y = torch.full((T, H), float("nan"), dtype=torch.bfloat16, device=dev)
                wu_k, wd_k = wu_c, wd_c
                if hopper:
                    from moe_mlir_runtime.mxfp4 import repack_mxfp4_hopper

                    wu_k, wd_k = repack_mxfp4_hopper(wu_c), repack_mxfp4_hopper(wd_c)
                fn(x, lg, wu_k, wd_k, *extra, su_c, sd_c, y)
                torch.cuda.synchronize()
            except Exception as ex:  # noqa: BLE001
                record(
                    name,
                    "edge" if edge else T,
                    "FAIL",
                    None,
                    None,
                    "%s: %s" % (type(ex).__name__, str(ex)[:300]),
                )
                continue
            W, ids, amb, _, _ = R.route(
                lg.double().cpu().numpy(),
                k,
                cfg["scoring"],
                cfg["normalize"],
                cfg["n_group"],
                cfg["topk_group"],
                cfg["group_score"],
                cfg["scaling"],
                rbias.double().cpu().numpy() if rbias is not None else None,
            )
            W = R.round_to(W, "f32")
            keep = torch.as_tensor(~amb, device=dev)
            # Model-size layers: a sample of rows (each row's output depends on
            # its own routing only).
            rows = np.arange(T)
            if case["reference"] != "numpy" and T > args.sample:
                rows = np.sort(np.random.default_rng(T).choice(T, args.sample, replace=False))
            rows_t = torch.as_tensor(rows, device=dev, dtype=torch.int64)
            keep_s = keep[rows_t]
            ys = y[rows_t]
            xs_np = x[rows_t].double().cpu().numpy()
            np_u8 = lambda t: t.view(torch.uint8).cpu().numpy()  # noqa: E731
            spec_err, ok = None, True
            if case["reference"] == "numpy":
                kw = dict(case["reference_attrs"])
                if kw.get("weight_format") == "mxfp4_hopper":
                    kw["weight_format"] = "mxfp4"
                want, scale, defined = R.ffn(
                    x.double().cpu().numpy(),
                    lg.double().cpu().numpy(),
                    np_u8(wu_c),
                    np_u8(wd_c),
                    "bf16",
                    k,
                    cfg["scoring"],
                    bias=rbias.double().cpu().numpy() if rbias is not None else None,
                    w_up_bias=ebias[0].double().cpu().numpy() if ebias else None,
                    w_down_bias=ebias[1].double().cpu().numpy() if ebias else None,
                    w_up_scale=su_c.cpu().numpy() if fmt == "fp8_block" else np_u8(su_c),
                    w_down_scale=sd_c.cpu().numpy() if fmt == "fp8_block" else np_u8(sd_c),
                    **kw,
                )
                got = y.double().cpu().numpy()
                rtol, atol = R.TOLERANCE["bf16"]
                finite = np.isfinite(want)
                with np.errstate(invalid="ignore"):
                    bad = (np.abs(got - want) > rtol * scale + atol) & finite & defined[:, None]
                bad |= ~np.isfinite(got) & finite & defined[:, None]
                # Where the reference is NaN (a NaN / inf activation) so is ours.
                bad |= np.isnan(want) & ~np.isnan(got) & defined[:, None]
                # The relative errors below: rows with a finite reference.
                keep &= torch.as_tensor(finite.all(axis=1), device=dev)
                keep_s = keep[rows_t]
                spec_err = rel(y[keep], torch.as_tensor(want, device=dev)[keep])
                ok = not bad.any()
                detail = "%d rows, %d off the tolerance model" % (
                    int(defined.sum()),
                    int(bad.sum()),
                )
            else:
                detail = "%d sampled rows of %d (%d near-tie rows left out)" % (
                    len(rows),
                    T,
                    int((~keep_s).sum()),
                )
            vs = None
            # The float64 reference with the compiled chain's roundings,
            # and the unquantized bf16 layer (same routing).
            chain = np_chain(
                cfg,
                xs_np,
                ids[rows],
                W[rows],
                wu_c,
                wd_c,
                su_c,
                sd_c,
                round_up=not case["fuse"],
                biases=ebias,
            )
            err = rel(ys[keep_s], torch.as_tensor(chain, device=dev)[keep_s])
            plain = np_chain(
                cfg,
                xs_np,
                ids[rows],
                W[rows],
                wu16,
                wd16,
                None,
                None,
                True,
                quantized=False,
                biases=ebias,
            )
            vs = rel(ys[keep_s], torch.as_tensor(plain, device=dev)[keep_s])
            ok = ok and err <= 1e-2
            record(name, "edge" if edge else T, "PASS" if ok else "FAIL", err, vs, detail, spec_err)
        # Timing against the bf16 twin (same weights, before quantization).
        twin = case.get("bf16_twin")
        if twin and twin in cases:
            fn16 = load(cases[twin])
            flush = torch.empty(512 * 2**20, dtype=torch.uint8, device=dev)
            for T in [int(t) for t in args.time_T.split(",") if t]:
                if time.time() - start > args.budget:
                    break
                x = gen("%s/tx/%d" % (name, T), (T, H), torch.bfloat16)
                lg = gen("%s/tlg/%d" % (name, T), (T, E), lg_dtype, 2.0)
                ms = {}
                for label, f, a in (
                    ("bf16", fn16, (x, lg, wu16, wd16, *extra)),
                    (fmt, fn, (x, lg, wu, wd, *extra, su, sd)),
                ):
                    f(*a)
                    times = []
                    for _ in range(args.runs):
                        flush.zero_()
                        s0, s1 = torch.cuda.Event(True), torch.cuda.Event(True)
                        s0.record()
                        f(*a)
                        s1.record()
                        s1.synchronize()
                        times.append(s0.elapsed_time(s1))
                    ms[label] = sorted(times)[len(times) // 2]
                line = "TIME  %-22s T=%-6d bf16 %9.1f us  %s %9.1f us  bf16/%s %.2fx" % (
                    name,
                    T,
                    ms["bf16"] * 1e3,
                    fmt,
                    ms[fmt] * 1e3,
                    fmt,
                    ms["bf16"] / ms[fmt],
                )
                print(line, flush=True)
                lines.append(line)
                results.append(
                    dict(case=name, T=T, format=fmt, us_bf16=ms["bf16"] * 1e3, us=ms[fmt] * 1e3)
                )
            del flush
        del wu16, wd16, wu, wd
        torch.cuda.empty_cache()
    fails = sum(r.get("status") == "FAIL" for r in results)
    passes = sum(r.get("status") == "PASS" for r in results)
    tail = "%d PASS, %d FAIL in %.0fs" % (passes, fails, time.time() - start)
    print(tail)
    lines.append(tail)
    with open(os.path.join(out_dir, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(dict(meta=dict(commit=meta["commit"], gpu=gpu), results=results), f, indent=1)
    return 1 if fails or not passes else 0


if __name__ == "__main__":
    sys.exit(main())
