"""Typed configs: the CLI's flags are built from the config fields; library callers build the
configs directly; the run context carries them, with its caches."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from benchmark.cli import build_parser, task_classes
from benchmark.tasks.base import RunConfig, open_context
from core import options as config
from core.authors import AUTHORS_COLUMNS, read_authors_frame
from core.errors import DataError


def subparser(name: str) -> argparse.ArgumentParser:
    p = build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_every_task_config_field_is_a_run_flag_with_its_default():
    run = subparser("run")
    flags = {a.dest: a for a in run._actions}
    for cls in [RunConfig, *(t.config_class for t in task_classes().values())]:
        for f in dataclasses.fields(cls):
            assert f.name in flags, f"{cls.__name__}.{f.name} has no flag"
            a = flags[f.name]
            assert a.help == config.plain(f.metadata["help"])  # the help, reST markup out
            if f.default is dataclasses.MISSING:
                assert a.required
            else:
                assert a.default == f.default


def test_flags_fill_the_configs():
    args = subparser("run").parse_args(
        ["--model", "hash", "--task", "xm3600-i2t", "--k", "1,5", "--two-stage", "40",
         "--save-topk", "--seed", "3", "--cache-dir", "/tmp/c", "-q"])
    classes = task_classes()
    cfg = config.from_args(classes["xm3600-i2t"].config_class, args)
    assert (cfg.ks, cfg.two_stage, cfg.save_topk, cfg.seed) == ([1, 5], 40, True, 3)
    run = config.from_args(RunConfig, args)
    assert run == RunConfig(model="hash", cache_dir=Path("/tmp/c"), quiet=True)
    xcm = config.from_args(classes["3xcm"].config_class, args)
    assert xcm.bootstrap == 1000 and xcm.seed == 3  # shared fields: one flag, every config


def test_open_context_carries_the_caches(tmp_path):
    ctx = open_context(RunConfig(model="hash", cache_dir=tmp_path / "c", device="cpu",
                                 output_dir=tmp_path / "o"))
    assert ctx.cache is not None and ctx.hash_memo is not None
    assert (tmp_path / "c" / "filehash.sqlite").is_file() and ctx.device == "cpu"
    bare = open_context(RunConfig(model="hash", no_cache=True, output_dir=tmp_path / "o"))
    assert bare.cache is None and bare.hash_memo is None


def test_read_authors_frame_checks_the_file(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        read_authors_frame(tmp_path / "nope.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("query_index,query_image_id\n1,x\n")
    with pytest.raises(DataError, match="not the authors' triplet format") as e:
        read_authors_frame(bad)
    assert "\n" not in str(e.value)
    good = tmp_path / "good.csv"
    good.write_text(",".join(AUTHORS_COLUMNS) + "\n" + ",".join(["NA"] + [""] * 12) + "\n")
    df = read_authors_frame(good)
    assert df.iloc[0]["query_index"] == "NA" and df.iloc[0]["query_concept"] == ""
