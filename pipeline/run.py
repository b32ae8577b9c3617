"""Run the stages of :data:`pipeline.stages.STAGES` in order, each through its own ``main``;
each resumes from the catalog, so running again continues where it stopped."""

from __future__ import annotations

import logging
import shlex

from builder.stagekit import StageInputError
from core.clikit import report
from pipeline.stages import STAGES, Stage, names

log = logging.getLogger(__name__)


def select(stages: list[Stage], start: str | None, stop: str | None) -> list[Stage]:
    """The stages from ``start`` to ``stop`` (both included; None = first / last)."""
    order = names(stages)
    for bound in (start, stop):
        if bound is not None and bound not in order:
            raise StageInputError(f"unknown stage {bound!r} (stages: {', '.join(order)})")
    i0 = order.index(start) if start else 0
    i1 = order.index(stop) if stop else len(order) - 1
    if i0 > i1:
        raise StageInputError(f"--from {order[i0]} comes after --to {order[i1]}: no stage to "
                              f"run (stages in order: {', '.join(order)})")
    return stages[i0 : i1 + 1]


def run_stages(
    workdir: str | None,
    start: str | None,
    stop: str | None,
    forward: dict[str, str | None],
    stage_args: dict[str, list[str]],
    stages: list[Stage] | None = None,
) -> int:
    """Run the stages from ``start`` to ``stop`` (names; None: all) in order, each with
    ``--workdir``, the ``forward`` flags its parser has and its ``stage_args``; returns the
    first non-zero exit code, else 0."""
    stages = STAGES if stages is None else stages
    order = names(stages)
    chosen = select(stages, start, stop)
    for name in stage_args:
        if name not in order:
            raise StageInputError(f"--stage-args names no stage: {name!r} (stages: "
                                  f"{', '.join(order)})")
        if name not in names(chosen):
            raise StageInputError(f"--stage-args {name}=...: stage {name} is not run "
                                  f"(--from/--to run {', '.join(names(chosen))})")
    for st in chosen:
        argv = ["--workdir", workdir] if workdir else []
        for flag, value in forward.items():
            if value is not None and st.accepts(flag):
                argv += [flag, value]
        argv += stage_args.get(st.name, [])
        report(f"[{st.name}] {st.command_line} {shlex.join(argv)}")
        rc = st.main(argv)
        if rc:
            report(f"[{st.name}] exited with {rc}; stopping")
            return int(rc)
    return 0
