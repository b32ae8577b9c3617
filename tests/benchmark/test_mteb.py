"""mteb in both directions, on a tiny CLIP registered in mteb's registry (nothing downloads).

- ``benchmark run --model mteb:NAME`` loads the model through mteb's ModelMeta and records it;
- it agrees with our own adapter of the same checkpoint (``hf_clip:DIR``);
- ``mteb.evaluate`` on our three tasks gives our evaluator's numbers exactly (in memory) and
  to mteb's 6 decimals in its JSON; ``python -m benchmark.mteb.run run`` is mteb's CLI with
  our tasks; ``benchmark report`` reads mteb's results beside ours.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mteb")

from benchmark.cli import main  # noqa: E402
from tests.benchmark.models.tiny import tiny_hf_clip_dir  # noqa: E402
from tests.benchmark.mteb_helpers import TINY_NAME, TINY_REVISION, register_tiny  # noqa: E402
from tests.benchmark.test_xm3600_task import make_official  # noqa: E402

RELEASE = str(Path(__file__).resolve().parents[2] / "data" / "synthetic-3xcm")
SLUG = "mteb_xcm3-test_tiny-clip"


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory) -> Path:
    return tiny_hf_clip_dir(tmp_path_factory.mktemp("tiny") / "clip")


@pytest.fixture
def tiny(monkeypatch, clip_dir):
    return register_tiny(monkeypatch, clip_dir)


def ours(tmp_path: Path, model: str, task: str, *extra: str, out: Path | None = None) -> dict:
    out = out or tmp_path / f"out-{task}-{model.replace('/', '_').replace(':', '_')[-20:]}"
    rc = main(["run", "--model", model, "--task", task, "--dataset", RELEASE, "--output-dir",
               str(out), "--cache-dir", str(tmp_path / "cache"), "--device", "cpu", *extra])
    assert rc == 0
    (f,) = out.glob(f"*/{task}.json")
    return json.loads(f.read_text())


def test_run_mteb_model_records_its_meta(tmp_path, tiny):
    r = ours(tmp_path, f"mteb:{TINY_NAME}", "3xcm")
    assert r["model"]["name"] == f"mteb:{TINY_NAME}" and r["model"]["family"] == "mteb"
    assert r["model"]["revision"] == TINY_REVISION
    rec = r["model"]["extra"]["mteb"]
    assert (rec["name"], rec["revision"], rec["n_parameters"], rec["embed_dim"], rec["license"],
            rec["languages"], rec["similarity_fn_name"]) == (
        TINY_NAME, TINY_REVISION, 12345, 16, "mit", ["eng-Latn"], "cosine")
    conv = r["settings"]["conventions"]
    assert conv["query"]["prompt_type"] == "query" and conv["document"]["prompt_type"] == "document"
    assert conv["query"]["task_metadata"] == "3XCMT2I" and conv["query"]["mteb"] == rec
    assert r["task"]["n"] == 192


def test_cache_key_holds_the_meta(tmp_path, monkeypatch, clip_dir):
    """A different revision in the ModelMeta is a different cache entry: nothing is reused."""
    register_tiny(monkeypatch, clip_dir)
    first = ours(tmp_path, f"mteb:{TINY_NAME}", "3xcm")
    assert first["timings"]["image_embedding"]["cached"] == 0
    again = ours(tmp_path, f"mteb:{TINY_NAME}", "3xcm")
    assert again["timings"]["image_embedding"]["embedded"] == 0  # same meta: all from cache
    import tests.benchmark.mteb_helpers as mh

    monkeypatch.setattr(mh, "TINY_REVISION", "tiny-rev-2")
    register_tiny(monkeypatch, clip_dir)
    other = ours(tmp_path, f"mteb:{TINY_NAME}", "3xcm")
    assert other["model"]["revision"] == "tiny-rev-2"
    assert other["timings"]["image_embedding"]["cached"] == 0
    assert other["scores"]["overall"]["SP"] == first["scores"]["overall"]["SP"]


def test_agrees_with_our_own_adapter(tmp_path, tiny, clip_dir):
    """mteb's CLIP wrapper and our hf_clip adapter on one checkpoint: same vectors, same SP."""
    from benchmark.registry import load_model
    from tests.benchmark.models.tiny import TEXTS, images

    a = load_model(f"mteb:{TINY_NAME}", device="cpu")
    b = load_model(f"hf_clip:{clip_dir}", device="cpu")
    ims = images(3)

    def unit(x):  # mteb's CLIP wrapper returns raw projections, ours unit vectors: cosine
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    for role in ("query", "document"):
        np.testing.assert_allclose(unit(a.encode_texts(TEXTS, role)),
                                   b.encode_texts(TEXTS, role), rtol=0, atol=2e-6)
        np.testing.assert_allclose(unit(a.encode_images(ims, role)),
                                   b.encode_images(ims, role), rtol=0, atol=2e-6)
    ra = ours(tmp_path, f"mteb:{TINY_NAME}", "3xcm")["scores"]
    rb = ours(tmp_path, f"hf_clip:{clip_dir}", "3xcm")["scores"]
    for k in ("wins_sem", "wins_cul", "wins_non", "SP", "SP_ci95"):
        assert ra["overall"][k] == rb["overall"][k], k
    assert {c: s["SP"] for c, s in ra["by_country"].items()} == {
        c: s["SP"] for c, s in rb["by_country"].items()}


