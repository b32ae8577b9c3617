"""Test-wide settings: no network, every cache in a temp dir, no progress bars, nothing
written into the folder the tests run from.

Hub libraries read their offline flags at import time, so they are set here, before any test
module imports them (tests never touch the internet).
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import pytest

from core import logs

_TMP = tempfile.mkdtemp(prefix="xcm-tests-")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ["HF_HOME"] = os.path.join(_TMP, "hf")
os.environ["HF_DATASETS_CACHE"] = os.path.join(_TMP, "hf", "datasets")
os.environ["XCM_CACHE_DIR"] = os.path.join(_TMP, "xcm-cache")
os.environ["XDG_CACHE_HOME"] = os.path.join(_TMP, "xdg")
os.environ["TQDM_DISABLE"] = "1"
os.environ["MPLBACKEND"] = "Agg"
os.environ.pop("GEMINI_API_KEY", None)
os.environ.pop("GOOGLE_API_KEY", None)


@pytest.fixture(autouse=True)
def _logging_per_test():
    """A CLI configures logging once per process (``core.logs``); here each test is a
    process of its own: the project's handler (added by a CLI in this test, or in a module
    fixture before it) is removed before and after, so it never writes into another test's
    stderr."""
    root = logging.getLogger()
    level = root.level

    def drop() -> None:
        for h in [h for h in root.handlers if h.get_name() == logs.HANDLER_NAME]:
            root.removeHandler(h)

    drop()
    yield
    drop()
    root.setLevel(level)


_TQDM_INIT = __import__("tqdm.std").std.tqdm.__dict__["__init__"]


@pytest.fixture(autouse=True)
def _progress_bars_as_they_were():
    """``-q`` turns tqdm off for the rest of its process (``core.logs.no_progress_bars``);
    here each test (and module fixture) is a process of its own."""
    from tqdm import std

    std.tqdm.__init__ = _TQDM_INIT
    yield
    std.tqdm.__init__ = _TQDM_INIT
    os.environ["TQDM_DISABLE"] = "1"


_RUN_FROM_NOISE = {".pytest_cache", "__pycache__", ".coverage"}


@pytest.fixture(autouse=True)
def _nothing_written_where_tests_run():
    """A test writes into its ``tmp_path``, never into the folder pytest runs from (the
    checkout): a CLI called without ``--output-dir`` / ``--workdir`` would leave its default
    folder there. The test that made a new entry fails, naming it."""
    here = Path.cwd()
    before = set(os.listdir(here))
    yield
    new = sorted(set(os.listdir(here)) - before - _RUN_FROM_NOISE)
    assert not new, f"this test wrote {new} into {here}: give it a tmp_path"
