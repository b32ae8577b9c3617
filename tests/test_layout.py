"""The import structure of the package: layers, no cycles, and a core every package stands on.

Every import of every module counts, at module level or inside a function. Layers, low to high:
core < benchmark < builder < annotation, triplets < pipeline (annotation and triplets may import
builder, not each other); nothing of the package imports tests; outside benchmark/ only the
evaluator's own API is imported from it, never a general utility (those live in core/).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYER = {"core": 0, "benchmark": 1, "builder": 2, "annotation": 3, "triplets": 3, "pipeline": 4}
#: what a package outside benchmark/ may take from it: the evaluator itself (models and their
#: cache, the CLI, results, report, metrics), never arrays, files or text helpers
EVALUATOR_API = {"benchmark.cache", "benchmark.cli", "benchmark.registry", "benchmark.results",
                 "benchmark.report.build", "benchmark.metrics.association",
                 "benchmark.metrics.clustered",
                 "benchmark.models.hash", "benchmark.models.hub"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of our packages: dotted name -> file."""
    return {_module_name(p): p for top in LAYER for p in sorted((ROOT / top).rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The most specific module of ours that ``name`` (a dotted import path) names."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> set[str]:
    """The modules of ours (and ``tests...``) that ``module`` imports anywhere in its file."""
    known = modules()
    path = known[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                     for a in node.names]
        for n in names:
            if n.split(".")[0] == "tests":
                out.add(n)
            elif (hit := _resolve(n, known)) and hit != module:
                out.add(hit)
    return out


@cache
def graph() -> dict[str, frozenset[str]]:
    return {m: frozenset(imports_of(m)) for m in modules()}


def cycles(g: dict[str, frozenset[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in g:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def _top(m: str) -> str:
    return m.split(".")[0]


def test_the_walker_sees_every_kind_of_import():
    """Function-level, relative and ``from package import module`` imports are all edges."""
    g = graph()
    assert "benchmark.models.conventions" in g["benchmark.registry"]  # inside a function
    assert "core.devices" in g["benchmark.embeddings"]  # from X import name
    assert "benchmark.zoo" in g["benchmark.registry"]  # from package import module
    assert len(g) > 150
    toy = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}),
           "d": frozenset({"a"})}
    assert cycles(toy) == [["a", "b", "c"]]


def test_no_import_cycle():
    found = cycles(graph())
    assert not found, "import cycles (function-level imports count): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_no_upward_import_and_nothing_imports_tests():
    bad = []
    for a, deps in graph().items():
        for b in deps:
            if _top(b) == "tests":
                bad.append(f"{a} -> {b} (tests)")
            elif LAYER[_top(b)] > LAYER[_top(a)] or (
                    LAYER[_top(b)] == LAYER[_top(a)] and _top(b) != _top(a)):
                bad.append(f"{a} -> {b}")
    assert not bad, "imports against the layers core < benchmark < builder < annotation, " \
                    "triplets < pipeline: " + "; ".join(sorted(bad))


def test_outside_the_evaluator_no_general_utility_comes_from_it():
    bad = sorted(f"{a} -> {b}" for a, deps in graph().items() if _top(a) != "benchmark"
                 for b in deps if _top(b) == "benchmark" and b not in EVALUATOR_API)
    assert not bad, "general utilities belong in core/: " + "; ".join(bad)


def _top_level_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(names a module defines, names it only imports) at its top level."""
    defined: set[str] = set()
    imported: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom | ast.Import):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            defined |= {n.name if not isinstance(n, ast.Name) else n.id for n in ast.walk(node)
                        if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.Name)
                        and (not isinstance(n, ast.Name) or isinstance(n.ctx, ast.Store))}
    return defined, imported - defined


def test_no_name_is_taken_from_a_module_that_only_imports_it():
    """benchmark/ and core/ re-export nothing: every name is imported from its home module."""
    known = modules()
    names = {m: _top_level_names(ast.parse(p.read_text(encoding="utf-8")))
             for m, p in known.items() if _top(m) in ("benchmark", "core")}
    files = [*known.values(), *sorted((ROOT / "tests").rglob("*.py"))]
    bad = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in names:
                bad += [f"{path.relative_to(ROOT)}: {a.name} from {node.module}"
                        for a in node.names if a.name in names[node.module][1]
                        and f"{node.module}.{a.name}" not in known]
    assert not bad, "re-exported names: " + "; ".join(sorted(bad))


def test_a_missing_module_of_any_package_of_ours_is_a_bug_not_a_missing_extra():
    """core.clikit tells a missing third-party library (install its extra) from a missing
    module of ours (a bug): every package here is ours."""
    from core import clikit

    assert set(LAYER) | {"tests"} <= clikit.OUR_PACKAGES
    for top in LAYER:
        assert clikit.missing_library(ModuleNotFoundError("x", name=f"{top}.gone"), "x") is None
