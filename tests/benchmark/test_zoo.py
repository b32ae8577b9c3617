"""One record per model (benchmark/zoo.py): validated, and the one source of the listing, the
conventions profiles and the reproduce dry run."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import types
from pathlib import Path

import pytest

from benchmark import cache, registry, zoo
from benchmark.cli import main
from benchmark.models import conventions as conv
from benchmark.models.base import ModelSpec
from benchmark.reproduce import dryrun, provenance
from benchmark.reproduce.plan import ReproduceConfig, build_plan
from core import datatables

ROOT = Path(__file__).resolve().parents[2]
CLIP_REV = "32bd64288804d66eefd0ccbe215aa642df71cc41"
# sha256 of every paper model's conventions (cache key and recorded form) under both profiles,
# as main computed them before the records moved into the zoo: caches stay valid.
CONVENTIONS_SHA256 = "f900b80179223d3cac761a68f1e03985398294692ff870c681e67f9db169e443"


def test_recorded_conventions_and_cache_keys_are_byte_identical():
    d = {f"{n}/{p}": [conv.resolve(n, p).cache_key(), conv.resolve(n, p).as_dict()]
         for n in conv.PAPER_CONVENTIONS for p in conv.PROFILES}
    blob = json.dumps(d, sort_keys=True, ensure_ascii=False).encode()
    assert hashlib.sha256(blob).hexdigest() == CONVENTIONS_SHA256
    assert list(conv.PAPER_CONVENTIONS) == list(zoo.paper_models())


class _Stub:
    spec = ModelSpec(name="clip-l14", family="hf_clip", checkpoint="openai/clip-vit-large-patch14",
                     revision=CLIP_REV)
    profile = dataclasses.replace(conv.resolve("clip-l14", "authors"), dtype="float32")

    def conventions(self, modality, role):
        return {"pooling": "x"}


def test_a_profiled_cache_namespace_is_unchanged():
    """The namespaces main gave this adapter before the move (text and image)."""
    assert cache.namespace(_Stub(), "text", "query") == (
        "46aa9541de9433c1a2c169f67417e4a567478f78bf664f2de4760727b1d5c996")
    assert cache.namespace(_Stub(), "image", "query") == (
        "47450a37fc30bc777fa530e3f20d813c8cb819328fe1bf0dfb582bf51406b420")


def test_a_revision_is_written_once():
    """The pin of openai/clip-vit-large-patch14 lives in one place of the code and data."""
    hits = [(p.relative_to(ROOT).as_posix(), p.read_text(errors="replace").count(CLIP_REV))
            for sub in ("benchmark", "data") for p in (ROOT / sub).rglob("*")
            if p.is_file() and p.suffix in {".py", ".csv", ".toml", ".json", ".md"}]
    assert [h for h in hits if h[1]] == [("benchmark/zoo.py", 1)]
    assert not (ROOT / "data/reproduce/downloads.csv").exists()


def _zoo_with(new_rev: str, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A fresh copy of benchmark/zoo.py with the clip-l14 transformers pin changed in its one
    place."""
    src = Path(zoo.__file__).read_text()
    assert src.count(CLIP_REV) == 1
    mod = types.ModuleType("zoo_copy")
    monkeypatch.setitem(sys.modules, "zoo_copy", mod)  # dataclasses look their module up
    exec(compile(src.replace(CLIP_REV, new_rev), "zoo_copy", "exec"), mod.__dict__)  # noqa: S102
    return mod