def _evaluate(tmp_path: Path, tasks: list) -> dict:
    import mteb

    model = mteb.get_model(TINY_NAME)
    res = mteb.evaluate(model, tasks=tasks, cache=mteb.ResultCache(str(tmp_path / "mteb")),
                        overwrite_strategy="always", show_progress_bar=False)
    return {tr.task_name: tr for tr in res.task_results}


def _round6(x):
    if isinstance(x, float):
        return round(x, 6)
    if isinstance(x, dict):
        return {k: _round6(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_round6(v) for v in x]
    return x


def test_mteb_evaluate_gives_our_numbers_exactly(tmp_path, tiny):
    from benchmark.mteb import meta
    from benchmark.mteb import tasks as mteb_tasks

    got = _evaluate(tmp_path, mteb_tasks.tasks(("t2i", "i2i"), dataset=RELEASE))
    for kind, task in (("t2i", "3xcm"), ("i2i", "3xcm-i2i")):
        mine = ours(tmp_path, f"mteb:{TINY_NAME}", task)
        tr = got[meta.NAMES[kind]]
        scores = tr.scores["test"][0]
        assert scores["main_score"] == mine["scores"]["overall"]["SP"]
        back = meta.from_mteb_scores(kind, scores)
        for group in ("overall", "by_country", "by_language", "by_concept"):
            assert back[group] == mine["scores"][group], (task, group)  # every digit
        assert tr.dataset_revision == mine["task"]["data_fingerprint"]
        # mteb's JSON: the same numbers to its 6 decimals
        f = next((tmp_path / "mteb").rglob(f"{meta.NAMES[kind]}.json"))
        disk = json.loads(f.read_text())["scores"]["test"][0]
        assert meta.from_mteb_scores(kind, disk)["by_country"] == _round6(
            mine["scores"]["by_country"])


def test_mteb_evaluate_xm3600_gives_our_numbers(tmp_path, tiny):
    from benchmark.mteb import meta
    from benchmark.mteb import tasks as mteb_tasks

    xm = make_official(tmp_path / "xm3600")
    got = _evaluate(tmp_path, mteb_tasks.tasks(("i2t",), xm3600=str(xm)))
    tr = got["XM3600I2TMixedPool"]
    out = tmp_path / "ours-xm"
    assert main(["run", "--model", f"mteb:{TINY_NAME}", "--task", "xm3600-i2t", "--xm3600",
                 str(xm), "--output-dir", str(out), "--cache-dir", str(tmp_path / "c"),
                 "--device", "cpu"]) == 0
    mine = json.loads(next(out.glob("*/xm3600-i2t.json")).read_text())
    back = meta.from_mteb_scores("i2t", tr.scores["test"][0])
    assert back["overall"] == mine["scores"]["overall"]
    assert back["by_locale"] == mine["scores"]["by_locale"]
    assert tr.scores["test"][0]["main_score"] == mine["scores"]["overall"]["dlbkl@10"]


def test_mteb_run_cli_and_report_reads_both(tmp_path, tiny, clip_dir, capsys):
    from benchmark.mteb.run import main as mteb_main
    from benchmark.report.collect import collect

    folder = tmp_path / "mteb-results"
    assert mteb_main(["run", "-m", TINY_NAME, "-t", "3XCMT2I", "--xcm3-dataset", RELEASE,
                      "--output-folder", str(folder), "--xcm3-bootstrap", "200"]) == 0
    f = folder / "results" / TINY_NAME.replace("/", "__") / TINY_REVISION / "3XCMT2I.json"
    disk = json.loads(f.read_text())
    assert disk["scores"]["test"][0]["xcm3"]["settings"]["bootstrap_resamples"] == 200
    # a non-3XCM mteb result beside it is listed as skipped, not mixed in
    (f.parent / "STS12.json").write_text(json.dumps(
        {"task_name": "STS12", "mteb_version": "2.26.24", "scores": {"test": [{"main_score": 0.5}]}}))
    mine = ours(tmp_path, f"hf_clip:{clip_dir}", "3xcm", "--bootstrap", "200",
                out=tmp_path / "ours")
    col = collect([folder, tmp_path / "ours"])
    res = col.task("3xcm")
    assert set(res) == {f"mteb:{TINY_NAME}", f"hf_clip:{clip_dir}"}
    got = res[f"mteb:{TINY_NAME}"]
    assert got.scores["overall"] == _round6(mine["scores"]["overall"])  # same model weights
    assert got.task.data_fingerprint == mine["task"]["data_fingerprint"]
    assert got.settings["mteb_json_rounding"] == 6 and got.source["runner"] == "mteb"
    assert [why for p, why in col.skipped if p.endswith("STS12.json")] == [
        "an mteb result of task 'STS12', not one of 3XCM's (3XCMT2I, 3XCMI2I, XM3600I2TMixedPool)"]
    rep = tmp_path / "report"
    assert main(["report", str(folder), str(tmp_path / "ours"), "--out", str(rep)]) == 0
    md = (rep / "leaderboard.md").read_text()
    sp = f"{mine['scores']['overall']['SP']:.3f}"
    rows = [x for x in md.splitlines() if x.startswith(("| mteb:", "| hf_clip:"))]
    assert len(rows) >= 2 and all(f"| {sp} |" in x for x in rows[:2])  # one table, one dataset


def test_ls_mteb_lists_text_image_models(capsys):
    assert main(["ls", "--mteb"]) == 0
    out = capsys.readouterr().out
    assert "mteb:openai/clip-vit-large-patch14" in out
    line = next(x for x in out.splitlines() if "mteb:openai/clip-vit-large-patch14 " in x)
    assert "32bd64288804d66eefd0ccbe215aa642df71cc41" in line and "dim=768" in line
    assert "mteb:sentence-transformers/all-MiniLM-L6-v2" not in out  # text only


def test_unknown_mteb_name_is_one_line_exit_2(tmp_path, capsys):
    rc = main(["run", "--model", "mteb:openai/clip-vit-large-patch41", "--task", "3xcm",
               "--dataset", RELEASE, "--output-dir", str(tmp_path / "o"),
               "--cache-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "openai/clip-vit-large-patch14" in err[0] and "ls --mteb" in err[0]


def test_mteb_run_offline_is_one_line_not_a_traceback(tmp_path, capsys, monkeypatch):
    """A model that is not in the local cache, offline: one line naming the way out."""
    from benchmark.mteb.run import main as mteb_main

    monkeypatch.chdir(tmp_path)
    rc = mteb_main(["run", "-m", "openai/clip-vit-base-patch32", "-t", "3XCMT2I",
                    "--xcm3-dataset", RELEASE, "--output-folder", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1].startswith("error: ")
    assert "offline, HF_HUB_OFFLINE=1: the model and dataset must be in the local cache" in err[-1]
    assert not any("Traceback" in line for line in err)
