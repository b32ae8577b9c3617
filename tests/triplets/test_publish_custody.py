"""``triplets publish`` never deletes a Hub file it did not write (issue 22): it leaves
``.3xcm-written.json`` on the repo (what it wrote, the release's fingerprint) and deletes only
files that marker names; without our marker nothing is deleted."""

from __future__ import annotations

import json
import logging

import pytest

from core.files import OWNER_MARKER, read_marker
from tests.fakes.hub import FakeHub, Repo
from tests.triplets.test_export import _hub_env, release
from triplets import cli
from triplets.export import export_release
from triplets.publish import HUB_KIND, release_files

__all__ = ["release"]  # the fixture

pytestmark = pytest.mark.integration
USER = {"notes.md": b"my notes\n", "results/run1.json": b'{"SP": 0.5}\n',
        "images/old-99999.parquet": b"a shard of a release we did not publish"}


def _publish(out) -> int:
    return cli.main(["publish", "--out", str(out), "--repo-id", "org/3xcm"])


def test_a_repo_without_our_marker_loses_nothing_and_gets_the_marker(
        release, tmp_path, monkeypatch, caplog, capsys):
    wd, _ = release
    out = tmp_path / "rel"
    total = sum(p.stat().st_size for p in wd.images_dir.rglob("*.png"))
    export_release(wd, out, shard_bytes=total // 3 + 1)
    first = release_files(out)
    with FakeHub() as hub:
        _hub_env(monkeypatch, hub)
        hub.repos["org/3xcm"] = Repo(files=dict(USER))  # a user's repo, never published by us
        caplog.set_level(logging.WARNING)
        assert _publish(out) == 0
        files = hub.files("org/3xcm")
        assert all(files[p] == data for p, data in USER.items())  # nothing of theirs deleted
        assert set(files) == {*USER, *first, OWNER_MARKER}
        assert "keeping 3 file(s) this release does not have (the repo has no marker" in \
            caplog.text
        marker = json.loads(files[OWNER_MARKER])
        assert marker["kind"] == HUB_KIND and sorted(marker["files"]) == first
        assert marker["fingerprint"] == read_marker(out)["fingerprint"]
        # the next release has one image shard: our old shards go, the user's files stay
        export_release(wd, out, shard_bytes=1 << 40)
        second = release_files(out)
        assert _publish(out) == 0
        files = hub.files("org/3xcm")
        deleted = sorted(p for op, p in hub.commits("org/3xcm")[-1]["ops"]
                         if op == "deletedFile")
    assert set(files) == {*USER, *second, OWNER_MARKER}
    assert deleted == sorted(set(first) - set(second))
    assert sorted(json.loads(files[OWNER_MARKER])["files"]) == second
    capsys.readouterr()


def test_a_marker_not_ours_deletes_nothing(release, tmp_path, monkeypatch):
    wd, _ = release
    out = tmp_path / "rel"
    export_release(wd, out, shard_bytes=1 << 40)
    foreign = json.dumps({"kind": "something else", "files": {"notes.md": "x"}}).encode()
    with FakeHub() as hub:
        _hub_env(monkeypatch, hub)
        hub.repos["org/3xcm"] = Repo(files={**USER, OWNER_MARKER: foreign})
        assert _publish(out) == 0
        files = hub.files("org/3xcm")
    assert all(files[p] == data for p, data in USER.items())
    assert json.loads(files[OWNER_MARKER])["kind"] == HUB_KIND
