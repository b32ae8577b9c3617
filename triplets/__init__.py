"""3XCM triplets: seeded sampling from the tagged image pool, validation, export and publishing.

``python -m triplets sample|validate|export|publish`` (see :mod:`triplets.cli` and
``ARCHITECTURE.md``). :func:`main` is the ``triplets`` stage of ``python -m pipeline run``: the
``sample`` command, its flags without the command word.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """The ``triplets`` stage (:func:`triplets.cli.stage_main`), imported lazily."""
    from triplets.cli import stage_main

    return stage_main(argv)
