"""Statuses are bound, not spelled: no SQL outside the migrations quotes a status value (a
typo there would match nothing, silently); the queries take the enums of
``builder.statuses`` as parameters."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from builder.statuses import COLUMNS

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("builder", "annotation", "triplets", "pipeline", "benchmark", "core")
VALUES = {m.value for enum in COLUMNS.values() for m in enum}
SQL = re.compile(r"\b(SELECT|UPDATE|INSERT|DELETE|WHERE|AND|OR|SET|CASE|THEN|IN)\b")


def status_literals(source: str) -> list[tuple[int, str]]:
    """(line, value) of every quoted status value in SQL text of ``source`` (docstrings
    aside; f-strings by their literal parts)."""
    tree = ast.parse(source)
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docs and SQL.search(node.value)):
            found += [(node.lineno, v) for v in re.findall(r"'(\w+)'", node.value)
                      if v in VALUES]
    return found


def test_no_sql_outside_the_migrations_spells_a_status():
    bad = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "migrations" in path.relative_to(REPO).parts:
                continue
            if hits := status_literals(path.read_text(encoding="utf-8")):
                bad[path.relative_to(REPO).as_posix()] = hits
    assert bad == {}


def test_the_check_finds_a_spelled_status_and_spares_parameters():
    source = '''
def f(cat, kept):
    """Rows with status='kept' (a docstring may say so)."""
    cat.query("SELECT name FROM concepts WHERE status='kept'")
    cat.query(f"UPDATE items SET status='pendng' WHERE x IN ({kept})")
    cat.query(f"UPDATE items SET status='pending' WHERE x IN ({kept})")
    cat.query("SELECT name FROM concepts WHERE status=?", (kept,))
    print('kept')
'''
    assert status_literals(source) == [(4, "kept"), (6, "pending")]
