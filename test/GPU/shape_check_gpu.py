#!/usr/bin/env python3
"""The GPU libraries' own run-time shape checks (moe-shape-checks, report
mode), on the H200: calls through the C ABI (moe_mlir_runtime.Library.call,
no manifest check, as a C caller) with dynamic sizes that disagree must
raise ShapeError (moeRuntimeReportShapeError -> moeRuntimeGetLastError),
launch nothing and leave the poisoned output untouched; the library stays
usable and a matching call afterwards gives finite, repeatable output.

    python3 test/GPU/shape_check_gpu.py [ART_DIR]     (default gpu-artifacts)

Exit status 0 when every check passed.
"""

import os
import sys

ART = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "gpu-artifacts")
sys.path.insert(0, ART)

import torch  # noqa: E402

import moe_mlir_runtime as rt  # noqa: E402

H, E, I2, I = 2048, 128, 1536, 768  # ffn_qwen3_30b_a3b (test/GPU/cases)


def main():
    failures = 0
    g = torch.Generator(device="cuda").manual_seed(1)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, device="cuda", generator=g) * scale).to(torch.bfloat16)

    w_up = randn(E, I2, H, scale=0.02)
    w_down = randn(E, H, I, scale=0.02)
    for build in ("fused", "unfused"):
        lib = rt.Library(os.path.join(ART, "ffn_qwen3_30b_a3b.%s.so" % build))
        # (rows of x, rows of logits, rows of the output)
        for tx, tl, to in [(5, 4, 5), (2, 5, 2), (5, 1000, 5), (5, 5, 4), (0, 3, 0)]:
            x, logits = randn(tx, H), randn(tl, E)
            out = torch.full((to, H), float("nan"), device="cuda", dtype=torch.bfloat16)
            what = "%s x=%d logits=%d out=%d" % (build, tx, tl, to)
            try:
                lib.call("ffn", x, logits, w_up, w_down, out)
                torch.cuda.synchronize()
                print("FAIL %s: no error" % what)
                failures += 1
                continue
            except rt.ShapeError as e:
                message = str(e)
            torch.cuda.synchronize()
            untouched = bool(torch.isnan(out.float()).all()) if to else True
            named = "@ffn" in message and ("is %d" % tl in message or "is %d" % to in message)
            ok = untouched and named
            failures += not ok
            print("%s %s: untouched=%s | %s" % ("PASS" if ok else "FAIL", what, untouched, message))
        # Usable afterwards: matching sizes run, twice bitwise equal.
        x, logits = randn(37, H), randn(37, E)
        outs = []
        for _ in range(2):
            out = torch.full((37, H), float("nan"), device="cuda", dtype=torch.bfloat16)
            lib.call("ffn", x, logits, w_up, w_down, out)
            torch.cuda.synchronize()
            outs.append(out)
        ok = bool(torch.isfinite(outs[0].float()).all()) and torch.equal(outs[0], outs[1])
        failures += not ok
        print("%s %s: a matching call after the failed ones" % ("PASS" if ok else "FAIL", build))
    print("shape_check_gpu: %d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
