"""``annotation push --kind duplicates`` with nothing to push: the reason and the next step,
and no empty project made on the server."""

from __future__ import annotations

from annotation.push import push
from builder.catalog import Catalog
from tests.annotation.fakes import fake_connection


def test_no_dedup_groups_says_why_and_what_next(tmp_path):
    conn, client = fake_connection({1: "a@example.com"})
    client.projects.create = lambda **kw: (_ for _ in ()).throw(AssertionError("made"))
    with Catalog.open(tmp_path / "w") as cat:
        rep = push(cat, conn, "duplicates", images="http://127.0.0.1:8081")
        assert rep.summary() == (
            "push duplicates: nothing to push: the catalog has no dedup groups: run python -m "
            "builder.image_dedup first (no near-duplicates found is fine too: go on with "
            "python -m builder.tagging)")
        with cat.tx() as con:
            con.execute("INSERT INTO dedup_groups (concept, status, evidence_json) VALUES "
                        "('food', 'auto', '[]')")
        rep = push(cat, conn, "duplicates", images="http://127.0.0.1:8081")
    assert rep.summary() == (
        "push duplicates: nothing to push: no group with status needs_review (groups: auto 1); "
        "push others with --group-status STATUS, or go on with python -m builder.tagging")
