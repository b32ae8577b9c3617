"""Human review of 3XCM in Label Studio: push tasks, pull annotations, decide, measure agreement
(``python -m annotation``; docs/annotation.md). :func:`main` is the pipeline's ``review`` stage.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """The ``review`` stage (:func:`annotation.cli.stage_main`), imported lazily."""
    from annotation.cli import stage_main

    return stage_main(argv)
