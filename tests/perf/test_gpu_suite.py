"""The GPU script runs end to end at tiny shapes on the CPU (its device run is then only a
matter of shapes)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("open_clip")
pytest.importorskip("transformers")


@pytest.mark.slow
def test_gpu_suite_tiny_runs_and_projects(tmp_path, capsys):
    from tests.perf import gpu_suite

    out = tmp_path / "suite.json"
    assert gpu_suite.main(["--tiny", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["tiny"] and res["device"] == "cpu"
    fams = res["families"]
    for fam in ("openclip-L14", "xlmr-large", "bert-base-zh", "qwen2-vl-2b", "qwen2.5-vl-7b"):
        assert fams[fam]["texts_per_s"] > 0
    assert fams["qwen2-vl-7b"]["images_per_s"] > 0
    proj = res["projection"]
    assert set(proj["hours_per_model"]) == set(gpu_suite.PAPER) and len(gpu_suite.PAPER) == 10
    assert proj["items"] == {"rq1_images": 3600, "rq1_texts": 261375, "rq2_images": 11746,
                             "rq2_texts": 1989}  # distinct (concept, country) queries
    # each model's hours are its items over its own families' measured rates, plus its search
    items = proj["items"]
    images = items["rq1_images"] + items["rq2_images"]
    texts = items["rq1_texts"] + items["rq2_texts"]
    search = res["search"]
    for model, (tfam, ifam, multi) in gpu_suite.PAPER.items():
        seconds = (images / fams[ifam]["images_per_s"] + texts / fams[tfam]["texts_per_s"]
                   + (search["maxsim_s"] if multi else search["single_vector_s"]))
        assert proj["hours_per_model"][model] == pytest.approx(seconds / 3600, abs=1e-4), model
    assert len({gpu_suite.PAPER[m][:2] for m in gpu_suite.PAPER}) > 1  # not one rate for all
    assert proj["total_hours"] == pytest.approx(sum(proj["hours_per_model"].values()), abs=0.01)
    assert "projected H200-hours" in capsys.readouterr().out
