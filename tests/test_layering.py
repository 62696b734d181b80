"""The package's structure (docs/architecture.md), checked on the source: imports point down the
layers, no import circle, no storeloop import hidden in a function unless it defers matplotlib on
purpose, and only formats/ (and the results store) opens an input file."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "storeloop"

# bottom -> top: a module imports from its own layer and the layers below it only
LAYERS = [
    ("ir", ("storeloop.errors", "storeloop.ir")),
    ("formats base", ("storeloop.formats", "storeloop.formats.yamlio", "storeloop.formats.validate",
                      "storeloop.formats.quantities", "storeloop.formats.einsum", "storeloop.formats.timeloop.schema")),
    ("engines", ("storeloop.model", "storeloop.energy", "storeloop.mapper", "storeloop.workloads")),
    ("formats", ("storeloop.formats.*",)),
    ("system, sweeps", ("storeloop.system", "storeloop.sweeps", "storeloop.crosscheck")),
    ("plots", ("storeloop.plots",)),
    ("api", ("storeloop",)),
    ("studies", ("storeloop.studies",)),
    ("cli", ("storeloop.cli",)),
]


def _layer(module: str) -> int:
    """The layer of ``module``: the one whose most specific prefix names it."""
    best, length = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            hit = module.startswith(p[:-1]) if p.endswith("*") else (module == p or module.startswith(p + "."))
            if hit and len(p) > length:
                best, length = i, len(p)
    assert best is not None, module
    return best


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _imports(path: Path):
    """(node, imported module, at module level) of every ``from storeloop... import`` in the file that
    runs (those under ``if TYPE_CHECKING:`` are type hints for editors and are left out)."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    hints = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
             for n in ast.walk(block)}
    for node in ast.walk(tree):
        if id(node) in hints:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("storeloop"):
            yield node, node.module, id(node) in top
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("storeloop"):
                    yield node, alias.name, id(node) in top


def test_imports_point_down_the_layers():
    upward = []
    for name, path in _modules().items():
        for node, target, _ in _imports(path):
            if _layer(target) > _layer(name):
                upward.append(f"{path.relative_to(SRC)}:{node.lineno}: {name} ({LAYERS[_layer(name)][0]}) imports "
                              f"{target} ({LAYERS[_layer(target)][0]})")
    assert not upward, "\n".join(upward)


def test_no_import_circle():
    mods = _modules()
    edges = {}
    for name, path in mods.items():
        out = set()
        for node, target, _ in _imports(path):
            names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
            for t in [f"{target}.{n}" for n in names if f"{target}.{n}" in mods] or [target]:
                while t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t != name and t in mods:
                    out.add(t)
        edges[name] = out
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        stack.append(v)
        for w in sorted(edges[v]):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(mods):
        if v not in state:
            circle = visit(v)
            assert circle is None, " -> ".join(circle)


def test_storeloop_imports_sit_at_the_top_unless_deferred_on_purpose():
    """The lazy public API (``import storeloop`` is instant) and imports that defer matplotlib,
    each saying so, are the only storeloop imports inside functions."""
    hidden = []
    for name, path in _modules().items():
        if name == "storeloop":
            continue
        lines = path.read_text().splitlines()
        for node, target, at_top in _imports(path):
            if not at_top and "deferred:" not in lines[node.lineno - 1]:
                hidden.append(f"{path.relative_to(SRC)}:{node.lineno}: {ast.unparse(node)}")
    assert not hidden, "\n".join(hidden)


def test_only_the_formats_open_input_files():
    """Reading YAML or a file's text happens in formats/; elsewhere only outputs are written (the
    results store, the energy cache and the reproduction's own CPU measurement read back what
    storeloop wrote)."""
    reads = re.compile(r"yaml\.(safe_)?load\(|\.read_text\(|\bopen\([^)]*\)")
    allowed = {"storeloop.sweeps.store", "storeloop.energy", "storeloop.studies.reproduce"}
    found = []
    for name, path in _modules().items():
        if name.startswith("storeloop.formats") or name in allowed:
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if reads.search(line) and "os.open(os.devnull" not in line:
                found.append(f"{path.relative_to(SRC)}:{i}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_command_line_calls_the_public_api():
    """``storeloop``'s subcommands use what a notebook can use: the API in ``storeloop/__init__.py``,
    the error and object types (``errors``, ``ir``), the workload generators and the studies."""
    allowed = ("storeloop", "storeloop.errors", "storeloop.ir", "storeloop.workloads", "storeloop.studies",
               "storeloop.cli")
    found = []
    for name, path in _modules().items():
        if not name.startswith("storeloop.cli"):
            continue
        for node, target, _ in _imports(path):
            if not any(target == a or target.startswith(a + ".") and a != "storeloop" for a in allowed):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "\n".join(found)
