"""Unpinned inputs: the first reproduce run records what it resolved, a later run that
resolves another revision is refused unless --allow-revision-change."""

from __future__ import annotations

import json

import pytest

from benchmark.cache import EmbeddingCache
from benchmark.models.base import ModelSpec
from benchmark.reproduce import pins
from benchmark.reproduce import run as run_mod
from benchmark.reproduce.plan import DatasetRef, Job, ReproduceConfig
from benchmark.reproduce.suite import reproduce
from benchmark.tasks.base import RunContext
from benchmark.tasks.xm3600 import XM3600Config
from core import datatables
from tests.benchmark.reproduce_data import write_official_xm3600


def test_model_revisions_name_every_part():
    spec = ModelSpec(name="m", family="mclip", checkpoint="M-CLIP/X", revision="abc",
                     extra={"image_model": "ViT-L-14/openai", "image_revision": "def",
                            "base": "vidore/base", "base_revision": "123", "other": 1})
    assert pins.model_revisions(spec) == {"checkpoint": "M-CLIP/X@abc",
                                          "base_revision": "vidore/base@123",
                                          "image_revision": "ViT-L-14/openai@def"}


def test_first_value_recorded_another_refused_unless_allowed(tmp_path):
    path = tmp_path / pins.PINS_FILE
    pins.check_and_record(path, "models", "m", {"checkpoint": "r@1"}, False)
    pins.check_and_record(path, "models", "m", {"checkpoint": "r@1"}, False)  # the same: fine
    with pytest.raises(pins.RevisionChanged, match=r"resolved checkpoint r@2.*recorded "
                                                   r"checkpoint r@1.*--allow-revision-change"):
        pins.check_and_record(path, "models", "m", {"checkpoint": "r@2"}, False)
    assert pins.load(path)["models"]["m"] == {"checkpoint": "r@1"}
    pins.check_and_record(path, "models", "m", {"checkpoint": "r@2"}, True)
    assert pins.load(path)["models"]["m"] == {"checkpoint": "r@2"}


@pytest.fixture(scope="module")
def xm(tmp_path_factory):
    return write_official_xm3600(tmp_path_factory.mktemp("xm") / "xm3600")


def test_reproduce_refuses_a_model_that_resolves_to_another_commit(tmp_path, xm, monkeypatch):
    real = run_mod.open_context
    rev = {"now": "a" * 40}

    def opener(cfg):
        ctx = real(cfg)
        ctx.adapter.spec = ctx.adapter.spec.model_copy(update={"revision": rev["now"]})
        return ctx

    monkeypatch.setattr(run_mod, "open_context", opener)
    out = tmp_path / "repro"

    def go(**kw):
        (out / "reproduce-state.json").unlink(missing_ok=True)  # every job runs again
        return reproduce(ReproduceConfig(output_dir=out, models="hash", tasks="rq1",
                                         xm3600_dataset=str(xm), cache_dir=tmp_path / "c",
                                         **kw))

    assert go().summary.ran == 1
    recorded = json.loads((out / pins.PINS_FILE).read_text())["models"]["hash"]
    assert recorded == {"checkpoint": f"hash-64@{'a' * 40}"}
    rev["now"] = "b" * 40
    second = go()
    (failed,) = second.summary.failed
    assert "recorded checkpoint hash-64@aaaa" in failed.detail and "--allow-revision-change" in \
        failed.detail
    third = go(allow_revision_change=True)
    assert third.summary.ran == 1 and not third.summary.failed
    assert pins.load(out / pins.PINS_FILE)["models"]["hash"]["checkpoint"].endswith("b" * 40)


def test_an_unpinned_hub_dataset_is_pinned_by_its_fingerprint(tmp_path, xm):
    import shutil

    from benchmark.registry import load_model

    data = tmp_path / "xm"
    shutil.copytree(xm, data)
    job = Job("hash", "xm3600-i2t", DatasetRef(str(data)), ks=(1,))  # no stamp: a hub id
    seen: list[tuple] = []

    def pin(kind, name, value):
        seen.append((kind, name, value))
        pins.check_and_record(tmp_path / pins.PINS_FILE, kind, name, value, False)

    def ctx():
        return RunContext(load_model("hash"), EmbeddingCache(tmp_path / "c"), tmp_path / "o")

    run_mod.check_dataset(ctx(), job, XM3600Config(xm3600=str(data)), pin)
    assert seen[0][:2] == ("datasets", f"{data} (unpinned)") and len(seen[0][2]) == 64
    cap = data / "captions.jsonl"
    cap.write_text(cap.read_text(encoding="utf-8").replace("img000 en", "img000 en!"),
                   encoding="utf-8")
    with pytest.raises(pins.RevisionChanged, match="unpinned"):
        run_mod.check_dataset(ctx(), job, XM3600Config(xm3600=str(data)), pin)
    # a dataset with a revision, or a local folder, is pinned already: nothing recorded
    pinned = Job("hash", "xm3600-i2t", DatasetRef(str(data), revision="v1"), ks=(1,))
    run_mod.check_dataset(ctx(), pinned, XM3600Config(xm3600=str(data)), pin)
    assert len(seen) == 2
    assert datatables.data_dir().is_dir()


def test_dry_run_shows_what_the_first_run_recorded(tmp_path):
    from benchmark.reproduce import dryrun
    from benchmark.reproduce.plan import build_plan

    plan = build_plan(ReproduceConfig(output_dir=tmp_path, models="mclip-xlmr-l14",
                                      tasks="rq1"))
    before = {d.repo: d for d in dryrun.downloads(plan)}
    assert before["M-CLIP/XLM-Roberta-Large-Vit-L-14"].revision is None
    text = dryrun.format_dry_run(plan, list(before.values()), [])
    assert "unpinned (latest; the first run records it)" in text
    pins.check_and_record(tmp_path / pins.PINS_FILE, "models", "mclip-xlmr-l14",
                          {"checkpoint": "M-CLIP/XLM-Roberta-Large-Vit-L-14@c0ffee",
                           "image_revision": "ViT-L-14/openai@beef"}, False)
    after = {d.repo: d for d in dryrun.downloads(plan)}
    assert after["M-CLIP/XLM-Roberta-Large-Vit-L-14"].revision == "c0ffee"
    assert after["timm/vit_large_patch14_clip_224.openai"].revision == "beef"
    assert "recorded by the first run" in after["timm/vit_large_patch14_clip_224.openai"].note
    assert set(after) == set(before)


def test_allow_revision_change_is_a_flag_and_reaches_each_devices_process(tmp_path):
    from benchmark.cli import build_parser
    from benchmark.reproduce.parallel import child_args

    args = build_parser().parse_args(["reproduce", "--output-dir", str(tmp_path),
                                      "--allow-revision-change"])
    assert args.allow_revision_change is True
    cfg = ReproduceConfig(output_dir=tmp_path, allow_revision_change=True)
    assert "--allow-revision-change" in child_args(cfg, "clip-l14")
    assert "--allow-revision-change" not in child_args(ReproduceConfig(output_dir=tmp_path),
                                                       "clip-l14")
