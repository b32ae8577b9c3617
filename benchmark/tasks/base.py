"""What a task is: arguments, a ``run`` on a model adapter, and a printed table.

``python -m benchmark run`` builds one :class:`RunContext` (adapter, embedding cache, parsed
arguments, a memo for loaded datasets shared by tasks in the same run), calls each task's
``run`` and writes its :class:`TaskOutput` as ``<output-dir>/<model-slug>/<task>.json``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.cache import EmbeddingCache
from benchmark.models.base import Adapter


@dataclass
class RunContext:
    adapter: Adapter
    cache: EmbeddingCache | None
    args: argparse.Namespace
    output_dir: Path
    memo: dict[str, Any] = field(default_factory=dict)


@dataclass
class TaskOutput:
    """What a task hands back to be written: task info, settings, timings, scores."""

    task: dict[str, Any]
    scores: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


class Task:
    """Base of every task."""

    name: str = ""
    description: str = ""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Task-specific flags (added once per task class to the ``run`` parser)."""

    def run(self, ctx: RunContext) -> TaskOutput:
        raise NotImplementedError  # abstract: each task implements its run

    def format_table(self, out: TaskOutput) -> str:
        """A plain-text table of the main scores (printed by the CLI)."""
        return ""
