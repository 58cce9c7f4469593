#!/usr/bin/env python3
# ===- readme_blocks.py - test the README's examples ----------------------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""Checks that what README.md shows works (the lit tests
test/Examples/readme*.test and test/Python/readme-example.test run it).

A code block of the README is marked for testing by an HTML comment on the
line before its opening fence:

    <!-- test: usage-cpu.sh -->
    ```sh
    ...
    ```

and a table by `<!-- test-bench: bench/results/<commit>.md -->` on the line
before it. Subcommands:

  extract README OUT_DIR [--expect NAME]... [--subst OLD=NEW]...
      writes every marked block to OUT_DIR/NAME (after the textual
      substitutions); fails on a marker without a block, a name used twice,
      or an expected name missing
  contains PART WHOLE
      fails unless the text of file PART occurs verbatim in file WHOLE
  check-bench README [--root DIR]
      every row of each marked table matches the row of the results file
      it cites (layer, T, ours, torch._grouped_mm, triton_kernels, ratio),
      the table covers every row of that file, and the README names the
      file's commit and card
  check-links FILE...
      every relative Markdown link of the files (and its #anchor, for
      links to Markdown files) resolves
  dry-run-gpu SNIPPET LIBRARY
      runs the README's GPU-side Python snippet without a GPU and without
      torch: `torch` is a stand-in (tensors are shapes and dtypes) and the
      compiled library's C functions are stand-ins for the symbols it
      really exports (nm), so that the real moe_mlir_runtime loads
      LIBRARY's manifest (hash checked) and checks every call of the
      snippet against it (argument count, dtypes, shapes, T) before it
      "calls" the library; prints each C function called

Standard library only. Exit status: 0 ok, 1 a check failed.
"""

import argparse
import contextlib
import ctypes
import os
import re
import shutil
import subprocess
import sys
import types

MARK = re.compile(r"^<!--\s*test:\s*(\S+)\s*-->\s*$")
BENCH_MARK = re.compile(r"^<!--\s*test-bench:\s*(\S+)\s*-->\s*$")
FENCE = re.compile(r"^```")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def fail(message):
    print("readme_blocks: " + message, file=sys.stderr)
    sys.exit(1)


# ----------------------------------------------------------------------------
# extract
# ----------------------------------------------------------------------------


def blocks(path):
    """[(name, text, line)] of the marked code blocks of `path`."""
    lines = read(path).split("\n")
    out = []
    for i, line in enumerate(lines):
        m = MARK.match(line)
        if not m:
            continue
        name = m.group(1)
        if i + 1 >= len(lines) or not FENCE.match(lines[i + 1]):
            fail("%s:%d: marker for %s is not followed by a ``` fence" % (path, i + 1, name))
        body = []
        for j in range(i + 2, len(lines)):
            if FENCE.match(lines[j]):
                break
            body.append(lines[j])
        else:
            fail("%s:%d: the block of %s is not closed" % (path, i + 2, name))
        out.append((name, "\n".join(body) + "\n", i + 1))
    return out


def cmd_extract(args):
    found = blocks(args.readme)
    names = [n for n, _, _ in found]
    for n in set(names):
        if names.count(n) > 1:
            fail("%s: block name %s used %d times" % (args.readme, n, names.count(n)))
    for n in args.expect or []:
        if n not in names:
            fail("%s: no block marked <!-- test: %s -->" % (args.readme, n))
    os.makedirs(args.out_dir, exist_ok=True)
    for name, text, line in found:
        if os.sep in name or name.startswith("."):
            fail("%s:%d: bad block name %r" % (args.readme, line, name))
        for s in args.subst or []:
            old, _, new = s.partition("=")
            text = text.replace(old, new)
        with open(os.path.join(args.out_dir, name), "w", encoding="utf-8") as f:
            f.write(text)
        print("extracted %s (README line %d)" % (name, line))


def cmd_contains(args):
    part = read(args.part)
    whole = read(args.whole)
    if part not in whole:
        fail("the text of %s does not occur verbatim in %s" % (args.part, args.whole))
    print("%s occurs in %s" % (args.part, args.whole))


# ----------------------------------------------------------------------------
# check-bench
# ----------------------------------------------------------------------------


def table_rows(lines, start):
    """Cells of the Markdown table starting at lines[start] (header, rule,
    rows): (header cells, [row cells])."""

    def cells(line):
        return [c.strip() for c in line.strip().strip("|").split("|")]

    header = cells(lines[start])
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(cells(line))
    return header, rows


def cmd_check_bench(args):
    root = args.root or os.path.dirname(os.path.abspath(args.readme))
    text = read(args.readme)
    lines = text.split("\n")
    checked = 0
    for i, line in enumerate(lines):
        m = BENCH_MARK.match(line)
        if not m:
            continue
        results = os.path.join(root, m.group(1))
        if not os.path.isfile(results):
            fail("README line %d cites %s, which does not exist" % (i + 1, m.group(1)))
        rlines = read(results).split("\n")
        start = next((k for k, x in enumerate(rlines) if x.startswith("| layer | T |")), None)
        if start is None:
            fail("%s has no results table" % results)
        rhead, rrows = table_rows(rlines, start)
        col = {h: k for k, h in enumerate(rhead)}
        for h in ("layer", "T", "ours us", "gmm us", "tk us", "ours/best", "ok"):
            if h not in col:
                fail("%s: results table has no column %r" % (results, h))
        want = {
            (r[col["layer"]], r[col["T"]]): [
                r[col["ours us"]],
                r[col["gmm us"]],
                r[col["tk us"]],
                r[col["ours/best"]],
                r[col["ok"]],
            ]
            for r in rrows
        }
        _, rows = table_rows(lines, i + 1)
        seen = set()
        for r in rows:
            if len(r) != 6:
                fail("README table row %r: expected 6 cells" % (r,))
            key = (r[0].lower(), r[1])
            if key not in want:
                fail("README row %s T=%s is not in %s" % (r[0], r[1], m.group(1)))
            ours, gmm, tk, ratio, ok = want[key]
            if r[2:] != [ours, gmm, tk, ratio]:
                fail(
                    "README row %s T=%s says %s; %s says %s"
                    % (r[0], r[1], r[2:], m.group(1), [ours, gmm, tk, ratio])
                )
            if ok != "ok":
                fail("%s: row %s T=%s is not ok (%s)" % (m.group(1), r[0], r[1], ok))
            seen.add(key)
        missing = sorted(set(want) - seen)
        if missing:
            fail("README table leaves out %s of %s" % (missing, m.group(1)))
        commit = os.path.basename(results).split("-")[0].split(".")[0]
        if ("commit " + commit) not in text:
            fail("README does not name the commit of %s (%s)" % (m.group(1), commit))
        gpu = re.search(r"^- GPU: NVIDIA ([A-Za-z0-9]+)", "\n".join(rlines), re.M)
        if not gpu or ("NVIDIA " + gpu.group(1)) not in text:
            fail("README does not name the card of %s" % m.group(1))
        print("bench table: %d rows match %s (%s)" % (len(rows), m.group(1), gpu.group(1)))
        checked += 1
    if not checked:
        fail("%s has no <!-- test-bench: ... --> table" % args.readme)


# ----------------------------------------------------------------------------
# check-links
# ----------------------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading):
    """GitHub's anchor of a Markdown heading."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    out, fenced = set(), False
    for line in read(path).split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out


