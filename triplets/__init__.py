"""3XCM triplets: seeded sampling, validation, export and publishing (``python -m triplets``).
:func:`main` is the pipeline's ``triplets`` stage (``sample``).
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """The ``triplets`` stage (:func:`triplets.cli.stage_main`), imported lazily."""
    from triplets.cli import stage_main

    return stage_main(argv)
