"""Numeric options are checked where they are declared: a bad value is a usage error (exit 2)
that names the flag, before any model or data is touched."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from benchmark import cli
from core.options import add_options, option


def _exit_and_message(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err
    return int(e.value.code), err.strip().splitlines()[-1]


RUN = ["run", "--model", "m", "--task", "3xcm-matrix"]


@pytest.mark.parametrize("flag,value,bound", [
    ("--bootstrap", "-5", 0),
    ("--batch-size", "0", 1),
    ("--batch-size", "-1", 1),
    ("--seed", "-3", 0),
])
def test_run_rejects_out_of_range_numbers(flag: str, value: str, bound: int,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, last = _exit_and_message([*RUN, flag, value], capsys)
    assert code == 2
    assert last.endswith(f"argument {flag}: must be at least {bound}, got {int(value)}")


def test_smoke_rejects_zero_batch_size(capsys: pytest.CaptureFixture[str]) -> None:
    code, last = _exit_and_message(["smoke", "--model", "m", "--batch-size", "0"], capsys)
    assert code == 2
    assert last.endswith("argument --batch-size: must be at least 1, got 0")


def test_bound_accepts_the_minimum_and_keeps_int_parsing() -> None:
    @dataclasses.dataclass
    class C:
        n: int = option("n", 3, minimum=0)
        m: int | None = option("m", None, minimum=1)

    p = argparse.ArgumentParser(exit_on_error=False)
    add_options(p, C)
    ns = p.parse_args(["--n", "0", "--m", "1"])
    assert (ns.n, ns.m) == (0, 1)
    assert p.parse_args([]).n == 3
    with pytest.raises(argparse.ArgumentError, match="invalid int value: 'x'"):
        p.parse_args(["--n", "x"])


@pytest.mark.parametrize("spec,message", [
    ("xx", "error: --query-languages: unknown language 'xx'; known: "
           "en,de,zh,ja,fr,es,pt,ar,th,hi,sw,yo"),
    ("EN", "error: --query-languages: unknown language 'EN' (codes are lower case: en)"),
    ("all,en", "error: --query-languages: 'all' cannot be combined with other languages"),
    (",", "error: --query-languages: empty list"),
])
def test_matrix_rejects_bad_query_languages_before_loading(
        spec: str, message: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_loading(*a: object, **k: object) -> None:
        raise AssertionError("opened a run context for a bad option")
    monkeypatch.setattr(cli, "open_context", no_loading)
    code = cli.main([*RUN, "--query-languages", spec])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [message]


@pytest.mark.parametrize("value", ["", " ", ","])
def test_an_empty_query_language_list_is_refused(value, tmp_path, capsys):
    assert cli.main(["run", "--model", "hash", "--task", "3xcm-matrix", "--dataset",
                     "data/synthetic-3xcm", "--output-dir", str(tmp_path / "r"),
                     "--query-languages", value, "--no-cache", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--query-languages: empty list" in err[0]
