"""Builder options are declared once (``core.options.option`` on the stage's dataclass):
defaults from the dataclass, bounds checked where the flag is parsed (exit 2), and one meaning
of "retries" (the tries after the first) for ``--retries``, ``--search-retries`` and
``--llm-retries``."""

from __future__ import annotations

import argparse

import pytest

from builder.crawl import stage as crawl
from builder.crawl.download import FetchConfig
from builder.crawl.stage import CrawlConfig
from builder.llm.base import LLMConfig
from core.options import add_options, from_args


def test_crawl_defaults_are_the_dataclasses():
    cfg = crawl.config_from_args(crawl.build_parser().parse_args([]))
    assert cfg == CrawlConfig(fetch=FetchConfig(connect_timeout=10.0))
    cfg = crawl.config_from_args(crawl.build_parser().parse_args(
        ["--retries", "0", "--search-retries", "1", "--languages", "native", "--timeout", "4",
         "--allow-host", "LOCALHOST", "--http2", "--skip-download"]))
    assert (cfg.fetch.retries, cfg.search_retries, cfg.languages) == (0, 1, ("native",))
    assert (cfg.fetch.timeout, cfg.fetch.connect_timeout, cfg.fetch.allow_hosts) == (
        4.0, 4.0, frozenset({"localhost"}))
    assert cfg.fetch.http2 and cfg.skip_download and not cfg.retry_failed


@pytest.mark.parametrize("argv, message", [
    (["--retries", "-1"], "argument --retries: must be at least 0, got -1"),
    (["--search-retries", "-1"], "argument --search-retries: must be at least 0, got -1"),
    (["--search-interval", "-0.5"], "argument --search-interval: must be at least 0, got -0.5"),
    (["--search-backoff", "-1"], "argument --search-backoff: must be at least 0, got -1.0"),
    (["--max-failed-searches", "-1"],
     "argument --max-failed-searches: must be at least 0, got -1"),
    (["--per-query", "0"], "argument --per-query: must be at least 1, got 0"),
    (["--timeout", "0"], "argument --timeout: must be more than 0, got 0.0"),
    (["--max-redirects", "-1"], "argument --max-redirects: must be at least 0, got -1"),
])
def test_crawl_bounds_are_usage_errors(argv, message, capsys, tmp_path):
    work = tmp_path / "work"
    with pytest.raises(SystemExit) as e:
        crawl.main(["--workdir", str(work), *argv])
    assert e.value.code == 2
    assert not work.exists()  # refused before anything is opened or written
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(f"error: {message}")


def _llm_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_options(p, LLMConfig, title="LLM")
    return p


def _cfg(*argv: str) -> LLMConfig:
    return from_args(LLMConfig, _llm_parser().parse_args(list(argv)))


def test_llm_retries_count_the_tries_after_the_first():
    assert _cfg() == LLMConfig()  # the defaults are the client's: 5 retries = 6 attempts
    assert LLMConfig().retries == 5
    assert _cfg("--llm-retries", "0").retries == 0
    assert _cfg("--llm-retries", "2", "--llm", "offline").retries == 2
    assert _cfg("--llm", "offline").spec == "offline"


@pytest.mark.parametrize("argv", [["--llm-retries", "-1"], ["--llm-rpm", "-1"],
                                  ["--llm-max-reasks", "-1"], ["--llm-timeout", "0"]])
def test_llm_bounds_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as e:
        _llm_parser().parse_args(argv)
    assert e.value.code == 2 and f"argument {argv[0]}: must be" in capsys.readouterr().err


def test_image_dedup_options_come_from_its_dataclass(capsys):
    from builder import image_dedup
    from builder.image_dedup import DedupConfig

    parse = image_dedup.build_parser().parse_args
    assert image_dedup.config_from_args(parse([])) == DedupConfig()
    assert image_dedup.config_from_args(parse(["--model", "None"])).model is None
    for argv, message in ((["--phash-distance", "65"], "must be at most 64, got 65"),
                          (["--phash-distance", "-1"], "must be at least 0, got -1"),
                          (["--cosine", "1.5"], "must be at most 1.0, got 1.5"),
                          (["--batch-size", "0"], "must be at least 1, got 0")):
        with pytest.raises(SystemExit) as e:
            parse(argv)
        assert e.value.code == 2
        assert capsys.readouterr().err.strip().endswith(f"argument {argv[0]}: {message}")
