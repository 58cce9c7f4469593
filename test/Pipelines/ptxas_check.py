#!/usr/bin/env python3
"""Runs moe-opt pipelines that embed PTX (format=ptx), extracts every
kernel's PTX from the gpu.binary objects, and assembles each with ptxas for
the given architecture. Prints one line per failure and a summary; exits 1
if any kernel is rejected. With -v, prints a header per pipeline
("== <flags>: <n> kernels") and registers / spills per kernel (ptxas -v),
which is where register-array spills would show up, and ptxas's
"Potential Performance Loss" warnings (e.g. wgmma serialized) and C7519
infos (warpgroup.arrive injected), one line per warning ("<kernel>: ptxas
warning: ..."). With --ptx-insn
PREFIX (repeatable), a kernel line also lists the PTX instructions of the
kernel that start with PREFIX, per opcode ("| ptx: <opcode> [<immediate
operands>] x<count>, ..."), e.g. --ptx-insn setmaxnreg --ptx-insn wgmma.
A pipeline is split like a shell command line (quote an option list that
holds spaces). A gpu.binary may hold several kernels (.entry): the lines
are per kernel, sorted by name (ffn_kernel, ffn_kernel_0, ..., the
outlining order), and the counts are kernels, not binaries."""

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


ENTRY = re.compile(r"^(?:\.visible\s+)?\.entry\s+(\w+)\s*\(", re.M)


def entries(ptx):
    """(name, text) of every kernel (.entry) of a PTX module, the text up to
    the next kernel (a module may hold several: moe-gpu-module-to-binary
    merges the kernels into one module per thread)."""
    found = list(ENTRY.finditer(ptx))
    return [
        (m.group(1), ptx[m.start() : found[i + 1].start() if i + 1 < len(found) else len(ptx)])
        for i, m in enumerate(found)
    ]


def natural_key(name):
    """ffn_kernel < ffn_kernel_0 < ffn_kernel_2 < ffn_kernel_10 (the
    kernels' outlining order), with a __pdl suffix ignored."""
    name = name[: -len("__pdl")] if name.endswith("__pdl") else name
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def ptxas_info(stderr):
    """ptxas -v's lines per kernel: {name: [lines]} (lines before the first
    'Compiling entry function' under '')."""
    out = {"": []}
    current = ""
    for line in stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            current = m.group(1)
            out[current] = []
            continue
        out.setdefault(current, []).append(line)
    return out


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
            modules = [(name, unescape(ptx)) for name, ptx in OBJECT.findall(res.stdout)]
            if not modules:
                print(f"FAILED: no PTX objects from {' '.join(cmd)}")
                return 1
            kernels = [k for _, ptx in modules for k in entries(ptx)]
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

            jobs = [pool.submit(assemble, name, ptx) for name, ptx in modules]
            lines = []
            for (module, ptx), job in zip(modules, jobs):
                asm = job.result()
                names = [name for name, _ in entries(ptx)]
                total += len(names)
                if asm.returncode != 0:
                    failed += len(names)
                    print(f"FAILED: {module} ({pipeline}): {asm.stderr.strip()}")
                    continue
                if not args.verbose:
                    continue
                info = ptxas_info(asm.stderr)
                for name, text in entries(ptx):
                    used = " ".join(
                        l.split("info    :")[-1].strip()
                        for l in info.get(name, [])
                        if "Used" in l or "spill" in l
                    )
                    insns = ptx_insns(text, args.ptx_insn)
                    kernel_lines = [f"{name}: {used}" + (f" | ptx: {insns}" if insns else "")]
                    # ptxas's performance warnings (e.g. C7520: wgmma
                    # serialized) and its C7519 (a warpgroup.arrive it had
                    # to inject: a branch inside a wgmma group, whose
                    # group it then closes early; bench/NOTES.md v63), one
                    # line each, under the kernel they name (or the
                    # module's first kernel).
                    for l in asm.stderr.splitlines():
                        if ("Performance Loss" in l or "(C7519)" in l) and (
                            f"'{name}'" in l
                            or (name == names[0] and not any(f"'{n}'" in l for n in names))
                        ):
                            kernel_lines.append(
                                f"{name}: ptxas warning: " + l.split("info    :")[-1].strip()
                            )
                    lines.append((natural_key(name), kernel_lines))
            for _, kernel_lines in sorted(lines, key=lambda x: x[0]):
                print("\n".join(kernel_lines))
    print(f"ptxas accepted {total - failed} of {total} kernels for {args.arch}")
    if failed:
        return 1
    print("ptxas: all kernels accepted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
