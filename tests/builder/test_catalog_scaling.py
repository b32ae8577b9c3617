"""The catalog work of every stage grows with the pool, not faster (issue 27).

The same generated world (``tests/perf/builder_scale_world.py``) at ``n`` and ``2n`` images
goes through the real stages with every catalog connection traced
(``Connection.set_trace_callback``). Two checks per stage:

- the SQL statements per image stay constant when the pool doubles (a loop that moved from
  one batched statement to one query per image, per group or per concept shows here);
- no statement the stage repeats (per concept, per group, per image) scans a large table:
  its ``EXPLAIN QUERY PLAN`` is a search on an index, so each is O(log n) and the stage
  O(n log n). A missing index (the items of a dedup group, the groups of a concept) fails.

``tests/perf/bench_builder_scale.py`` measures the same stages in seconds and megabytes.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tests.perf import builder_scale_world as world

SMALL = 800
#: Tables that stay small whatever the pool (one row per run, project, job or reviewer).
SMALL_TABLES = {"stage_runs", "ls_projects", "tag_batch_jobs",
                "ls_reviewers", "sqlite_master", "json_each", "concepts"}
_LITERAL = re.compile(r"'(?:[^']|'')*'|\b\d+(?:\.\d+)?\b")
_LIST = re.compile(r"\?(?:\s*,\s*\?)+")


def normalise(sql: str) -> str:
    """The statement with its literals as ``?`` (the trace callback expands parameters)."""
    return _LIST.sub("?..", _LITERAL.sub("?", " ".join(sql.split())))


class Trace:
    """Statements of every catalog connection opened while installed, by normalised text."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.example: dict[str, str] = {}

    def __call__(self, sql: str) -> None:
        key = normalise(sql)
        self.counts[key] += 1
        self.example.setdefault(key, sql)


def _stages(work: str, root: Path) -> list[tuple[str, object]]:
    from builder.crawl.stage import main as crawl
    from builder.image_dedup import main as dedup
    from builder.queries import main as queries
    from builder.tagging.stage import main as tagging
    from triplets.cli import main as trip

    w, off = ["--workdir", work], ["--llm", "offline", "--llm-rpm", "0"]
    return [
        ("queries", lambda: queries([*w, "--countries", "all", *off])),
        ("crawl", lambda: crawl([*w, "--countries", "all", "--search", f"folder:{root / 'world'}"])),
        ("image_dedup", lambda: dedup([*w, "--model", "none", "--phash-distance", "4"])),
        ("tagging", lambda: tagging([*w, "--images-per-request", "8", *off])),
        ("review_push", lambda: world.review_push(work)),
        ("review_pull", lambda: world.review_pull(work)),
        ("triplets", lambda: trip(["sample", *w, "--seed", "0"])),
        ("validate", lambda: trip(["validate", *w])),
    ]


def run_world(root: Path, n: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, Trace]:
    """Build the ``n``-image world under ``root`` and trace every stage on it."""
    import builder.catalog as bc
    from core import datatables

    n_countries, n_concepts = world.shape(n, 10)
    concepts = [f"concept {i:04d}" for i in range(n_concepts)]
    data = world.data_dir(root / "data", n_countries, concepts)
    monkeypatch.setenv("XCM_DATA_DIR", str(data))
    codes = [c.code for c in datatables.countries()]
    world.make_world(root / "world", concepts, codes, n, 10)
    traces: dict[str, Trace] = {}
    current: list[Trace] = []
    orig = bc.connect

    def traced(path: Path) -> sqlite3.Connection:
        con = orig(path)
        con.set_trace_callback(lambda sql: current[-1](sql) if current else None)
        return con

    monkeypatch.setattr(bc, "connect", traced)
    for name, call in _stages(str(root / "work"), root):
        current.append(traces.setdefault(name, Trace()))
        try:
            assert call() == 0, f"stage {name} failed"
        finally:
            current.pop()
    monkeypatch.setattr(bc, "connect", orig)
    return traces


def scans(catalog: Path, trace: Trace, repeated: int) -> list[str]:
    """Statements run at least ``repeated`` times whose plan scans a table that grows."""
    con = sqlite3.connect(catalog)
    bad = []
    try:
        for key, n in trace.counts.items():
            if n < repeated or not key.lstrip().upper().startswith(
                    ("SELECT", "UPDATE", "DELETE", "INSERT", "WITH")):
                continue
            plan = con.execute("EXPLAIN QUERY PLAN " + trace.example[key]).fetchall()
            for row in plan:
                m = re.match(r"SCAN (\w+)", row[3])
                if m and m.group(1) not in SMALL_TABLES and "CONSTANT" not in row[3]:
                    bad.append(f"{n}x {key[:160]} -> {row[3]}")
    finally:
        con.close()
    return bad


@pytest.fixture(scope="module")
def traced_worlds(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[Path, dict]]:
    mp = pytest.MonkeyPatch()
    try:
        out = {}
        for n in (SMALL, 2 * SMALL):
            root = tmp_path_factory.mktemp(f"scale{n}")
            out[n] = (root, run_world(root, n, mp))
        return out
    finally:
        mp.undo()


STAGES = ["queries", "crawl", "image_dedup", "tagging", "review_push", "review_pull",
          "triplets", "validate"]


@pytest.mark.parametrize("stage", STAGES)
def test_statements_per_image_stay_constant_when_the_pool_doubles(traced_worlds, stage):
    small, large = (sum(traced_worlds[n][1][stage].counts.values()) / n
                    for n in (SMALL, 2 * SMALL))
    assert large <= small * 1.1 + 0.05, (
        f"{stage}: {small:.2f} SQL statements per image at {SMALL} images, {large:.2f} at "
        f"{2 * SMALL}: a per-item loop grows with the pool")


@pytest.mark.parametrize("stage", STAGES)
def test_repeated_statements_search_an_index(traced_worlds, stage):
    root, traces = traced_worlds[2 * SMALL]
    bad = scans(root / "work" / "catalog.sqlite", traces[stage], repeated=4)
    assert not bad, f"{stage}: repeated statements scan a whole table:\n" + "\n".join(bad)


def test_the_trace_sees_the_stages(traced_worlds):
    """The counts are of the real stages: the crawl wrote one items row per image."""
    root, traces = traced_worlds[SMALL]
    per = defaultdict(int)
    for key, n in traces["crawl"].counts.items():
        if key.startswith("INSERT OR IGNORE INTO items"):
            per["items"] += n
    con = sqlite3.connect(root / "work" / "catalog.sqlite")
    try:
        assert con.execute("SELECT COUNT(*) FROM items").fetchone()[0] == SMALL
    finally:
        con.close()
    assert per["items"] > 0
