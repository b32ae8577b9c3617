"""Real runs for the gallery tests: two planted models (culture weight 0 and 2) on a planted
release (3xcm, 3xcm-i2i) and two planted XM3600 models, through ``benchmark run``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from benchmark.cli import main
from tests.benchmark.synth import PlantedModel, write_planted_release
from tests.benchmark.test_xm3600_task import make_official

WEIGHTS = {"planted-a": 0.0, "planted-b": 1.0}


class PlantedA(PlantedModel):
    def __init__(self, name: str = "planted-a", **kw: Any):
        super().__init__(name=name, **kw)


class PlantedB(PlantedModel):
    def __init__(self, name: str = "planted-b", **kw: Any):
        super().__init__(name=name, **kw)


def make_runs(root: Path, xm3600: bool = True) -> Path:
    """``root/results``: planted-a and planted-b on 3xcm and 3xcm-i2i (+ xm3600-i2t)."""
    write_planted_release(root / "data")
    old = os.environ.get("XCM_TEST_W")
    try:
        for cls, name in (("PlantedA", "planted-a"), ("PlantedB", "planted-b")):
            os.environ["XCM_TEST_W"] = str(WEIGHTS[name])
            assert main(["run", "--model", f"tests.benchmark.gallery_runs:{cls}", "--task",
                         "3xcm", "--task", "3xcm-i2i", "--dataset", str(root / "data"),
                         "--output-dir", str(root / "results"), "--cache-dir",
                         str(root / "cache"), "-q"]) == 0
    finally:
        if old is None:
            os.environ.pop("XCM_TEST_W", None)
        else:
            os.environ["XCM_TEST_W"] = old
    if xm3600:
        xm = make_official(root / "xm")
        for name in ("Unbiased", "Extreme"):
            assert main(["run", "--model", f"tests.benchmark.test_xm3600_task:Planted{name}",
                         "--task", "xm3600-i2t", "--xm3600", str(xm), "--output-dir",
                         str(root / "results"), "--cache-dir", str(root / "cache"),
                         "--k", "1,10", "-q"]) == 0
    return root / "results"


def outcomes(results: Path, model: str, task: str) -> pd.DataFrame:
    """The outcomes file a run wrote, as the results JSON names it."""
    rec = json.loads((results / model / f"{task}.json").read_text())["outcomes"]
    return pd.read_parquet(results / model / rec["file"])


def read_js(path: Path) -> Any:
    """The JSON a gallery data script assigns (``window.X=BODY;`` or
    ``window.X=window.X||{};window.X["key"]=BODY;``)."""
    text = path.read_text(encoding="utf-8")
    dec = json.JSONDecoder()
    var, rest = text.split("=", 1)
    if rest.startswith(f"{var}||{{}};"):
        rest = rest.split(";", 1)[1][len(var) + 1:]
        _key, end = dec.raw_decode(rest)
        rest = rest[end + 2:]  # past ']='
    return dec.raw_decode(rest)[0]
