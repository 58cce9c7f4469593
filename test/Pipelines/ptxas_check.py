#!/usr/bin/env python3
"""Runs moe-opt pipelines that embed PTX (format=ptx), extracts every
kernel's PTX from the gpu.binary objects, and assembles each with ptxas for
the given architecture. Prints one line per failure and a summary; exits 1
if any kernel is rejected. With -v, prints registers / spills per kernel
(ptxas -v), which is where register-array spills would show up."""

import argparse
import os
import re
import subprocess
import sys
import tempfile

OBJECT = re.compile(r'gpu\.binary @(\w+)\s*\[#gpu\.object<.*?assembly = "((?:[^"\\]|\\.)*)"',
                    re.S)


def unescape(text):
    """MLIR string escapes: \\XX hex bytes, \\\\ and \\"."""
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in '\\"':
                out += nxt.encode()
                i += 2
                continue
            if nxt == "n":
                out += b"\n"
                i += 2
                continue
            out += bytes([int(text[i + 1:i + 3], 16)])
            i += 3
            continue
        out += c.encode()
        i += 1
    return out.decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("input")
    ap.add_argument("--moe-opt", default="moe-opt")
    ap.add_argument("--ptxas", default="/usr/local/cuda/bin/ptxas")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--pipeline", action="append", required=True,
                    help="moe-opt flags (format=ptx); may repeat")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    total = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for pipeline in args.pipeline:
            cmd = [args.moe_opt, args.input] + pipeline.split()
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                print(f"FAILED: {' '.join(cmd)}\n{res.stderr}")
                return 1
            kernels = OBJECT.findall(res.stdout)
            if not kernels:
                print(f"FAILED: no PTX objects from {' '.join(cmd)}")
                return 1
            for name, ptx in kernels:
                total += 1
                path = os.path.join(tmp, f"{name}.ptx")
                with open(path, "w") as f:
                    f.write(unescape(ptx))
                asm = subprocess.run(
                    [args.ptxas, f"-arch={args.arch}", "-v", path, "-o",
                     os.path.join(tmp, f"{name}.cubin")],
                    capture_output=True, text=True)
                if asm.returncode != 0:
                    failed += 1
                    print(f"FAILED: {name} ({pipeline}): {asm.stderr.strip()}")
                elif args.verbose:
                    info = " ".join(l.split("info    :")[-1].strip()
                                    for l in asm.stderr.splitlines()
                                    if "Used" in l or "spill" in l)
                    print(f"{name}: {info}")
    print(f"ptxas accepted {total - failed} of {total} kernels for {args.arch}")
    if failed:
        return 1
    print("ptxas: all kernels accepted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
