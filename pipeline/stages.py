"""The stages of a build, in the order ``python -m pipeline run`` runs them.

The one stage list: the runner, ``python -m pipeline status`` and the demo's plan are built
from :data:`STAGES`. Each entry names its module by importing it, so the import graph shows
the pipeline above the stages. Every module has ``main(argv=None) -> int`` over a library
function (the builder's own stages through ``builder.stagekit.stage_main``; ``review`` and
``triplets`` are the entry points of the ``annotation`` and ``triplets`` packages, imported
lazily there). A stage never calls another stage; the runner calls them in order.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import annotation
import triplets
from builder import concept_dedup, concepts, image_dedup, queries
from builder.crawl import stage as crawl
from builder.tagging import stage as tagging


@dataclass(frozen=True)
class Stage:
    """One stage: its name in the catalog's run records, its module and its command line."""

    name: str
    module: ModuleType
    command: str = ""  # what a user types to run it alone; default ``python -m MODULE``

    @property
    def module_name(self) -> str:
        return self.module.__name__

    @property
    def command_line(self) -> str:
        return self.command or f"python -m {self.module_name.removesuffix('.stage')}"

    @property
    def main(self) -> Callable[[list[str] | None], int]:
        return self.module.main

    def accepts(self, flag: str) -> bool:
        """Whether the stage's own parser has ``flag`` (``--llm``, ``--embedder``); a package
        entry point without a ``build_parser`` takes none of the forwarded flags."""
        build: Callable[[], argparse.ArgumentParser] | None = getattr(
            self.module, "build_parser", None)
        return build is not None and any(flag in a.option_strings for a in build()._actions)


STAGES: list[Stage] = [
    Stage("concepts", concepts),
    Stage("concept_dedup", concept_dedup),
    Stage("queries", queries),
    Stage("crawl", crawl),
    Stage("image_dedup", image_dedup),
    Stage("review", annotation, "python -m annotation sync"),
    Stage("tagging", tagging),
    Stage("triplets", triplets, "python -m triplets sample"),
]


def names(stages: list[Stage] | None = None) -> list[str]:
    """The stage names, in order."""
    return [s.name for s in (STAGES if stages is None else stages)]


def stage(name: str) -> Stage:
    """The stage called ``name``; KeyError names the stages there are."""
    for s in STAGES:
        if s.name == name:
            return s
    raise KeyError(f"unknown stage {name!r} (stages: {', '.join(names())})")
