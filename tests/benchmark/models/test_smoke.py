"""``python -m benchmark smoke`` on a tiny open_clip model (the script the GPU machines run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark import smoke
from benchmark.cli import main
from tests.benchmark.models.tiny import tiny_openclip_dir

pytest.importorskip("open_clip")


def test_smoke_runs_and_reports(tmp_path, capsys):
    d = tiny_openclip_dir(tmp_path / "clip")
    out = tmp_path / "smoke.json"
    rc = main(["smoke", "--model", f"open_clip:local-dir:{d}", "--device", "cpu", "--triplets", "4",
                     "--image-size", "64x48", "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "images/s" in text and "texts/s" in text
    res = json.loads(out.read_text())
    assert res["triplets"] == 4 and res["query_shape"] == [4, 32]
    # the rates are the counts over the timed seconds (4 texts, 12 images); the seconds are
    # rounded to 4 decimals, so the rate lies between the counts over their rounding bounds
    for n, rate, secs in ((4, "texts_per_second", "text_seconds"),
                          (12, "images_per_second", "image_seconds")):
        s = res[secs]
        assert n / (s + 5e-5) - 1e-3 <= res[rate] <= (n / (s - 5e-5) if s > 5e-5 else 1e12)
    for side in ("texts", "images"):
        assert res["norms"][side] == pytest.approx([1.0, 1.0], abs=1e-4)
    # the winners are those of an independent scoring of the same inputs with the same weights
    import numpy as np

    from benchmark.registry import load_model

    adapter = load_model(f"open_clip:local-dir:{d}", device="cpu")
    q = np.asarray(adapter.encode_texts(smoke.queries(4), role="query", progress=False))
    imgs = np.asarray(adapter.encode_images(smoke.synthetic_images(12, 64, 48), role="document",
                                            progress=False))
    best = np.einsum("td,tkd->tk", q, imgs.reshape(4, 3, -1)).argmax(axis=1)
    expected = np.bincount(best, minlength=3)
    assert [res["wins"][k] for k in ("semantic", "cultural", "non_relevant")] == expected.tolist()


def test_smoke_random_architecture_needs_no_weights(tmp_path):
    from tests.benchmark.models.tiny import register_tiny_openclip_config

    name = register_tiny_openclip_config(tmp_path)
    res = smoke.run_smoke(f"open_clip:{name}/random", triplets=2, device="cpu", image_size=(40, 40))
    assert res["spec"]["revision"] == "random-init"


def test_smoke_bad_input_exits_2(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["smoke", "--model", "no-such-model"]) == 2
    assert "unknown model" in capsys.readouterr().err
    assert main(["smoke", "--model", "clip-l14", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "XCM_WEIGHTS_DIR" in err
    assert main(["smoke", "--model", "hash", "--image-size", "big"]) == 2


def test_the_former_entry_point_fails_loudly_and_names_the_command():
    """``python -m benchmark.smoke`` (before the one CLI) must not exit 0 having run nothing."""
    root = Path(__file__).resolve().parents[3]  # -m puts the working directory on sys.path
    r = subprocess.run([sys.executable, "-m", "benchmark.smoke", "--model", "hash"], cwd=root,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == ("error: `python -m benchmark.smoke` is now `python -m benchmark smoke` "
                        "(same flags)\n")
