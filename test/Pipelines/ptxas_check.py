#!/usr/bin/env python3
"""Runs moe-opt pipelines that embed PTX (format=ptx), extracts every
kernel's PTX from the gpu.binary objects, and assembles each with ptxas for
the given architecture. Prints one line per failure and a summary; exits 1
if any kernel is rejected. With -v, prints a header per pipeline
("== <flags>: <n> kernels") and registers / spills per kernel (ptxas -v),
which is where register-array spills would show up, and ptxas's
"Potential Performance Loss" warnings (e.g. wgmma serialized), one line
per warning ("<kernel>: ptxas warning: ..."). With --ptx-insn
PREFIX (repeatable), a kernel line also lists the PTX instructions of the
kernel that start with PREFIX, per opcode ("| ptx: <opcode> [<immediate
operands>] x<count>, ..."), e.g. --ptx-insn setmaxnreg --ptx-insn wgmma.
A pipeline is split like a shell command line (quote an option list that
holds spaces)."""

import argparse
import concurrent.futures
import os
import re
import shlex
import subprocess
import sys
import tempfile

OBJECT = re.compile(r'gpu\.binary @(\w+)\s*\[#gpu\.object<.*?assembly = "((?:[^"\\]|\\.)*)"', re.S)


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
            out += bytes([int(text[i + 1 : i + 3], 16)])
            i += 3
            continue
        out += c.encode()
        i += 1
    return out.decode()


INSN = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.:]*)\s*([^;]*);", re.M)


def ptx_insns(ptx, prefixes):
    """'<opcode> [<operands, when all immediate>] x<count>' of every PTX
    instruction that starts with one of `prefixes`, sorted."""
    counts = {}
    for opcode, operands in INSN.findall(ptx):
        if not any(opcode.startswith(p) for p in prefixes):
            continue
        operands = " ".join(operands.split())
        key = opcode
        if operands and re.fullmatch(r"[-\d, ]+", operands):
            key += " " + operands
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{k} x{n}" for k, n in sorted(counts.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("input")
    ap.add_argument("--moe-opt", default="moe-opt")
    ap.add_argument("--ptxas", default="/usr/local/cuda/bin/ptxas")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument(
        "--pipeline", action="append", required=True, help="moe-opt flags (format=ptx); may repeat"
    )
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument(
        "--ptx-insn",
        action="append",
        default=[],
        help="list the kernels' PTX instructions starting with this prefix (with -v); may repeat",
    )
    ap.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=min(8, os.cpu_count() or 1),
        help="ptxas processes at a time",
    )
    args = ap.parse_args()

    total = failed = 0
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
    with tempfile.TemporaryDirectory() as tmp, pool:
        for p, pipeline in enumerate(args.pipeline):
            cmd = [args.moe_opt, args.input] + shlex.split(pipeline)
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                print(f"FAILED: {' '.join(cmd)}\n{res.stderr}")
                return 1
            kernels = OBJECT.findall(res.stdout)
            if not kernels:
                print(f"FAILED: no PTX objects from {' '.join(cmd)}")
                return 1
            if args.verbose:
                print(f"== {pipeline}: {len(kernels)} kernels")

            def assemble(name, ptx):
                path = os.path.join(tmp, f"{p}.{name}.ptx")
                with open(path, "w") as f:
                    f.write(ptx)
                return subprocess.run(
                    [
                        args.ptxas,
                        f"-arch={args.arch}",
                        "-v",
                        path,
                        "-o",
                        path[: -len(".ptx")] + ".cubin",
                    ],
                    capture_output=True,
                    text=True,
                )

            kernels = [(name, unescape(ptx)) for name, ptx in kernels]
            jobs = [pool.submit(assemble, name, ptx) for name, ptx in kernels]
            for (name, ptx), job in zip(kernels, jobs):
                total += 1
                asm = job.result()
                if asm.returncode != 0:
                    failed += 1
                    print(f"FAILED: {name} ({pipeline}): {asm.stderr.strip()}")
                elif args.verbose:
                    info = " ".join(
                        l.split("info    :")[-1].strip()
                        for l in asm.stderr.splitlines()
                        if "Used" in l or "spill" in l
                    )
                    insns = ptx_insns(ptx, args.ptx_insn)
                    print(f"{name}: {info}" + (f" | ptx: {insns}" if insns else ""))
                    # ptxas's performance warnings (e.g. C7520: wgmma
                    # serialized), one line each.
                    for l in asm.stderr.splitlines():
                        if "Performance Loss" in l:
                            print(f"{name}: ptxas warning: " + l.split("info    :")[-1].strip())
    print(f"ptxas accepted {total - failed} of {total} kernels for {args.arch}")
    if failed:
        return 1
    print("ptxas: all kernels accepted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
