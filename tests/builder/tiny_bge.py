"""A tiny random-init BGE-M3-shaped checkpoint (XLM-R) saved in a test's temp dir.

The builder is :func:`pipeline.tiny_models.tiny_bge_m3`, the one the demo uses too.
"""

from __future__ import annotations

from pipeline.tiny_models import BGE_SPECIALS as SPECIALS
from pipeline.tiny_models import tiny_bge_m3 as build_tiny_bge_m3

__all__ = ["SPECIALS", "build_tiny_bge_m3"]
