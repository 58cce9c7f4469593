"""The package's internal import graph is acyclic, and its public modules
export what they did (issue 12: cpu.py and ir.py no longer import each
other; the types they share live in moe_mlir._types)."""

import ast
from pathlib import Path

import moe_mlir
import moe_mlir.cpu
import moe_mlir.ir

PKG_DIR = Path(moe_mlir.__file__).resolve().parent


def _package_imports(path):
    """Names of the sibling modules `path` imports (at any depth: function
    bodies and TYPE_CHECKING blocks included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(alias.name for alias in node.names)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [alias.name for alias in node.names]
            )
            for name in names:
                parts = name.split(".")
                if parts[0] == "moe_mlir" and len(parts) > 1:
                    out.add(parts[1])
    return out


def test_import_graph_is_acyclic():
    graph = {p.stem: _package_imports(p) for p in PKG_DIR.glob("*.py")}
    assert "ir" not in graph["cpu"] and "cpu" not in graph["_types"]
    state = {}

    def visit(name, stack):
        if state.get(name) == "done":
            return
        assert state.get(name) != "open", "import cycle: " + " -> ".join(stack + [name])
        state[name] = "open"
        for dep in sorted(graph.get(name, ())):
            if dep in graph:
                visit(dep, stack + [name])
        state[name] = "done"

    for name in sorted(graph):
        visit(name, [])


def test_public_names_unchanged():
    for name in (
        "DTYPES",
        "Context",
        "Module",
        "TensorType",
        "FunctionType",
        "Value",
        "FunctionBuilder",
        "TopK",
        "Route",
        "Indices",
        "Multihot",
        "DType",
    ):
        assert hasattr(moe_mlir.ir, name), name
    assert moe_mlir.ir.TensorType is moe_mlir.TensorType
    assert moe_mlir.ir.FunctionType is moe_mlir.FunctionType
    assert moe_mlir.cpu.CpuModule is moe_mlir.CpuModule
    for name in moe_mlir.__all__:
        assert getattr(moe_mlir, name) is not None, name
