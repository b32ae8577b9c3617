"""Human review of 3XCM in Label Studio: push tasks, pull annotations, decide, measure agreement.

``python -m annotation push|pull|status|serve-images|sync`` (see ``docs/annotation.md`` and
``ARCHITECTURE.md``). :func:`main` is the ``review`` stage of ``python -m pipeline run``: the
``sync`` command, its flags without the command word.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """The ``review`` stage (:func:`annotation.cli.stage_main`), imported lazily so importing the
    package is cheap."""
    from annotation.cli import stage_main

    return stage_main(argv)
