"""The 3XCM pipeline above the builder, annotation and triplets packages: ``python -m pipeline
[status|export|run]`` and the offline demo ``python -m pipeline.demo``; nothing below imports it."""

from __future__ import annotations
