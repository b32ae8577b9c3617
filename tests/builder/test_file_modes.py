"""File modes under the user's umask (issue 15): what a user shares (exports) is created with
the umask (022 -> 0644); the work dir's own state (catalog, LLM cache, stored images) is
private, 0600, whatever the umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from PIL import Image

from builder import concept_dedup, concepts
from builder.catalog import Catalog
from builder.crawl import stage as crawl
from builder.llm.cache import LLMCache
from pipeline import cli as pipeline_cli


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_exports_follow_the_umask_and_the_work_dir_state_is_private(tmp_path, umask_022):
    photos = tmp_path / "photos" / "food" / "THA"
    photos.mkdir(parents=True)
    Image.new("RGB", (16, 12), (1, 2, 3)).save(photos / "a.png")
    wd = tmp_path / "w"
    assert crawl.main(["--workdir", str(wd), "--search", f"folder:{tmp_path / 'photos'}"]) == 0
    urls = tmp_path / "pending.parquet"
    assert crawl.main(["--workdir", str(wd), "--search", f"folder:{tmp_path / 'photos'}",
                       "--export-urls", str(urls)]) == 0
    out = tmp_path / "items.csv"
    assert pipeline_cli.main(["--workdir", str(wd), "export", "items", "--out", str(out)]) == 0
    assert concepts.main(["--workdir", str(wd), "--llm", "offline", "--countries", "THA"]) == 0
    assert concept_dedup.main(["--workdir", str(wd), "--embedder", "hash"]) == 0
    LLMCache(wd / "cache" / "llm.sqlite").close()
    for shared in (out, urls, wd / "exports" / "concept_merges.csv"):
        assert mode(shared) == 0o644, shared
    (image,) = (wd / "images").glob("*/*.png")
    for private in (image, wd / "catalog.sqlite", wd / "cache" / "llm.sqlite"):
        assert mode(private) == 0o600, private
    with Catalog.open(wd):
        for side in wd.glob("catalog.sqlite-*"):
            assert mode(side) == 0o600, side
