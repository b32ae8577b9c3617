"""Test-wide settings: no network, every cache in a temp dir, no progress bars.

Hub libraries read their offline flags at import time, so they are set here, before any test
module imports them (DESIGN: tests never touch the internet).
"""

from __future__ import annotations

import logging
import os
import tempfile

import pytest

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
    """A CLI configures logging once per process (``benchmark.logs``); here each test is a
    process of its own, so a handler one test's CLI added does not write into the next test's
    stderr."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(h)
    root.setLevel(level)
