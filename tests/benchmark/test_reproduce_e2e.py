"""``python -m benchmark reproduce`` end to end on miniatures with tiny models: the hash model
and a tiny random-init Chinese-CLIP standing in for ``chinese-clip-l14`` (through
``$XCM_WEIGHTS_DIR``), so the paper's rows fill with numbers that mean nothing, and the report
says so.

Two data sets: the generated miniatures of the published layouts (piece A's
``tests/benchmark/published.py``: skipped until it is there) and, always, the bundled synthetic
release with an XM3600 in the official layout.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from benchmark.cli import main
from core import datatables
from tests.benchmark.models.tiny import tiny_chinese_clip_dir
from tests.benchmark.reproduce_data import write_official_xm3600

try:
    from tests.benchmark.published import write_published_3xcm, write_published_xm3600
except ImportError:  # piece A's miniatures of the published layouts are not on this branch
    write_published_3xcm = write_published_xm3600 = None

NEEDS_A = "needs tests/benchmark/published.py (piece A)"


def bundled(root: Path) -> tuple[str, str]:
    return str(datatables.data_dir() / "synthetic-3xcm"), str(write_official_xm3600(root / "xm"))


def published(root: Path) -> tuple[str, str]:
    if write_published_3xcm is None:
        pytest.skip(NEEDS_A)
    return (str(write_published_3xcm(root / "xcm", n_triplets=40)),
            str(write_published_xm3600(root / "xm", n_images=24)))


@pytest.mark.parametrize("datasets", [bundled, published], ids=["bundled", "published"])
def test_reproduce_end_to_end(tmp_path, monkeypatch, capsys, datasets):
    xcm, xm = datasets(tmp_path / "data")
    weights = tmp_path / "weights"
    tiny_chinese_clip_dir(weights / "OFA-Sys" / "chinese-clip-vit-large-patch14")
    monkeypatch.setenv("XCM_WEIGHTS_DIR", str(weights))
    out = tmp_path / "repro"
    argv = ["reproduce", "--output-dir", str(out), "--models", "hash,chinese-clip-l14",
            "--xcm-dataset", xcm, "--xm3600-dataset", xm, "--cache-dir", str(tmp_path / "c"),
            "--bootstrap", "20"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert "ran 8, up to date 0, failed 0" in first
    for task in ("3xcm", "3xcm-i2i", "analysis", "xm3600-i2t"):
        assert (out / "results" / "chinese-clip-l14" / f"{task}.json").is_file()

    md = (out / "paper-comparison.md").read_text(encoding="utf-8")
    banner = md.split("## Models")[0]
    assert "mean nothing against the paper" in banner and "chinese-clip-l14" in banner
    assert "Models with no published numbers: hash." in md
    t2 = re.findall(r"^\| Chinese-CLIP-L/14 † \| (M_sem_pct|SP) \| ([^|]+) \|", md, re.M)
    assert len(t2) == 2 and all(v.strip() != "missing" for _, v in t2)
    assert "| CLIP-L/14 | SP | missing | 0.80 |" in md  # not run: missing, never 0

    with (out / "paper-comparison.csv").open(newline="", encoding="utf-8") as f:
        cells = list(csv.DictReader(f))
    ours = {(r["section"], r["row"], r["column"]): r for r in cells}
    for key in (("table1", "Chinese-CLIP-L/14", "ndcg@10"), ("table5", "Chinese-CLIP-L/14",
                                                              "lbkl@99"),
                ("table11", "Chinese-CLIP-L/14 · M_cul_pct", "THA"),
                ("table8", "Chinese-CLIP-L/14 · TS", "CHN"),
                # both engines on the same embeddings: the authors' chromadb is the run's,
                # exact the other, and their difference
                ("table1-engines", "Chinese-CLIP-L/14 · exact", "accuracy@5"),
                ("table1-engines", "Chinese-CLIP-L/14 · chromadb − exact", "ndcg@10"),
                ("table5-engines", "Chinese-CLIP-L/14 · chromadb − exact", "lbkl@99")):
        assert ours[key]["ours"] != "", key
    exps = {r["row"] for r in cells if r["section"] == "authors-overall"}
    assert exps == {"chinese-clip-l14 · text-to-image", "chinese-clip-l14 · image-to-image"}

    page = (out / "paper-comparison.html").read_text(encoding="utf-8")
    assert "<script" not in page and not re.search(r"(src|href)=\"https?://", page)
    assert 'class="banner"' in page

    assert main(argv) == 0  # resumed: nothing runs again
    assert "ran 0, up to date 8, failed 0" in capsys.readouterr().out
