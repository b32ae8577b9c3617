"""Test-wide settings: no network, every cache in a temp dir, no progress bars.

Hub libraries read their offline flags at import time, so they are set here, before any test
module imports them (DESIGN: tests never touch the internet).
"""

from __future__ import annotations

import os
import tempfile

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