def test_one_revision_changed_in_the_record_changes_everything(monkeypatch, tmp_path, capsys):
    new = "ab" * 20
    other = _zoo_with(new, monkeypatch)
    monkeypatch.setattr(zoo, "FAMILIES", other.FAMILIES)
    for name in ("MODELS", "FAMILIES", "TASKS"):
        monkeypatch.setattr(registry, name, {})
    registry.register_zoo(other.TASKS, other.FAMILIES)
    monkeypatch.setattr(conv, "PAPER_CONVENTIONS", conv.paper_conventions(zoo.paper_models()))
    # conventions: what load_model applies, what results record, what keys the cache
    rec = conv.resolve("clip-l14", "authors")
    assert (rec.revision, rec.cache_key()["revision"]) == (new, new)
    # the listing
    assert main(["ls"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "clip-l14-hf " in ln)
    assert f"rev={new[:12]}" in line
    assert registry.models()["clip-l14-hf"].kwargs["revision"] == new
    # the dry run and the real-checkpoint check
    plan = build_plan(ReproduceConfig(output_dir=tmp_path, models="clip-l14"))
    repos = {d.repo: d.revision for d in dryrun.downloads(plan)}
    assert repos["openai/clip-vit-large-patch14"] == new
    assert provenance.paper_checkpoints("clip-l14")["openai/clip-vit-large-patch14"] == new


def test_paper_records_match_table_6_and_list_their_downloads():
    table6 = {r["full_name"]: float(r["parameters"].rstrip("M"))
              for r in datatables.data_csv("paper/table6_models.csv")}
    paper = zoo.paper_models()
    assert len(paper) == 10 and all(m.paper for m in paper.values())
    for name, m in paper.items():
        short = m.downloads[0].repo.split("/")[1]
        assert table6[short] == m.parameters, name
    col = paper["colqwen2.5-v0.2"].pinned_downloads()
    assert [(d.repo, d.revision) for d in col] == [
        ("vidore/colqwen2.5-v0.2", "6f6fcdfd1a114dfe365f529701b33d66b9349014"),
        ("vidore/colqwen2.5-base", None)]
    assert {m.similarity for m in paper.values()} == {"cosine", "maxsim"}


@pytest.mark.parametrize(("field", "value", "message"), [
    ("revision", "main", "neither a 40-hex commit"),
    ("similarity", "dot", "similarity 'dot'"),
    ("modalities", ("text", "audio"), "modalities"),
    ("embedding_size", 0, "embedding_size 0"),
    ("parameters", -1.0, "parameters -1.0"),
    ("languages", ("English",), "ISO 639"),
    ("profiles", True, "only the paper's models"),
    ("downloads", (zoo.Download("no-slash", "weights"),), "needs owner/name"),
])
def test_a_malformed_record_is_refused(field, value, message):
    with pytest.raises(zoo.ZooError, match=message):
        zoo.Model(**{"name": "x", "checkpoint": "a/b", "revision": None, "description": "d",
                     field: value})
    with pytest.raises(zoo.ZooError, match="lists the hub repos"):
        zoo.Model("x", "a/b", None, "d", paper=True)


def test_a_profile_builder_without_its_record_is_refused():
    records = dict(zoo.paper_models())
    records.pop("jina-v4")
    with pytest.raises(conv.ConventionsError, match=r"\['jina-v4'\] have no zoo model"):
        conv.paper_conventions(records)


def test_the_models_table_of_the_docs_agrees_with_the_records():
    """docs/models.md's table (name, revision, output size) is checked against the zoo."""
    import re

    recs = zoo.models()
    rows = {}
    for line in (ROOT / "docs/models.md").read_text().splitlines():
        m = re.match(r"\| `([^`]+)`( ★)? \| .*? \| (`[^`]*`|None|same) \| `?\w*`? \| (\d+)-d", line)
        if m and m.group(1) in recs:
            rows[m.group(1)] = (bool(m.group(2)), m.group(3), int(m.group(4)))
    assert set(rows) == set(recs) - {"hash"}
    for name, (star, rev, dim) in rows.items():
        r = recs[name]
        assert star == r.paper and dim == r.embedding_size, name
        if rev != "same":
            assert rev == (f"`{r.revision}`" if r.revision else "None"), name


def test_a_profile_cannot_redeclare_the_records_identity(monkeypatch):
    """A conventions profile is an overlay: a checkpoint, revision, adapter or similarity of
    its own is refused; what it loads and how it words its scorer must agree with the zoo."""
    records = dict(zoo.paper_models())
    for bad, words in ((conv.Conventions("x", checkpoint="a/b"), "re-declare the record's "
                        "checkpoint"), (conv.Conventions("x", similarity="dot"), "similarity"),
                       (conv.Conventions("x", loads="no-such-model"), "loads 'no-such-model'"),
                       (conv.Conventions("x", scorer="cosine of pooled tokens"), "maxsim")):
        monkeypatch.setitem(conv._BUILD, "colqwen2.5-v0.2",
                            lambda m, bad=bad: {"reference": bad, "authors": bad})
        with pytest.raises(conv.ConventionsError, match=words):
            conv.paper_conventions(records)
    rec = conv.resolve("clip-l14", "authors")  # loads clip-l14-hf: its identity, derived
    hf = zoo.models()["clip-l14-hf"]
    assert (rec.target, rec.extra, rec.checkpoint, rec.revision) == (
        hf.target, hf.extra, hf.checkpoint, hf.revision)
    assert conv.resolve("clip-l14", "reference").checkpoint is None  # the model's own


def test_the_similarity_is_the_records_alone():
    """jina-v4-multi says maxsim once, in its record: the adapter is told (multi_vector) from
    it, and an adapter that scores otherwise than its record is refused at load."""
    multi = registry.models()["jina-v4-multi"]
    assert multi.similarity == "maxsim" and "multi_vector" not in multi.options
    assert multi.kwargs["multi_vector"] is True
    assert "multi_vector" not in registry.models()["jina-v4"].kwargs
    registry.register_model("claims-cosine", "tests.benchmark.test_zoo:MultiVectorHash")
    try:
        with pytest.raises(registry.RegistryError, match="scores by maxsim, its record says cosine"):
            registry.load_model("claims-cosine")
    finally:
        del registry.MODELS["claims-cosine"]


class MultiVectorHash:
    """An adapter whose spec says multi-vector (MaxSim)."""

    def __init__(self, name: str, **kw):
        from benchmark.models.base import model_spec

        self.spec = model_spec(name, "test", "x", multi_vector=True)


def test_one_builder_of_model_spec():
    """Every adapter's ModelSpec comes from models.base.model_spec (no hand-built copies)."""
    import ast

    hits = []
    for p in (ROOT / "benchmark").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(
                    node.func, "attr", None)) == "ModelSpec"):
                hits.append(p.relative_to(ROOT).as_posix())
    assert hits == ["benchmark/models/base.py"]
