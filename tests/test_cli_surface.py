"""What every command line shows before it runs: ``--version`` (the one version, from the
package metadata) and help text without reST markup."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata

import pytest

import benchmark
import core

CLIS = ["benchmark.cli", "pipeline.cli", "annotation.cli", "triplets.cli",
        "builder.concepts", "builder.concept_dedup", "builder.queries", "builder.crawl.stage",
        "builder.image_dedup", "builder.ingest", "builder.tagging.stage"]


def parsers(p: argparse.ArgumentParser):
    yield p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                yield from parsers(sub)


def build(module: str) -> argparse.ArgumentParser:
    return importlib.import_module(module).build_parser()


def test_one_version_from_the_package_metadata():
    assert core.__version__ == importlib.metadata.version("xcm3")
    assert not hasattr(benchmark, "__version__")  # one constant, in core


@pytest.mark.parametrize("module", CLIS)
def test_version_and_clean_help(module, capsys):
    p = build(module)
    with pytest.raises(SystemExit) as e:
        p.parse_args(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip().endswith(f" {core.__version__}")
    for sub in parsers(p):
        text = sub.format_help()
        assert "`" not in text, f"{sub.prog}: reST markup in --help:\n{text}"


def test_the_demo_has_a_version_too(capsys):
    from pipeline import demo

    with pytest.raises(SystemExit) as e:
        demo.main(["--version"])
    assert e.value.code == 0 and core.__version__ in capsys.readouterr().out


def test_a_reader_that_went_away_is_no_internal_error(tmp_path, monkeypatch):
    """`python -m builder status | head -1`: the rest of the report goes nowhere, no
    traceback (it was 'internal error: BrokenPipeError')."""
    from core.clikit import report

    class Gone:
        def __init__(self):
            self.file = open(tmp_path / "out", "w")  # noqa: SIM115 - a real descriptor

        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            pass

        def fileno(self):
            return self.file.fileno()

    gone = Gone()
    monkeypatch.setattr("sys.stdout", gone)
    report("a report")
    gone.file.close()