def cmd_check_links(args):
    bad = []
    count = 0
    for path in args.files:
        fenced = False
        for n, line in enumerate(read(path).split("\n"), 1):
            if line.startswith("```"):
                fenced = not fenced
                continue
            if fenced:
                continue
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue
                count += 1
                file_part, _, anchor = target.partition("#")
                dest = (
                    os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                    if file_part
                    else path
                )
                if not os.path.exists(dest):
                    bad.append("%s:%d: %s does not exist" % (path, n, target))
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    bad.append("%s:%d: %s has no heading #%s" % (path, n, file_part, anchor))
    if bad:
        fail("broken links:\n  " + "\n  ".join(bad))
    print("links: %d relative links resolve" % count)


# ----------------------------------------------------------------------------
# dry-run-gpu
# ----------------------------------------------------------------------------

_DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64")
_DTYPES += ("uint8", "bool")
_ITEMSIZE = dict(float32=4, float16=2, bfloat16=2, float64=8, int8=1, int16=2, int32=4)
_ITEMSIZE.update(int64=8, uint8=1, bool=1)


def _stand_in_torch():
    torch = types.ModuleType("torch")
    torch.__stand_in__ = True
    for name in _DTYPES:
        setattr(torch, name, "torch." + name)
    addresses = iter(range(0x7F0000000000, 0x7FFFFFFFFFFF, 1 << 32))

    class Tensor:
        """Shape, dtype and a made-up device address; no data."""

        def __init__(self, shape, dtype, device):
            self.shape = tuple(int(s) for s in shape)
            self.dtype = dtype
            kind, _, index = str(device).partition(":")
            self.is_cuda = kind == "cuda"
            self.device = types.SimpleNamespace(type=kind, index=int(index or 0))
            self._address = next(addresses)

        def dim(self):
            return len(self.shape)

        def stride(self, i=None):
            strides, acc = [], 1
            for s in reversed(self.shape):
                strides.insert(0, acc)
                acc *= s
            return tuple(strides) if i is None else strides[i]

        def is_contiguous(self):
            return True

        def data_ptr(self):
            return self._address

        def untyped_storage(self):
            return types.SimpleNamespace(data_ptr=lambda: self._address)

        def _same(self, *_):
            return Tensor(self.shape, self.dtype, "%s:%d" % (self.device.type, self.device.index))

        __mul__ = __rmul__ = __truediv__ = __add__ = __radd__ = __sub__ = _same

        def __repr__(self):
            return "<stand-in tensor %s %s>" % (list(self.shape), self.dtype)

    def make(*shape, dtype=None, device="cpu", **_):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return Tensor(shape, dtype or torch.float32, device)

    torch.Tensor = Tensor
    torch.randn = torch.rand = torch.empty = torch.zeros = torch.ones = make

    class CUDAGraph:
        replays = 0

        def replay(self):
            CUDAGraph.replays += 1

    @contextlib.contextmanager
    def graph(g, **_):
        yield g

    stream = types.SimpleNamespace(cuda_stream=0x5EED)
    torch.cuda = types.SimpleNamespace(
        is_available=lambda: False,
        init=lambda: None,
        current_stream=lambda device=None: stream,
        synchronize=lambda device=None: None,
        CUDAGraph=CUDAGraph,
        graph=graph,
    )
    return torch


