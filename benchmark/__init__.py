"""3XCM evaluator: score retrievers for association (SP) and prevalence (LBKL/DLBKL) bias.

This package imports nothing from ``builder``, ``annotation`` or ``triplets``: it works on a
published dataset alone. Heavy libraries are imported inside the adapters that need them.
"""

from __future__ import annotations

from core import __version__  # noqa: F401 - the one version (package metadata)
