#!/usr/bin/env python3
"""MLIR text -> PTX (upstream gpu-lower-to-nvvm pipeline, sm_90a, +ptx86) -> cubin (ptxas run here,
so that -v resource usage and warnings are visible) -> SASS summary (cuobjdump, HGMMA lines).
Build machine only (needs mlir-opt and ptxas); the device needs only the cubins.

usage: compile.py X.mlir ...        writes beside each: X.ptx (removed unless KEEP_PTX=1), X.cubin,
                                    X.ptxas.txt, X.sass.txt (the HGMMA/QGMMA and register-use summary)
env: MLIR_OPT (default /usr/lib/llvm-22/bin/mlir-opt), PTXAS (default /usr/local/cuda/bin/ptxas),
     CUOBJDUMP (default: cuobjdump on PATH, else /tmp/cuobjdl/x/nvidia/cu13/bin/cuobjdump: the
     nvidia-cuda-cuobjdump wheel unpacked there; this image's CUDA has no cuobjdump)
"""

import collections, os, re, shutil, subprocess, sys

MLIR_OPT = os.environ.get("MLIR_OPT", "/usr/lib/llvm-22/bin/mlir-opt")
PTXAS = os.environ.get("PTXAS", "/usr/local/cuda/bin/ptxas")
CUOBJDUMP = (
    os.environ.get("CUOBJDUMP")
    or shutil.which("cuobjdump")
    or "/tmp/cuobjdl/x/nvidia/cu13/bin/cuobjdump"
)
PIPE = (
    "--gpu-lower-to-nvvm-pipeline=cubin-chip=sm_90a cubin-features=+ptx86 "
    "cubin-format=isa kernel-bare-ptr-calling-convention=1"
)


def compile_one(src):
    stem = os.path.splitext(src)[0]
    isa = subprocess.run([MLIR_OPT, src, PIPE], capture_output=True, text=True)
    if isa.returncode:
        print(f"== {stem}: mlir-opt failed:\n{isa.stderr[:4000]}")
        return 1
    m = re.search(r'assembly = "((?:[^"\\]|\\.)*)"', isa.stdout)
    ptx = re.sub(r"\\([0-9A-Fa-f]{2})", lambda g: chr(int(g.group(1), 16)), m.group(1))
    ptx = ptx.replace('\\"', '"').replace("\\\\", "\\")
    open(stem + ".ptx", "w").write(ptx)
    r = subprocess.run(
        [PTXAS, "-arch=sm_90a", "-v", "--warn-on-spills", stem + ".ptx", "-o", stem + ".cubin"],
        capture_output=True,
        text=True,
    )
    log = r.stdout + r.stderr
    open(stem + ".ptxas.txt", "w").write(log)
    print(f"== {os.path.basename(stem)}: ptxas rc={r.returncode}")
    print("\n".join("   " + l for l in log.splitlines() if "Compile time" not in l))
    if r.returncode:
        return r.returncode
    if not os.environ.get("KEEP_PTX"):
        os.remove(stem + ".ptx")
    if not os.path.exists(CUOBJDUMP):
        print(f"   (no cuobjdump at {CUOBJDUMP}: SASS not checked)")
        return 0
    sass = subprocess.run(
        [CUOBJDUMP, "-sass", stem + ".cubin"], capture_output=True, text=True
    ).stdout
    res = subprocess.run(
        [CUOBJDUMP, "-res-usage", stem + ".cubin"], capture_output=True, text=True
    ).stdout
    ins = []
    for l in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4}\*/\s+(.*?)\s*;", l)
        if m:
            ins.append(m.group(1).strip())
    # FP8 wgmma disassembles as QGMMA (HGMMA is the 16-bit form)
    hg = [l for l in ins if re.search(r"\b[HQ]GMMA\.", l)]
    forms = collections.Counter(re.search(r"([HQ]GMMA\.\S+)", l).group(1) for l in hg)
    # descriptor evidence: for each wgmma, the last instructions that wrote its gdesc[URn] pair(s)
    # (gdesc[URn]: A descriptor in URn..URn+1, B descriptor in URn+2..URn+3; with A from registers
    # (HGMMA ... R24, R88, gdesc[UR4]) only the B pair is used)
    last, trace = {}, []
    for l in ins:
        m = re.search(r"gdesc\[UR(\d+)\]", l)
        if m and re.search(r"\b[HQ]GMMA\.", l):
            n = int(m.group(1))
            rega = bool(re.search(r"GMMA\.\S+ R\d+, R\d+, gdesc", l))
            trace.append(l)
            trace += [
                "    UR%d (%s) <- %s"
                % (
                    n + j,
                    ("A unused" if rega else "A") if j < 2 else "B",
                    last.get(f"UR{n + j}", "?"),
                )
                for j in range(4)
            ]
        w = re.match(r"(?:@!?U?P\w+ )?(\S+) (UR\d+)", l)
        if w and w.group(1).startswith(("U", "R2UR", "S2UR")):
            last[w.group(2)] = l
            if ".64" in w.group(1):
                last["UR%d" % (int(w.group(2)[2:]) + 1)] = l
    ops = collections.Counter(l.split()[0] if not l.startswith("@") else l.split()[1] for l in ins)
    interesting = [
        k for k in ops if re.match(r"(UTMALDG|SYNCS|LDG|STG|LDS|STS|LDL|STL|PRMT|WARPGROUP|BAR)", k)
    ]
    lines = (
        [
            f"# {os.path.basename(stem)}.cubin: cuobjdump -sass summary ({CUOBJDUMP})",
            res.strip(),
            "",
            f"HGMMA forms: {dict(forms)}",
            "wgmma instructions (HGMMA / QGMMA):",
        ]
        + ["  " + l for l in hg]
        + [
            "",
            "other instructions of note: "
            + ", ".join(f"{k} x{ops[k]}" for k in sorted(interesting)),
            "",
            "descriptor writers (last write of each gdesc uniform register before each wgmma; high word",
            "0x40000040 = SWIZZLE_128B + SBO 1024 B; low word = (shared address >> 4) | LBO 1 << 16 | k step):",
        ]
        + trace
    )
    open(stem + ".sass.txt", "w").write("\n".join(lines) + "\n")
    print(f"   SASS: {dict(forms)}")
    for l in hg[:2]:
        print("     " + l)
    return 0


def main():
    rc = 0
    for src in sys.argv[1:]:
        rc |= compile_one(src)
    sys.exit(rc)


if __name__ == "__main__":
    main()