def _exported_symbols(library):
    nm = shutil.which("llvm-nm") or shutil.which("nm")
    if not nm:
        fail("no nm / llvm-nm to read the symbols of %s" % library)
    out = subprocess.run(
        [nm, "-D", "--defined-only", library], check=True, capture_output=True, text=True
    ).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


class _StandInFunction:
    def __init__(self, name, log):
        self.name, self.log = name, log
        self.argtypes, self.restype = None, None

    def __call__(self, *args):
        if self.name.startswith("_mlir_ciface_"):
            sizes = []
            for a in args:
                obj = getattr(a, "_obj", None)
                if isinstance(obj, ctypes.Structure) and hasattr(obj, "sizes"):
                    sizes.append(list(obj.sizes))
                else:
                    sizes.append("scalar")
            self.log.append((self.name, sizes))
            return None
        if self.name == "moeRuntimeSynchronize":
            return 0
        return None  # moeRuntimeGetLastError: no error; setters: nothing


def _stand_in_cdll(log):
    class CDLL:
        def __init__(self, path, *_, **__):
            self._symbols = _exported_symbols(path)
            self._handle = 0

        def __getattr__(self, name):
            if name.startswith("__") or name not in self._symbols:
                raise AttributeError(name)
            f = _StandInFunction(name, log)
            setattr(self, name, f)
            return f

    return CDLL


def cmd_dry_run_gpu(args):
    snippet = read(args.snippet)
    if not os.path.isfile(args.library):
        fail("no library %s (the README's compile step makes it)" % args.library)
    log = []
    sys.modules["torch"] = _stand_in_torch()
    ctypes.CDLL = _stand_in_cdll(log)
    code = compile(snippet, args.snippet, "exec")
    exec(code, {"__name__": "__main__"})
    runtime = sys.modules.get("moe_mlir_runtime")
    if runtime is None or getattr(runtime.torch, "__stand_in__", False) is not True:
        fail("the snippet did not use moe_mlir_runtime with the stand-in torch")
    if not log:
        fail("the snippet called no compiled function")
    for name, sizes in log:
        print("dry run: %s(%s)" % (name, ", ".join(str(s) for s in sizes)))
    replays = sys.modules["torch"].cuda.CUDAGraph.replays
    print("dry run: %d calls, %d graph replays" % (len(log), replays))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract")
    e.add_argument("readme")
    e.add_argument("out_dir")
    e.add_argument("--expect", action="append")
    e.add_argument("--subst", action="append")
    c = sub.add_parser("contains")
    c.add_argument("part")
    c.add_argument("whole")
    b = sub.add_parser("check-bench")
    b.add_argument("readme")
    b.add_argument("--root")
    link = sub.add_parser("check-links")
    link.add_argument("files", nargs="+")
    d = sub.add_parser("dry-run-gpu")
    d.add_argument("snippet")
    d.add_argument("library")
    args = p.parse_args(argv)
    {
        "extract": cmd_extract,
        "contains": cmd_contains,
        "check-bench": cmd_check_bench,
        "check-links": cmd_check_links,
        "dry-run-gpu": cmd_dry_run_gpu,
    }[args.cmd](args)


if __name__ == "__main__":
    main()
