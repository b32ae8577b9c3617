"""The stages of a build (``builder.stage_list.STAGES``), each with its module imported, in the
order ``python -m pipeline run`` runs them; each module has ``main(argv=None) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from builder import stage_list


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
        """Whether the stage's own parser has ``flag`` (``--llm``, ``--embedder``)."""
        build: Callable[[], argparse.ArgumentParser] | None = getattr(
            self.module, "build_parser", None)
        return build is not None and any(flag in a.option_strings for a in build()._actions)


STAGES: list[Stage] = [Stage(s.name, importlib.import_module(s.module), s.command)
                       for s in stage_list.STAGES]


def names(stages: list[Stage] | None = None) -> list[str]:
    """The stage names, in order."""
    return [s.name for s in (STAGES if stages is None else stages)]


def stage(name: str) -> Stage:
    """The stage called ``name``; KeyError names the stages there are."""
    for s in STAGES:
        if s.name == name:
            return s
    raise KeyError(f"unknown stage {name!r} (stages: {', '.join(names())})")
